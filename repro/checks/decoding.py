"""Section 6.1's decoding, observed on the search the evaluation runs, over scripted models whose
answer is known (:mod:`repro.checks.search_probe`): the length penalty's ranking and its alpha,
the output limit, early termination, the beam's width; and decoding with dropout off.

"We used beam search with a beam size of 4 and length penalty alpha = 0.6 [38] ... We set the
maximum output length during inference to input length + 50, but terminate early when
possible." Section 6.3: beam 21, alpha = 0.3, input length + 300. The length penalty of [38]
(GNMT, Wu et al. 2016) ranks a finished hypothesis Y by log P(Y|X) / lp(Y), lp(Y) = ((5 + |Y|) /
6)^alpha, |Y| counting its tokens with EOS.

For repro, every value is measured on the evaluation's own search run with the job's decoding
settings (cached, several sentences batched together): the claim's params name the job, never the
beam width, alpha or limit under test. The claim's alpha only picks which ranking case is built.
"""

from __future__ import annotations

import math

import torch

from repro.checks.registry import checker
from repro.checks.jobs import watches_jobs
from repro.checks.search_probe import BOS, EOS, FILLER, checked_outputs, evaluation_searcher, searcher
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Inconclusive, Measurement, NotApplicable
from repro.claims.seeding import claim_seed, seeded
from repro.data.vocab import PAD

SOURCE_LENGTH = 10
#: The ids the adapter protocol leaves to special tokens (padding, begin, end, unknown).
SPECIAL_IDS = range(4)


def length_penalty(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


#: Three finished hypotheses (first token, |Y| with EOS, probability) on which GNMT's penalty, a
#: penalty of |Y|^alpha and no penalty each pick a different winner (found by search).
RANKING_CASES = {
    0.6: [(4, 2, 0.45), (6, 6, 0.40), (7, 27, 0.15)],
    0.3: [(4, 2, 0.40), (6, 8, 0.35), (7, 24, 0.25)],
}


def _settings(claim: Claim) -> tuple[int, float, int]:
    p = claim.params
    return p.get("beam_size", 4), p.get("alpha", 0.6), p.get("max_len_offset", 50)


def _paths(ends: dict[int, int]):
    """A rule whose first token t leads to a path ending (EOS) at length ``ends[t]`` (with EOS);
    any other first token ends at once."""
    def rule(prefix: tuple[int, ...], first: dict[int, float]) -> dict[int, float]:
        if not prefix:
            return first
        if prefix[0] not in ends:
            return {EOS: 1.0}
        return {EOS: 1.0} if len(prefix) == ends[prefix[0]] - 1 else {FILLER: 1.0}
    return rule


def _where(search) -> str:
    return search.where + ("; " + "; ".join(search.notes) if search.notes else "")


def observed(claim: Claim, search, setting: str, measurement: Measurement) -> Measurement:
    """``measurement`` of the setting ``setting`` (``beam_size``, ``alpha``, ``max_len_offset``) as
    the claim may report it. Where the implementation reports no such setting, the search ran with
    the claim's own value, so what was measured is the mechanism (the search applies the value it is
    given), not the implementation's value: a mechanism that breaks fails the claim, one that holds
    is not applicable (never an "observed" pass); the record says which (``extra["tested"]``)."""
    if setting not in search.given:
        return measurement
    holds = measurement.passed if measurement.passed is not None else claim.within(measurement.value)
    tested = (f"not observed: {search.where} reports no {setting}, so the search ran with the claim's own "
              f"{setting} {getattr(search.settings, setting)!r}; what was tested is the mechanism (that the search "
              f"applies the {setting} it is given), which ")
    if holds:
        raise NotApplicable(tested + f"holds (measured {measurement.value!r}); {measurement.detail}")
    return Measurement(measurement.value, False, tested + f"fails (measured {measurement.value!r}); "
                       + measurement.detail, measurement.unit, {**measurement.extra, "tested": "mechanism"})


@checker("decode.ranking")
def ranking(claim: Claim, ctx: CheckContext) -> Measurement:
    """Three paths of known probability and length; the search must return the one with the best
    log P / lp (GNMT, with the paper's alpha: params.alpha). Run for two sentences of different
    source lengths in one batch. Measured: True when both return it; the detail names which rule
    the returned one is best under (GNMT, |Y|^alpha, none)."""
    alpha = claim.params.get("alpha", 0.6)
    if alpha not in RANKING_CASES:
        raise ValueError(f"no ranking case for alpha {alpha}; add one to RANKING_CASES")
    cases = RANKING_CASES[alpha]
    lengths = {first: length for first, length, _ in cases}
    first = {t: prob for t, _, prob in cases}
    paths = _paths(lengths)
    search = searcher(claim, ctx)
    outputs, _ = search([lambda p: paths(p, first)] * 2, [SOURCE_LENGTH, SOURCE_LENGTH + 7])
    scores = {name: max(cases, key=lambda c: math.log(c[2]) / fn(c[1]))[0] for name, fn in (
        ("GNMT", lambda n: length_penalty(n, alpha)), ("|Y|^alpha", lambda n: n**alpha), ("none", lambda n: 1.0))}
    picked = [out[0] if out else None for out in outputs]
    under = [[name for name, t in scores.items() if t == p] or ["no rule"] for p in picked]
    return Measurement(all(p == scores["GNMT"] for p in picked), detail=(
        f"{_where(search)}: returned paths of length {[lengths.get(p, '?') for p in picked]} (best under "
        f"{'; '.join(', '.join(u) for u in under)}); GNMT's lp with alpha {alpha} picks length "
        f"{lengths[scores['GNMT']]}"))


#: Two finished paths (lengths with EOS) whose ranking crosses over at a probability set by alpha.
ALPHA_PAIRS = ((2, 12), (4, 30))


@checker("decode.alpha")
def alpha_observed(claim: Claim, ctx: CheckContext) -> Measurement:
    """The length penalty's alpha, measured from the search's choices: two paths A and B of lengths
    L_A < L_B with probabilities p and 1 - p. GNMT's search prefers A exactly when
    log p / lp(L_A) > log(1 - p) / lp(L_B), so the p* at which its choice flips gives
    ((5 + L_B) / (5 + L_A))^alpha = log(1 - p*) / log p*. p* is found by bisection (nine
    sentences per round, one batch); two pairs of lengths must give one alpha (a penalty of
    another form, such as |Y|^alpha, gives two). Measured: alpha from the first pair."""
    search = searcher(claim, ctx)
    intervals = [[1e-6, 1 - 1e-6] for _ in ALPHA_PAIRS]
    for _ in range(int(claim.params.get("rounds", 6))):
        probes = [[lo + (hi - lo) * (i + 1) / 10 for i in range(9)] for lo, hi in intervals]
        rules = []
        for (la, lb), ps in zip(ALPHA_PAIRS, probes):
            paths = _paths({10: la, 11: lb})
            rules += [lambda prefix, p=p, paths=paths: paths(prefix, {10: p, 11: 1 - p}) for p in ps]
        outputs, _ = search(rules, [SOURCE_LENGTH] * len(rules))
        for n, ps in enumerate(probes):
            chose_a = [out[:1] == [10] for out in outputs[9 * n: 9 * n + 9]]
            lo, hi = intervals[n]
            below = [p for p, a in zip(ps, chose_a) if not a]
            above = [p for p, a in zip(ps, chose_a) if a]
            intervals[n] = [max(below, default=lo), min(above, default=hi)]
    alphas = []
    for (la, lb), (lo, hi) in zip(ALPHA_PAIRS, intervals):
        p = (lo + hi) / 2
        alphas.append(math.log(math.log(1 - p) / math.log(p)) / math.log((5 + lb) / (5 + la)))
    finite(alphas, "the recovered alpha")
    agree = abs(alphas[0] - alphas[1]) <= float(claim.params.get("agreement", 0.01))
    return observed(claim, search, "alpha", Measurement(round(alphas[0], 4), None if agree else False, (
        f"{_where(search)}: choice flips at p = {', '.join(f'{(lo + hi) / 2:.5f}' for lo, hi in intervals)} for "
        f"lengths {ALPHA_PAIRS}; alpha {alphas[0]:.4f} and {alphas[1]:.4f}"
        + ("" if agree else " (they disagree: the penalty is not GNMT's ((5 + |Y|) / 6)^alpha)"))))


@checker("decode.max_length")
def max_length(claim: Claim, ctx: CheckContext) -> Measurement:
    """A model that does not end (EOS always far less likely than each of 30 other tokens, so that
    it never ranks among the beam), for sentences of several source lengths in one batch, given in
    an order that is not their length order (as a test set's is not: a search that decodes them
    sorted by length must put each output back in its sentence's place): each output must stop at
    its own limit. Measured: output length - input length (the paper: 50; Section 6.3: 300), one
    value when every sentence agrees, else all of them."""
    going_on = {**{t: (1 - 1e-9) / 30 for t in range(FILLER, FILLER + 30)}, EOS: 1e-9}
    sources = [SOURCE_LENGTH, 4, 17]
    search = searcher(claim, ctx)
    # repro's evaluation also offers greedy search (`repro evaluate --greedy`): inference too, one limit
    searches = [search, *([evaluation_searcher(claim.params.get("experiment", "table2-base-ende"), greedy=True)]
                          if watches_jobs(ctx, "search") else [])]
    lengths = [[len(out) for out in s([lambda prefix: going_on] * len(sources), sources)[0]] for s in searches]
    offsets = sorted({n_out - n for found in lengths for n_out, n in zip(found, sources)})
    value = offsets[0] if len(offsets) == 1 else [[n_out - n for n_out, n in zip(found, sources)] for found in lengths]
    # sentences (or searches) that stop at different offsets cannot all keep the one limit: a failure
    return observed(claim, search, "max_len_offset", Measurement(value, False if len(offsets) > 1 else None, "; ".join(
        f"{_where(s)}: {found} output tokens for {sources} input tokens" for s, found in zip(searches, lengths))))


#: (probability of the path that ends at once, probability of EOS where the limit cuts the other)
#: for the two cases of :func:`cut_scored`: the cut path loses by its EOS, then wins despite it.
CUT_CASES = ((0.5, 1e-6), (1e-3, 0.5))


@checker("decode.cut_scored")
def cut_scored(claim: Claim, ctx: CheckContext) -> Measurement:
    """The output limit ends a hypothesis with EOS, and the search ranks it as every finished one:
    by log P(Y | X) / lp(Y), P including the model's probability of that EOS. Two paths: A (first
    token 10, probability p) ends at once; B (token 11, 1 - p) goes on with certainty up to the
    limit, where EOS has probability q (:data:`CUT_CASES`). With p = 0.5, q = 1e-6, B scored with
    its EOS is far below A at the paper's alpha, and a search that ends B with EOS for free ranks it
    first; with p = 0.001, q = 0.5, B must win (a search that never ranks a cut hypothesis, or ranks
    by order found, keeps A). Two sentences of each case in one batch. Measured: True when every
    sentence returns the path GNMT's score picks."""
    search = searcher(claim, ctx)
    offset, alpha = search.settings.max_len_offset, search.settings.alpha

    def rule(prefix: tuple[int, ...], limit: int, p: float, q: float) -> dict[int, float]:
        if not prefix:
            return {10: p, 11: 1 - p}
        if prefix[0] == 10:
            return {EOS: 1.0}
        return {FILLER: 1 - q, EOS: q} if len(prefix) >= limit else {FILLER: 1.0}

    cases = [(n, p, q) for p, q in CUT_CASES for n in (SOURCE_LENGTH, SOURCE_LENGTH + 7)]
    outputs, _ = search([lambda prefix, n=n, p=p, q=q: rule(prefix, n + offset, p, q) for n, p, q in cases],
                        [n for n, _, _ in cases])
    right, seen = [], []
    for out, (n, p, q) in zip(outputs, cases):
        a = math.log(p) / length_penalty(2, alpha)
        b = (math.log(1 - p) + math.log(q)) / length_penalty(n + offset + 1, alpha)
        want = [10] if a > b else [11] + [FILLER] * (n + offset - 1)
        right.append(out == want)
        seen.append(f"p {p:g}, q {q:g}: {len(out)} tokens (GNMT: A {a:.3f}, B {b:.3f}: "
                    f"{'A' if a > b else 'B'}, {len(want)} tokens)")
    return Measurement(all(right), detail=f"{_where(search)}: " + "; ".join(seen))


@checker("decode.early_stop")
def early_stop(claim: Claim, ctx: CheckContext) -> Measurement:
    """"Terminate early when possible": the likeliest first tokens end at once (EOS next with
    probability 0.9), whatever does not end then never ends; batched with a sentence that runs on
    for 12 tokens. Measured: how many tokens the search looked at in the longest prefix of the
    early sentence (a search that runs on to the limit, or that decodes a finished sentence while
    its batch goes on, looks at more)."""
    search = searcher(claim, ctx)
    beam = search.settings.beam_size
    ending = {t: 0.8 / beam for t in range(10, 10 + beam)}
    never = {t: 0.2 / beam for t in range(10 + beam, 10 + 2 * beam)}

    def rule(prefix: tuple[int, ...]) -> dict[int, float]:
        if not prefix:
            return {**ending, **never}
        if len(prefix) == 1 and prefix[0] in ending:
            return {EOS: 0.9, FILLER: 0.1}  # most end here; the rest could go on to the limit
        return {FILLER: 1.0}

    def long_rule(prefix: tuple[int, ...]) -> dict[int, float]:
        return {EOS: 1.0} if len(prefix) >= 12 else {FILLER: 1.0}

    outputs, watch = search([rule, long_rule], [SOURCE_LENGTH, SOURCE_LENGTH])
    steps = watch[0].longest + 1
    return Measurement(steps, detail=(
        f"{_where(search)}: {beam} hypotheses end after one token; the search stopped after {steps} step(s) "
        f"({watch[0].calls} distributions asked for; the limit was {SOURCE_LENGTH + search.settings.max_len_offset}; "
        f"its batch-mate ran {watch[1].longest + 1} steps); output {outputs[0]}"))


@checker("decode.finished_stay_finished")
def finished_stay_finished(claim: Claim, ctx: CheckContext) -> Measurement:
    """A hypothesis ends at its EOS: after the first token, one hypothesis ends at once (its EOS the
    step's best candidate, counted), each of the others ranks its own EOS just below its beam_size -
    1 continuations and above everything else, so the second step's best 2 * beam_size candidates
    hold EOS at ranks below beam_size: a search that keeps those alive extends a finished
    hypothesis (asks for the token after its EOS). Every step keeps beam_size likely candidates
    that are not EOS, so no row of the beam is empty. Measured: the prefixes holding a likely EOS
    the search asked the model to continue."""
    search = searcher(claim, ctx)
    k = search.settings.beam_size
    if k < 2:
        raise NotApplicable(f"beam size {k}: one hypothesis, no EOS can rank below another")
    first = {10: 0.4, **{10 + i: 0.6 / (k - 1) for i in range(1, k)}}

    def rule(prefix: tuple[int, ...]) -> dict[int, float]:
        if not prefix:
            return first
        if len(prefix) == 1 and prefix[0] != 10:
            return {30: 0.5, EOS: 0.45, FILLER: 0.05}
        return {EOS: 1.0}

    outputs, watches = search([rule, rule], [SOURCE_LENGTH, SOURCE_LENGTH + 3])
    checked_outputs(outputs, 2)
    extended = sum(w.past_eos for w in watches)
    return Measurement(extended, detail=f"{_where(search)}: {extended} finished prefix(es) continued "
                                        f"(beam {k}, two sentences in one batch)")


#: Each sentence's script for :func:`special_ids`: (the special id it makes likeliest, that id's
#: probability, the next-likeliest special's): PAD first, BOS first, and BOS and PAD in turn.
SPECIAL_CASES = ((PAD, 0.5, BOS), (BOS, 0.5, PAD), (BOS, 0.6, PAD))
#: Word-pieces each script's path holds before its EOS (EOS unlikely before: the path beats ending at once).
SPECIAL_PATH = 3


@checker("decode.special_ids")
def special_ids(claim: Claim, ctx: CheckContext) -> Measurement:
    """The search emits word-pieces only: never PAD or BOS (whatever probability the model gives
    them), and EOS only as the end, which the output leaves out. Scripts that make PAD or BOS the
    likeliest next token at every step (the third only at every second step), with a path of
    :data:`SPECIAL_PATH` word-pieces that ends, for three sentences of several source lengths in one
    batch, run through the evaluation's search and, for repro, its greedy search too. Measured: the
    special ids (PAD, BOS, EOS) found in the outputs; an output set that carries nothing is
    inconclusive, never a pass (:mod:`repro.checks.vacuity`)."""

    def script(first: int, weight: float, second: int, parity: bool, words: int):
        def rule(prefix: tuple[int, ...]) -> dict[int, float]:
            if len(prefix) >= SPECIAL_PATH:
                return {EOS: 1.0}
            word = {words + len(prefix): 1 - weight - 0.1 - 1e-4, EOS: 1e-4}
            if parity and len(prefix) % 2:
                return {**word, second: 0.1 + weight}
            return {**word, first: weight, second: 0.1}
        return rule

    rules = [script(*case, parity=i == 2, words=10 * (i + 1)) for i, case in enumerate(SPECIAL_CASES)]
    sources = [SOURCE_LENGTH, 4, 17]
    search = searcher(claim, ctx)
    searches = [search, *([evaluation_searcher(claim.params.get("experiment", "table2-base-ende"), greedy=True)]
                          if watches_jobs(ctx, "search") else [])]
    found, lines, everything = 0, [], []
    for s in searches:
        outputs = checked_outputs(s(rules, sources)[0], len(sources))
        everything += outputs
        special = [sum(t in (PAD, BOS, EOS) for t in out) for out in outputs]
        found += sum(special)
        lines.append(f"{_where(s)}: outputs {outputs} ({sum(special)} special ids)")
    if not found:
        require_informative(everything, "the searches' outputs", special=SPECIAL_IDS)
    return Measurement(found, detail="; ".join(lines))


#: How many ranks the beam-width probe offers (it can measure widths up to this).
WIDEST = 60


@checker("decode.beam_width")
def beam_width(claim: Claim, ctx: CheckContext) -> Measurement:
    """The number of hypotheses the search keeps, observed: sentence r's best path starts with the
    r-th likeliest first token (every other path loses a factor 50 at its second token); the search
    finds it only when it keeps at least r + 1 hypotheses. All sentences are searched in one batch.
    Measured: the number of ranks r = 0, 1, ... found in a row."""
    firsts = [10 + r for r in range(WIDEST)]
    raw = [0.95**r for r in range(WIDEST)]
    first = {t: q / sum(raw) for t, q in zip(firsts, raw)}
    spread = {t: 1 / 50 for t in range(100, 150)}

    def make(best: int):
        def rule(prefix: tuple[int, ...]) -> dict[int, float]:
            if not prefix:
                return first
            if len(prefix) == 1:
                return {FILLER: 1.0} if prefix[0] == best else spread
            return {EOS: 1.0}
        return rule

    search = searcher(claim, ctx)
    outputs, _ = search([make(t) for t in firsts], [SOURCE_LENGTH] * WIDEST)
    found = [out[:1] == [t] for out, t in zip(outputs, firsts)]
    widest = next((r for r, ok in enumerate(found) if not ok), WIDEST)
    later = sum(found[widest:])
    return observed(claim, search, "beam_size", Measurement(widest, None if later == 0 else False, (
        f"{_where(search)}: found the best path through the r-th likeliest first token for r < {widest}"
        + (f"; and {later} deeper ranks (a beam that keeps no fixed number)" if later else ""))))


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
    Each model is built and searched under its own seed (the run's seed, the claim's id and the
    attempt: :mod:`repro.claims.seeding`), the global random state left as it was."""
    beam, alpha, offset = _settings(claim)
    gen = torch.Generator().manual_seed(ctx.seed)
    src = torch.randint(4, 40, (6, 7), generator=gen)
    nothing = None
    for attempt in range(DROPOUT_OFF_MODELS):
        with seeded(claim_seed(ctx.seed, claim.id, attempt)):
            parts = ctx.target.training_model(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.3)
            if parts.module is None:
                raise NotApplicable(f"{ctx.target.name} gives no module to switch between train and eval mode")

            def search(train: bool) -> list[list[int]]:
                parts.module.train(train)
                return ctx.target.beam_search(parts, src, beam_size=beam, alpha=alpha, max_len_offset=offset)

            with torch.no_grad():  # a model whose logits are NaN decodes the same garbage every time: no pass
                finite(parts.forward(src, src), "the model's logits")
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
