"""The evaluation's stopping rule, observed: which EOS ends a hypothesis (repro/decode/beam.py).

The paper says only "beam search with a beam size of 4 ... terminate early when possible". repro's
search (``stop="early"``) follows fairseq and Hugging Face: each step ranks the best 2k continuations
and an EOS ends a hypothesis only when it ranks among the best k of them, the beam the search holds.
Which EOS counts changes which hypotheses compete, so the BLEU of every table; the claims of the
search's ranking, width and early stop each build steps whose EOS ranks far from that boundary.
"""

from __future__ import annotations

from repro.checks.decoding import SOURCE_LENGTH
from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.checks.search_probe import EOS, checked_outputs, searcher
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement, NotApplicable

#: Steps each hypothesis that did not end at its second token wanders (4 equally likely word-pieces a
#: step) before its EOS: its final score falls far below the second-token EOS's.
WANDER = 6


@checker("decode.eos_in_beam")
def eos_in_beam(claim: Claim, ctx: CheckContext) -> Measurement:
    """k equally likely first tokens; after the first of them, a word-piece (0.6) and EOS (0.39), after
    each other one word-piece (0.99): the second step's candidates rank k - 1 continuations, then the
    0.6 one, then that EOS at rank k + 1, outside the beam. Every hypothesis that goes on wanders
    :data:`WANDER` steps before its EOS, so the EOS of rank k + 1 would win if it ended a hypothesis.
    Run for EOS ranks k + 1 (must not end one) and, with the first token's continuation made less
    likely than its EOS, rank k (must). Measured: the cases the search decided otherwise."""
    own(ctx)
    search = searcher(claim, ctx)
    k = search.settings.beam_size
    if k < 2:
        raise NotApplicable(f"beam size {k}: no EOS can rank below another continuation")
    first = {10 + i: 1.0 / k for i in range(k)}

    def script(inside: bool):
        second = {30: 0.39, EOS: 0.6, 31: 0.01} if inside else {30: 0.6, EOS: 0.39, 31: 0.01}

        def rule(prefix: tuple[int, ...]) -> dict[int, float]:
            if not prefix:
                return first
            if len(prefix) == 1:
                return second if prefix[0] == 10 else {40 + prefix[0]: 0.99, 70: 0.005, EOS: 0.005}
            return {EOS: 1.0} if len(prefix) > WANDER else {100 + j: 0.25 for j in range(4)}
        return rule

    outputs = checked_outputs(search([script(False), script(True)], [SOURCE_LENGTH, SOURCE_LENGTH])[0], 2)
    wrong = int(outputs[0] == [10]) + int(outputs[1] != [10])
    return Measurement(wrong, detail=(
        f"{search.where}, beam {k}: an EOS ranked {k + 1}-th of its step's candidates "
        f"{'ended' if outputs[0] == [10] else 'did not end'} a hypothesis (output {outputs[0]}); one ranked {k}-th "
        f"{'ended' if outputs[1] == [10] else 'did not end'} one (output {outputs[1]})"))
