"""Teeth of sec5.eq3.loop-big / loop-d256 (the loop's Eq. 3 follows the model's own d_model) and of
sec6.max-output-length.scored (a hypothesis cut at the limit is scored with its EOS): each fails on
a wrong version of the code the paper's numbers come from, and passes on repro's own."""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

import repro.checks.search_probe as search_probe
import repro.checks.training as training
import repro.decode.beam as beam
import repro.decode.translate as translate
import repro.train.update_step as update_step
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim

CLAIMS = {c.id: c for c in select_claims(only=["sec5.eq3.loop", "sec6.max-output-length.scored"])}


def outcome(claim_id: str) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def rates_with_width(d_model: int):
    """The loop's Eq. 3 with a d_model written in, whatever the model's (the rates cache emptied)."""
    original = update_step.learning_rate

    def fixed(step, _d_model, warmup_steps, scale=1.0):
        return original(step, d_model, warmup_steps, scale)

    return mock.patch.multiple(update_step, learning_rate=fixed), mock.patch.dict(training._APPLIED, clear=True)


@pytest.mark.slow
@pytest.mark.parametrize("written, caught_by", [(512, "sec5.eq3.loop-big"), (1024, "sec5.eq3.loop")])
def test_loop_rates_fail_when_the_loop_uses_another_width(written, caught_by) -> None:
    patch, cache = rates_with_width(written)
    with patch, cache:
        assert outcome(caught_by) == Outcome.FAIL


@pytest.mark.slow
def test_loop_rates_pass_on_repro() -> None:
    with mock.patch.dict(training._APPLIED, clear=True):
        for claim_id in ("sec5.eq3.loop-big", "sec5.eq3.loop-d256"):
            assert outcome(claim_id) == Outcome.PASS, claim_id


@contextlib.contextmanager
def mutated(module: types.ModuleType, old: str, new: str, into: types.ModuleType, name: str) -> Iterator[None]:
    """``into.name`` taken from ``module`` with one line of its source replaced (a one-line mistake)."""
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert source.count(old) == 1, old
    copy = types.ModuleType(f"mutated_{module.__name__.replace('.', '_')}")
    copy.__file__ = module.__file__
    with mock.patch.dict(sys.modules, {copy.__name__: copy}):   # its dataclasses look their module up
        exec(compile(source.replace(old, new), module.__file__, "exec"), copy.__dict__)
        with mock.patch.object(into, name, getattr(copy, name)):
            yield


def search_with(old: str, new: str):
    """repro's beam search with one line replaced, as the evaluation's search."""
    return mutated(beam, old, new, translate, "beam_search")


@pytest.mark.parametrize("new", ["only_eos[:, EOS] = 0.0", "only_eos[:, EOS] = logp.max(-1).values"],
                         ids=["eos-for-free", "eos-scored-as-best-token"])
def test_cut_hypothesis_scored_without_its_eos_fails(new) -> None:
    with search_with("only_eos[:, EOS] = logp[:, EOS]", new):
        assert outcome("sec6.max-output-length.scored") == Outcome.FAIL


def test_cut_scored_passes_on_repro() -> None:
    assert outcome("sec6.max-output-length.scored") == Outcome.PASS


def test_outputs_put_back_in_another_order_fail_the_output_limit() -> None:
    """A decoding batch sorted by length whose outputs go back by sorted index, not the batch's order:
    each sentence gets another's output, which stops at the other's limit."""
    claim = next(c for c in select_claims(only=["sec6.max-output-length.observed"]))
    with mutated(translate, "        for i, hyp in zip(batch, hyps):", "        for i, hyp in zip(sorted(batch), hyps):",
                 search_probe, "translate_ids"):
        assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status == Outcome.FAIL
