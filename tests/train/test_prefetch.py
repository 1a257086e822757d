"""The GPU loop's batch source: a worker process that draws the batches as the CPU's loop draws them.

The worker (``repro.train.prefetch.WorkerPrefetcher``) must yield exactly the updates and batcher
states the loop would draw itself, across epochs and for both batchers; raise the batcher's own error
in the job (no worker traceback); leave the job's RNG alone (a resumed run must draw the dropout masks
of the run it continues); and stop its process when closed.
"""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from repro.data.batching import TokenBatcher
from repro.data.buckets import BucketBatcher
from repro.errors import DataError
from repro.train.prefetch import Prefetcher, Sequential, WorkerPrefetcher, can_fork, prefetcher

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork on this platform: the loop uses the thread")


def _pairs(n: int = 300, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 30, (n, 2), generator=gen).tolist()
    return [(list(range(4, 4 + s)), list(range(5, 5 + t))) for s, t in lengths]


def _same(a: tuple, b: tuple) -> None:
    (micro_a, state_a), (micro_b, state_b) = a, b
    assert state_a == state_b
    assert len(micro_a) == len(micro_b)
    for x, y in zip(micro_a, micro_b):
        for name in ("src", "tgt_in", "tgt_out"):
            assert torch.equal(getattr(x, name), getattr(y, name)), name
        assert (x.src_tokens, x.tgt_tokens, list(x.indices)) == (y.src_tokens, y.tgt_tokens, list(y.indices))


@pytest.mark.parametrize("make", [
    lambda pairs: TokenBatcher(pairs, 200, seed=3),
    lambda pairs: BucketBatcher(pairs, 200, seed=3, budget=150),
], ids=["sorted", "buckets"])
@pytest.mark.parametrize("accumulation", [1, 3])
def test_the_worker_yields_what_the_loop_draws_itself(make, accumulation: int) -> None:
    pairs = _pairs()
    mine, theirs = Sequential(make(pairs), accumulation), WorkerPrefetcher(make(pairs), accumulation, pin=False)
    try:
        epochs = set()
        for _ in range(60):
            drawn = next(mine)
            _same(drawn, next(theirs))
            epochs.add(drawn[1]["epoch"])
        assert len(epochs) >= 2   # across an epoch boundary
    finally:
        theirs.close()


def test_the_worker_resumes_where_a_state_says() -> None:
    pairs = _pairs()
    ahead = Sequential(BucketBatcher(pairs, 200, seed=1, budget=150), 1)
    for _ in range(17):
        _, state = next(ahead)
    resumed = BucketBatcher(pairs, 200, seed=1, budget=150)
    resumed.load_state_dict(state)
    worker = WorkerPrefetcher(resumed, 1, pin=False)
    try:
        for _ in range(10):
            _same(next(ahead), next(worker))
    finally:
        worker.close()


def test_the_worker_leaves_the_jobs_rng_alone() -> None:
    torch.manual_seed(7)
    want = torch.rand(4)
    torch.manual_seed(7)
    worker = WorkerPrefetcher(TokenBatcher(_pairs(), 200, seed=3), 1, pin=False)
    try:
        next(worker)
        assert torch.equal(torch.rand(4), want)   # dropout after a resume draws what the run drew
    finally:
        worker.close()



class _Failing(TokenBatcher):
    def __iter__(self):
        raise DataError("corpus.de line 12: not UTF-8")
        yield


@pytest.mark.parametrize("source", [WorkerPrefetcher, Prefetcher])
def test_the_batchers_error_is_raised_in_the_job_as_itself(source) -> None:
    batches = source(_Failing(_pairs(), 200), 1, pin=False)
    try:
        with pytest.raises(DataError) as raised:
            next(batches)
        assert str(raised.value) == "corpus.de line 12: not UTF-8"   # no worker traceback in the message
    finally:
        batches.close()


def test_an_exhausted_batcher_is_named() -> None:
    batches = WorkerPrefetcher(TokenBatcher(_pairs(20), 200, shuffle=False), 50, pin=False)
    try:
        with pytest.raises(RuntimeError, match="ran out of batches"):
            next(batches)
    finally:
        batches.close()


def test_close_stops_the_worker_and_is_idempotent() -> None:
    before = set(multiprocessing.active_children())
    worker = WorkerPrefetcher(TokenBatcher(_pairs(), 200, seed=3), 1, pin=False)
    next(worker)
    worker.close()
    worker.close()
    assert set(multiprocessing.active_children()) <= before
    with pytest.raises(RuntimeError, match="closed"):
        next(worker)


def test_the_gpu_loop_takes_the_worker_where_it_can_fork() -> None:
    batches = prefetcher(TokenBatcher(_pairs(), 200, seed=3), 1, pin=False)
    try:
        assert isinstance(batches, WorkerPrefetcher)
    finally:
        batches.close()


@pytest.mark.cuda
def test_the_worker_hands_over_pinned_batches_on_a_gpu() -> None:
    if not (torch.cuda.is_available() and torch.version.cuda):
        pytest.skip("needs a CUDA device")
    batches = prefetcher(TokenBatcher(_pairs(), 200, seed=3), 1)
    try:
        micro, _ = next(batches)
        assert all(t.is_pinned() for b in micro for t in (b.src, b.tgt_in, b.tgt_out))
    finally:
        batches.close()
