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
from repro.decode.stepper import BOS, EOS, Stepper, source_lengths
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
    """The search, its bookkeeping on the device: per step one host read (which sentences are done),
    whatever the number of sentences; the hypotheses are read back once, at the end."""
    device, batch = src.device, src.size(0)
    memory, src_mask = model.encode(src)
    limit = source_lengths(src, model.cfg.pad_id) + offset        # (B,) output tokens allowed, EOS excluded
    longest = int(src.size(1)) + offset + 1                          # a bound on every prefix (BOS + tokens)
    rows = torch.arange(batch, device=device).repeat_interleave(k)
    stepper = Stepper(model, memory.index_select(0, rows), src_mask.index_select(0, rows), use_cache, longest)
    active = torch.arange(batch, device=device)                      # original index of each active sentence
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                                               # one live hypothesis to start with
    prefix = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)
    # per original sentence: finished hypotheses counted, the k best finished scores (bound rule),
    # and the best one (tokens, length, score, log-probability): first found wins a tie
    count = torch.zeros(batch, dtype=torch.long, device=device)
    kept = torch.full((batch, k), float("-inf"), device=device)
    best = torch.full((batch,), float("-inf"), device=device)
    best_logp = torch.full((batch,), float("-inf"), device=device)
    best_tokens = torch.zeros(batch, longest, dtype=torch.long, device=device)
    best_len = torch.zeros(batch, dtype=torch.long, device=device)
    order = torch.arange(2 * k, device=device)
    step = 0
    while True:
        n = active.numel()
        logp = stepper.log_probs(prefix)                             # (n*k, V)
        vocab = logp.size(-1)
        forced = limit[active] <= step                               # length limit: only EOS may follow
        only_eos = torch.full_like(logp, float("-inf"))
        only_eos[:, EOS] = logp[:, EOS]
        logp = torch.where(forced.repeat_interleave(k)[:, None], only_eos, logp)
        cand = (scores.view(-1, 1) + logp).view(n, k * vocab)
        top_s, top_i = cand.topk(2 * k, dim=1)
        beam, tok = top_i // vocab, top_i % vocab
        is_eos = (tok == EOS) & torch.isfinite(top_s)
        counted = is_eos & (order < k) if stop == "early" else is_eos  # an EOS must rank among the best k
        lp = length_penalty(step + 1, alpha)
        done_s = (top_s / lp).masked_fill(~counted, float("-inf"))   # this step's finished hypotheses
        count[active] += counted.sum(1)
        kept[active] = torch.cat([kept[active], done_s], 1).topk(k, dim=1).values
        step_best, j = done_s.max(1)                                 # first maximum: the earliest found
        better = step_best > best[active]
        source = (torch.arange(n, device=device) * k + beam.gather(1, j[:, None]).squeeze(1))
        tokens = prefix.index_select(0, source)[:, 1:]               # (n, step): the finished prefix
        best[active] = torch.where(better, step_best, best[active])
        best_logp[active] = torch.where(better, top_s.gather(1, j[:, None]).squeeze(1), best_logp[active])
        best_len[active] = best_len[active].masked_fill(better, step)
        if step:
            best_tokens[active, :step] = torch.where(better[:, None], tokens, best_tokens[active, :step])
        live_s, live_pos = top_s.masked_fill(is_eos, float("-inf")).topk(k, dim=1)
        live_beam, live_tok = beam.gather(1, live_pos), tok.gather(1, live_pos)
        finished = forced | ~torch.isfinite(live_s[:, 0])
        enough = count[active] >= k
        if stop == "bound":   # no live hypothesis can still beat the k-th best finished one
            enough &= kept[active, k - 1] >= live_s[:, 0] / length_penalty(limit[active] + 1, alpha)
        keep = (~(finished | enough)).tolist()                       # the step's one host read
        step += 1
        if not any(keep):
            break
        if all(keep):
            keep_t = torch.arange(n, device=device)
        else:
            keep_t = torch.tensor([a for a, alive in enumerate(keep) if alive], device=device)
        index = (keep_t[:, None] * k + live_beam.index_select(0, keep_t)).view(-1)
        stepper.select(index)
        prefix = torch.cat([prefix.index_select(0, index), live_tok.index_select(0, keep_t).view(-1, 1)], 1)
        scores = live_s.index_select(0, keep_t)
        active = active.index_select(0, keep_t)
    lengths, tokens, score, logp = best_len.tolist(), best_tokens.tolist(), best.tolist(), best_logp.tolist()
    return [Hypothesis(tokens[s][:lengths[s]], score[s], logp[s]) for s in range(batch)]
