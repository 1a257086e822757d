"""Section 6.1: beam search with beam size 4 and length penalty alpha = 0.6 (GNMT, Wu et al. 2016).

Batched: all sentences of a batch are searched together, ``beam_size`` rows each, over the
model's key/value cache (``cache.reorder`` keeps the surviving hypotheses). A finished
hypothesis Y is scored log P(Y | X) / lp(Y) with lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting
its tokens including EOS. Maximum output length: source length + ``max_len_offset`` tokens
(then EOS is forced).

Early termination (``stop="early"``, the default, as fairseq): each step takes the best
2 * beam_size continuations; an EOS among the first beam_size of them finishes a hypothesis,
the best beam_size others stay alive; a sentence stops as soon as it has beam_size finished
hypotheses. With beam_size 1 this is exactly greedy decoding. ``stop="bound"`` (as
tensor2tensor) instead searches on until no live hypothesis can still beat the worst of the
beam_size best finished ones, even at the maximum length: since log-probabilities only fall
and lp grows with length, the bound is best_alive_logprob / lp(max_len).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from repro.decode.settings import TRANSLATION
from repro.decode.step import BOS, EOS, Stepper, source_lengths
from repro.model import Transformer

STOP_RULES = ("early", "bound")


def length_penalty(length: int | float, alpha: float) -> float:
    """GNMT: lp(Y) = ((5 + |Y|) / (5 + 1))^alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Hypothesis:
    tokens: list[int]
    score: float       # log P / lp
    log_prob: float


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: Tensor,
    *,
    beam_size: int = TRANSLATION.beam_size,
    alpha: float = TRANSLATION.alpha,
    max_len_offset: int = TRANSLATION.max_len_offset,
    use_cache: bool = True,
    stop: str = "early",
    return_hypotheses: bool = False,
) -> list[list[int]] | list[Hypothesis]:
    """Decode each row of ``src`` (batch, n); returns the best token ids (without BOS/EOS) per row."""
    if stop not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES}, got {stop!r}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    was_training = model.training
    model.eval()
    try:
        best = _search(model, src, beam_size, alpha, max_len_offset, use_cache, stop)
    finally:
        model.train(was_training)
    return best if return_hypotheses else [h.tokens for h in best]


def _search(model: Transformer, src: Tensor, k: int, alpha: float, offset: int,
            use_cache: bool, stop: str) -> list[Hypothesis]:
    device, batch = src.device, src.size(0)
    memory, src_mask = model.encode(src)
    rows = torch.arange(batch, device=device).repeat_interleave(k)
    stepper = Stepper(model, memory.index_select(0, rows), src_mask.index_select(0, rows), use_cache)
    limit_all = (source_lengths(src, model.cfg.pad_id) + offset).tolist()
    sents = list(range(batch))                         # original index of each active sentence
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                                 # one live hypothesis to start with
    prefix = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    step = 0
    while sents:
        logp = stepper.log_probs(prefix)               # (A*k, V)
        vocab = logp.size(-1)
        limits = torch.tensor([limit_all[s] for s in sents], device=device)
        forced = limits <= step
        if forced.any():                               # length limit: only EOS may follow
            rows_forced = forced.repeat_interleave(k)
            eos_col = logp[:, EOS].clone()
            logp[rows_forced] = float("-inf")
            logp[rows_forced, EOS] = eos_col[rows_forced]
        cand = (scores.view(-1, 1) + logp).view(len(sents), k * vocab)
        top_s, top_i = cand.topk(2 * k, dim=1)
        beam, tok = top_i // vocab, top_i % vocab
        is_eos = (tok == EOS) & torch.isfinite(top_s)
        counted = is_eos.clone()
        if stop == "early":
            counted[:, k:] = False                     # an EOS must rank among the best k to count
        lp = length_penalty(step + 1, alpha)
        for a, j in counted.nonzero().tolist():
            row = a * k + int(beam[a, j])
            log_prob = float(top_s[a, j])
            finished[sents[a]].append(Hypothesis(prefix[row, 1:].tolist(), log_prob / lp, log_prob))
        live_s, live_pos = top_s.masked_fill(is_eos, float("-inf")).topk(k, dim=1)
        live_beam, live_tok = beam.gather(1, live_pos), tok.gather(1, live_pos)

        keep = []
        for a, s in enumerate(sents):
            done_list = finished[s]
            if stop == "bound" and len(done_list) > k:
                done_list.sort(key=lambda h: -h.score)
                del done_list[k:]
            if forced[a] or not torch.isfinite(live_s[a, 0]):
                continue
            if len(done_list) >= k:
                if stop == "early":
                    continue
                bound = float(live_s[a, 0]) / length_penalty(limit_all[s] + 1, alpha)
                if min(h.score for h in done_list) >= bound:
                    continue
            keep.append(a)
        step += 1
        if not keep:
            break
        keep_t = torch.tensor(keep, device=device)
        index = (keep_t[:, None] * k + live_beam[keep_t]).view(-1)
        stepper.select(index)
        prefix = torch.cat([prefix.index_select(0, index), live_tok[keep_t].view(-1, 1)], 1)
        scores = live_s[keep_t]
        sents = [sents[a] for a in keep]
    return [max(f, key=lambda h: h.score) for f in finished]
