"""The claims on the jobs' batchers over epochs (repro/checks/batch_epochs.py): they pass on the
batchers the loop builds and fail on plausible wrong ones (the order not redrawn, the same stream
every epoch, pairs lost, both sides' budget counted once)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import repro.checks.batch_epochs as batch_epochs
import repro.data.buckets as buckets
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims.runner import run_claim
from repro.data.batching import TokenBatcher
from repro.train.loop import batcher_for

CLAIMS = {c.id: c for c in select_claims()}
ORDER, SIDES = CLAIMS["sec5.batch.order-reshuffled"], CLAIMS["sec5.batch-tokens.per-side"]


def _corpus(_vocab_size: int = 0) -> list[tuple[list[int], list[int]]]:
    """3000 pairs of WMT-like lengths (the target a little longer), from a fixed seed."""
    rng = np.random.default_rng(7)
    src = rng.integers(3, 60, size=3000)
    tgt = np.clip(src + rng.integers(-3, 8, size=3000), 1, 70)
    return [([5] * int(s), [6] * int(t)) for s, t in zip(src, tgt)]


@pytest.fixture(autouse=True)
def small_corpus(monkeypatch):
    monkeypatch.setattr(batch_epochs, "sample_examples", _corpus)


def _status(claim) -> str:
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def _with(monkeypatch, change) -> None:
    """The checkers get the loop's batcher, changed by ``change`` (a wrong implementation)."""
    monkeypatch.setattr(batch_epochs, "batcher_for", lambda *a, **k: change(batcher_for(*a, **k)))


def test_both_claims_pass_on_the_loops_batchers():
    assert _status(ORDER) == "pass"
    assert _status(SIDES) == "pass"


def test_order_fails_when_sorted_batches_are_not_shuffled(monkeypatch):
    def unshuffled(batcher):
        if isinstance(batcher, TokenBatcher) and not isinstance(batcher, buckets.BucketBatcher):
            shortest_first = lambda e, b=batcher: sorted(TokenBatcher.epoch_batches(b, e),  # noqa: E731
                                                         key=lambda idx: int(b._longer[idx].max()))
            batcher.epoch_batches = shortest_first
        return batcher
    _with(monkeypatch, unshuffled)
    assert _status(ORDER) == "fail"


def test_order_fails_when_buckets_stream_the_same_order_every_epoch(monkeypatch):
    fixed = types.SimpleNamespace(default_rng=lambda seed: np.random.default_rng(seed[0]))
    monkeypatch.setattr(buckets, "np", types.SimpleNamespace(**{**vars(np), "random": fixed}))
    assert _status(ORDER) == "fail"


def test_order_fails_when_a_sorted_epoch_loses_its_last_pass(monkeypatch):
    def lossy(batcher):
        if not isinstance(batcher, buckets.BucketBatcher):
            batcher.epoch_batches = lambda e, b=batcher: TokenBatcher.epoch_batches(b, e)[:-1]
        return batcher
    _with(monkeypatch, lossy)
    assert _status(ORDER) == "fail"


@pytest.mark.parametrize("kind", [TokenBatcher, buckets.BucketBatcher], ids=["sorted", "buckets"])
def test_sides_fail_when_both_sides_are_counted_against_one_budget(monkeypatch, kind):
    def once(batcher):
        if type(batcher) is kind:
            batcher.budget //= 2   # (source + target) <= budget: ~half of it a side
        return batcher
    _with(monkeypatch, once)
    assert _status(SIDES) == "fail"



@pytest.mark.parametrize("wait", ["dropped", "forever"])
def test_order_fails_when_buckets_never_batch_what_waits(monkeypatch, wait):
    """The buckets' promise that a waiting pair is batched within 2 x MAX_WAIT epochs (the issue-45
    mistake ``buckets-drop-what-waits`` was caught only by the token counts): what waits at an epoch's
    end dropped, or never flushed."""
    if wait == "dropped":
        play = buckets.BucketBatcher._play
        monkeypatch.setattr(buckets.BucketBatcher, "_play", lambda self, epoch, pending: (play(self, epoch, pending)[0], {}))
    else:
        monkeypatch.setattr(buckets.BucketBatcher, "_flush", lambda self, epoch, waiting: [])
    assert _status(ORDER) == "fail"
