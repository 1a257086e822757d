"""Section 6.1's decoding, observed on the implementation's own search over scripted models
whose answer is known: the length penalty's ranking, the output limit, early termination, the
beam's width, and decoding with dropout off.

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [38] ... We set the
maximum output length during inference to input length + 50, but terminate early when
possible." Section 6.3: beam 21, alpha = 0.3, input length + 300. The length penalty of [38]
(GNMT, Wu et al. 2016) ranks a finished hypothesis Y by log P(Y|X) / lp(Y), lp(Y) = ((5 + |Y|) /
6)^alpha, |Y| counting its tokens with EOS.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Inconclusive, Measurement, NotApplicable

BOS, EOS = 1, 2
VOCAB = 64
SOURCE_LENGTH = 10
FILLER = 5  # the token scripted paths repeat
#: The ids the adapter protocol leaves to special tokens (padding, begin, end, unknown).
SPECIAL_IDS = range(4)


class Script:
    """A next-token distribution given as a function of the prefix; counts its calls and refuses
    to run on past ``limit`` tokens (a search that never stops would otherwise hang the check)."""

    def __init__(self, rule: Callable[[tuple[int, ...]], dict[int, float] | torch.Tensor], limit: int) -> None:
        self.rule, self.limit, self.calls, self.longest = rule, limit, 0, 0

    def __call__(self, prefix: tuple[int, ...]) -> torch.Tensor:
        self.calls += 1
        self.longest = max(self.longest, len(prefix))
        if len(prefix) > self.limit:
            raise RuntimeError(f"the search asked for token {len(prefix) + 1}, past the output limit {self.limit}")
        dist = self.rule(prefix)
        return dist if isinstance(dist, torch.Tensor) else log_probs(dist)


def log_probs(dist: dict[int, float]) -> torch.Tensor:
    """The (VOCAB,) log-probabilities of a {token: probability} distribution (-inf elsewhere)."""
    out = torch.full((VOCAB,), float("-inf"))
    for token, prob in dist.items():
        out[token] = math.log(prob)
    return out


def length_penalty(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


#: Three finished hypotheses (first token, |Y| with EOS, probability) on which GNMT's penalty, a
#: penalty of |Y|^alpha and no penalty each pick a different winner (found by search).
RANKING_CASES = {
    0.6: [(4, 2, 0.45), (5, 6, 0.40), (6, 27, 0.15)],
    0.3: [(4, 2, 0.40), (5, 8, 0.35), (6, 24, 0.25)],
}


def _settings(claim: Claim) -> tuple[int, float, int]:
    p = claim.params
    return p.get("beam_size", 4), p.get("alpha", 0.6), p.get("max_len_offset", 50)


@checker("decode.ranking")
def ranking(claim: Claim, ctx: CheckContext) -> Measurement:
    """Three paths of known probability and length; the search must return the one with the best
    log P / lp (GNMT). Measured: True when it does; the detail names which rule the returned one
    is best under (GNMT, |Y|^alpha, none)."""
    beam, alpha, offset = _settings(claim)
    if alpha not in RANKING_CASES:
        raise ValueError(f"no ranking case for alpha {alpha}; add one to RANKING_CASES")
    cases = RANKING_CASES[alpha]
    lengths = {first: length for first, length, _ in cases}

    def rule(prefix: tuple[int, ...]) -> dict[int, float]:
        if not prefix:
            return {first: prob for first, _, prob in cases}
        if prefix[0] not in lengths:  # a hypothesis the search keeps at score -inf: end it
            return {EOS: 1.0}
        return {EOS: 1.0} if len(prefix) == lengths[prefix[0]] - 1 else {FILLER: 1.0}

    script = Script(rule, SOURCE_LENGTH + offset)
    out = ctx.target.search(script, SOURCE_LENGTH, VOCAB, beam_size=beam, alpha=alpha, max_len_offset=offset)
    scores = {name: max(cases, key=lambda c: math.log(c[2]) / fn(c[1]))[0] for name, fn in (
        ("GNMT", lambda n: length_penalty(n, alpha)), ("|Y|^alpha", lambda n: n**alpha), ("none", lambda n: 1.0))}
    picked = out[0] if out else None
    under = [name for name, first in scores.items() if first == picked] or ["no rule"]
    return Measurement(picked == scores["GNMT"], detail=(
        f"returned the path of length {lengths.get(picked, '?')} (best under {', '.join(under)}); "
        f"GNMT's lp with alpha {alpha} picks length {lengths[scores['GNMT']]}"))


@checker("decode.max_length")
def max_length(claim: Claim, ctx: CheckContext) -> Measurement:
    """A model that does not end (EOS always far less likely than each of 30 other tokens, so that
    it never ranks among the beam): the output must stop at the limit. Measured: output length -
    input length (the paper: 50; Section 6.3: 300)."""
    beam, alpha, offset = _settings(claim)
    going_on = log_probs({**{t: (1 - 1e-9) / 30 for t in range(FILLER, FILLER + 30)}, EOS: 1e-9})
    script = Script(lambda prefix: going_on, SOURCE_LENGTH + offset + 1)
    out = ctx.target.search(script, SOURCE_LENGTH, VOCAB, beam_size=beam, alpha=alpha, max_len_offset=offset)
    return Measurement(len(out) - SOURCE_LENGTH, detail=f"{len(out)} output tokens for {SOURCE_LENGTH} input tokens")


@checker("decode.early_stop")
def early_stop(claim: Claim, ctx: CheckContext) -> Measurement:
    """"Terminate early when possible": the likeliest first tokens end at once (EOS next with
    probability 0.9), whatever does not end then never ends. Measured: how many tokens the search looked at in its longest prefix (a
    search that runs on to the limit looks at input length + offset)."""
    beam, alpha, offset = _settings(claim)
    ending = {t: 0.8 / beam for t in range(4, 4 + beam)}
    never = {t: 0.2 / beam for t in range(4 + beam, 4 + 2 * beam)}

    def rule(prefix: tuple[int, ...]) -> dict[int, float]:
        if not prefix:
            return {**ending, **never}
        if len(prefix) == 1 and prefix[0] in ending:
            return {EOS: 0.9, FILLER: 0.1}  # most end here; the rest could go on to the limit
        return {FILLER: 1.0}

    script = Script(rule, SOURCE_LENGTH + offset)
    out = ctx.target.search(script, SOURCE_LENGTH, VOCAB, beam_size=beam, alpha=alpha, max_len_offset=offset)
    return Measurement(script.longest + 1, detail=(
        f"{beam} hypotheses end after one token; the search stopped after {script.longest + 1} step(s) "
        f"({script.calls} distributions asked for; the limit was {SOURCE_LENGTH + offset}); output {out}"))


@checker("decode.beam_width")
def beam_width(claim: Claim, ctx: CheckContext) -> Measurement:
    """The number of hypotheses the search keeps, observed: the best path starts with the r-th
    likeliest first token (every other path loses a factor 20 at its second token); the search
    finds it only when it keeps at least r hypotheses. Measured: the largest r it finds."""
    beam, _, offset = _settings(claim)
    top = beam + 2
    firsts = [4 + r for r in range(top)]
    raw = [0.9**r for r in range(top)]
    first = {t: q / sum(raw) for t, q in zip(firsts, raw)}
    spread = {t: 1 / 20 for t in range(30, 50)}
    widest = 0
    for r in range(top):
        def rule(prefix: tuple[int, ...], best: int = firsts[r]) -> dict[int, float]:
            if not prefix:
                return first
            if len(prefix) == 1:
                return {FILLER: 1.0} if prefix[0] == best else spread
            return {EOS: 1.0}

        out = ctx.target.search(Script(rule, SOURCE_LENGTH + offset), SOURCE_LENGTH, VOCAB, beam_size=beam,
                                alpha=0.0, max_len_offset=offset)
        if out[:1] == [firsts[r]]:
            widest = r + 1
    return Measurement(widest, detail=f"found the best path through the r-th likeliest first token for r <= {widest}")


#: Models built (each from its own seed) before the dropout-off claim gives up on finding one whose
#: outputs can show a difference.
DROPOUT_OFF_MODELS = 3


@checker("decode.dropout_off")
def dropout_off(claim: Claim, ctx: CheckContext) -> Measurement:
    """Decoding runs with dropout off: the search over a model built for training (dropout 0.3,
    train mode) gives the same outputs twice, and the same as over the model in eval mode.
    Measured: the number of sentences whose output differs.

    Outputs that agree because they carry nothing (every sentence ends at once, special tokens
    only, one output for every source: a random model sometimes decodes so) cannot show dropout;
    the check then builds another model, from the next seed, up to :data:`DROPOUT_OFF_MODELS`,
    and is inconclusive if none decodes anything, never a pass (:mod:`repro.checks.vacuity`).
    Each model is built and searched under its own seed, the global random state left as it was."""
    beam, alpha, offset = _settings(claim)
    gen = torch.Generator().manual_seed(ctx.seed)
    src = torch.randint(4, 40, (6, 7), generator=gen)
    nothing = None
    for attempt in range(DROPOUT_OFF_MODELS):
        with torch.random.fork_rng():
            torch.manual_seed(ctx.seed * DROPOUT_OFF_MODELS + attempt)
            parts = ctx.target.training_model(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.3)
            if parts.module is None:
                raise NotApplicable(f"{ctx.target.name} gives no module to switch between train and eval mode")

            def search(train: bool) -> list[list[int]]:
                parts.module.train(train)
                return ctx.target.beam_search(parts, src, beam_size=beam, alpha=alpha, max_len_offset=offset)

            reference, first = search(False), search(True)
            try:
                require_informative(reference, "the outputs of the search (eval mode)", special=SPECIAL_IDS)
            except Inconclusive as why:
                if first == reference:  # nothing to see on this model: another one
                    nothing = why
                    continue
            outputs = [reference, first, search(True) if first == reference else first]
        differ = sum(a != c or b != c for c, a, b in zip(*outputs))
        tried = f" (model {attempt + 1}: the {attempt} before decoded nothing)" if attempt else ""
        return Measurement(differ, detail=f"{differ} of {len(reference)} outputs differ between train- and eval-mode "
                                          f"decoding{tried}")
    raise Inconclusive(f"{nothing}, and train-mode decoding the same ({DROPOUT_OFF_MODELS} models built from "
                       "different seeds, none decoded anything)")
