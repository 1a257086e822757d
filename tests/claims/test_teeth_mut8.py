"""Teeth of the claims the eighth round of fresh mistakes (mut8) added: each fails on the class of
mistake that escaped every claim before it, and passes on repro's own code.

- ``sec5.vocab.learned-size``: the vocabulary the job's data path learns has the entries its config
  asks for (a BPE learned at a fixed 32000 whatever the recipe asked passed: the vocabulary claims
  read the recipes' settings, and a run's own vocabulary is only read at cluster scale);
- ``impl.resume.ranks``: each rank of a requeued data-parallel job trains on what it would have had the
  job never stopped (every rank restoring the checkpoint's position as rank 0 wrote it passed: resume
  was watched on one process);
- ``impl.sharded-evaluation-perplexity``: a perplexity evaluation split over a job's ranks reports one
  process's figures (every rank scoring every sentence passed: the perplexity is the same ratio, but
  the sentences the interval resamples are counted W times);
- ``table4.parse.linearization`` (strengthened): the targets are Vinyals & Kaiser et al.'s, closing
  brackets labelled (unlabelled closers passed: they round-trip as well);
- ``table4.f1.every-sentence-scored``: a parser writing the gold targets scores every sentence as a
  perfect parse on the job's scoring path (outputs repaired without the gold tags passed: EVALB then
  sets aside every sentence with punctuation, and the F1 covers the rest);
- ``sec5.step-time.normalisation``: a step time measured elsewhere counts as footnote 5's 8 P100 in
  proportion to its compute (the ratio inverted passed: no stored step time of the paper's
  configuration is compared locally).
"""

from __future__ import annotations

from unittest import mock

import pytest

import repro.checks.linearization as linearization_checks
import repro.checks.rank_group as rank_group
import repro.checks.step_time as step_time
import repro.eval.translation as translation
import repro.parsing.linearize as linearize
import repro.parsing.scoring as scoring
import repro.train.data as train_data
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.data.batching import TokenBatcher
from repro.results import normalise

CLAIMS = {c.id: c for c in select_claims()}


def outcome(claim_id: str) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def _learning_at(size_of):
    """load_or_train_vocab learning a vocabulary of ``size_of(asked)`` entries instead of the size asked."""
    learn = train_data.load_or_train_vocab
    return lambda path, texts, vocab_size, split="bytes": learn(path, texts, size_of(vocab_size), split)


def test_learned_vocabulary_size_passes_on_repro():
    assert outcome("sec5.vocab.learned-size") == Outcome.PASS


@pytest.mark.parametrize("size_of", [lambda asked: 32000, lambda asked: asked - 4],
                         ids=["fixed-32000", "specials-not-counted"])
def test_learned_vocabulary_size_fails_when_the_data_path_learns_another_size(size_of):
    with mock.patch.object(train_data, "load_or_train_vocab", _learning_at(size_of)):
        assert outcome("sec5.vocab.learned-size") == Outcome.FAIL


def test_step_time_normalisation_passes_on_repro():
    assert outcome("sec5.step-time.normalisation") == Outcome.PASS


@pytest.mark.parametrize("rule", [
    lambda seconds, devices, peak: seconds * 8 * normalise.P100_FLOPS / (devices * peak),   # ratio inverted
    lambda seconds, devices, peak: seconds * peak / normalise.P100_FLOPS,                    # devices left out
    lambda seconds, devices, peak: seconds * devices * peak / (8 * 10.6e12),                 # the data-sheet P100
], ids=["inverted", "per-device", "p100-10.6"])
def test_step_time_normalisation_fails_on_another_rule(rule):
    with mock.patch.object(normalise, "p100x8_seconds", rule):
        assert outcome("sec5.step-time.normalisation") == Outcome.FAIL


def test_step_time_normalisation_fails_when_eight_p100_are_normalised_too():
    measured_as_is = normalise.comparable_step_time

    def normalising_p100(measured, scale, hardware, extra):
        return measured_as_is(measured, scale, hardware.replace("P100", "GPU"), {**extra, "peak_flops": 10.6e12})
    with mock.patch.object(step_time, "comparable_step_time", normalising_p100):
        assert outcome("sec5.step-time.normalisation") == Outcome.FAIL


@pytest.fixture
def fresh_group():
    """The two-rank group observed anew (its observation is cached per process)."""
    rank_group._observed.cache_clear()
    yield
    rank_group._observed.cache_clear()


def _resuming(change):
    """TokenBatcher.load_state_dict (the buckets' too) restoring ``change(state, batcher)``."""
    load = TokenBatcher.load_state_dict
    return lambda self, state: load(self, change(dict(state), self))


def test_resume_ranks_and_sharded_perplexity_pass_on_repro(fresh_group):
    assert outcome("impl.resume.ranks") == Outcome.PASS
    assert outcome("impl.sharded-evaluation-perplexity") == Outcome.PASS


def test_resume_ranks_fails_when_a_rank_resumes_elsewhere(fresh_group):
    """Rank 1 restarts its epoch at the resume (the single-process resume claims cannot see it)."""
    restart = _resuming(lambda state, batcher: {**state, "offset": 0} if batcher.shard == 1 else state)
    with mock.patch.object(TokenBatcher, "load_state_dict", restart):
        assert outcome("impl.resume.ranks") == Outcome.FAIL


def _sentences_twice(model, examples, **kwargs):
    """The evaluation's perplexity of one rank's share, its sentences listed twice (in a group only)."""
    result = score(model, examples, **kwargs)
    runtime = kwargs.get("runtime")
    if runtime is not None and runtime.world_size > 1 and result.sentences:
        result.sentences = result.sentences * 2
    return result


score = translation.perplexity


@pytest.mark.parametrize("patch", [
    lambda: mock.patch.object(translation, "sum_over_ranks", lambda values, runtime: list(values)),  # no all-reduce
    lambda: mock.patch.object(translation, "perplexity", _sentences_twice),                          # sentences twice
], ids=["each-rank-its-own-share", "a-ranks-sentences-twice"])
def test_sharded_perplexity_fails_when_the_ranks_shares_are_not_one_split(fresh_group, patch):
    with patch():
        assert outcome("impl.sharded-evaluation-perplexity") == Outcome.FAIL


def test_linearization_and_scoring_pass_on_repro():
    assert outcome("table4.parse.linearization") == Outcome.PASS
    assert outcome("table4.f1.every-sentence-scored") == Outcome.PASS


def _unlabelled_closers(tree):
    return " ".join(")" if token.startswith(")") else token for token in linearize.linearize(tree).split())



@pytest.mark.parametrize("wrong", [_unlabelled_closers, lambda tree: linearize.linearize(tree).replace(" XX )", " )")],
                         ids=["closers-unlabelled", "a-leaf-dropped-before-a-closer"])
def test_linearization_fails_on_targets_in_another_form(wrong):
    with mock.patch.object(linearization_checks, "linearize", wrong):
        assert outcome("table4.parse.linearization") == Outcome.FAIL


@pytest.mark.parametrize("repair", [
    lambda output, words, tags=None: scoring_repair(output, words),                      # gold tags lost
    lambda output, words, tags=None: scoring_repair(output, list(reversed(words)), tags),  # words out of order
], ids=["without-gold-tags", "words-reversed"])
def test_every_sentence_scored_fails_when_the_scoring_loses_what_evalb_reads(repair):
    with mock.patch.object(scoring, "repair", repair):
        assert outcome("table4.f1.every-sentence-scored") == Outcome.FAIL


scoring_repair = scoring.repair
