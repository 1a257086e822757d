"""Length buckets over the endless shuffled stream (repro.data.buckets): tight passes at Section 5.1's
size, every pair used, a random order in every epoch, exact resume."""

from __future__ import annotations

import random
from collections import Counter
from itertools import islice

import numpy as np
import pytest

from repro.data.batching import TokenBatcher
from repro.data.buckets import MAX_WAIT, BucketBatcher, bucket_bounds
from repro.errors import ConfigError
from repro.train.loop import batcher_for
from repro.train.update_step import padding


def _pairs(n: int = 3000, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Pairs whose lengths look like a translation corpus's: the target about the source's length."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = max(1, int(rng.lognormvariate(3.0, 0.5)))
        tgt = max(1, int(src * rng.uniform(0.7, 1.4)))
        pairs.append(([5] * min(src, 120), [6] * min(tgt, 120)))
    return pairs


def _padding(batches) -> float:
    real = sum(b.src_tokens + b.tgt_tokens for b in batches)
    return 1 - real / sum(b.src.numel() + b.tgt_out.numel() for b in batches)


def test_bounds_grow_by_the_step_and_cover_the_longest() -> None:
    bounds = bucket_bounds(1.1, 100)
    assert list(bounds[:11]) == list(range(1, 12)) and bounds[11] == 13 and bounds[-1] >= 100 > bounds[-2]
    assert all(b2 == max(b1 + 1, np.ceil(b1 * 1.1)) for b1, b2 in zip(bounds, bounds[1:]))
    for bad in (1.0, 0.5, float("nan"), float("inf")):
        with pytest.raises(ConfigError):
            bucket_bounds(bad, 10)


def test_the_paper_job_s_passes_on_the_wmt_sample_are_at_most_8_percent_padding(h100_job_data) -> None:
    """Issue 42's bound, at the h100-x1 plan (one pass of ~25000 real tokens a side, at most 32000
    padded) on the sample the job-path benchmark trains on; the batcher cut from one sorted epoch
    padded 18 % there."""
    cfg, data = h100_job_data
    batcher = batcher_for(cfg, data.examples, 1, 0)
    assert isinstance(batcher, BucketBatcher)
    passes = list(islice(iter(batcher), 40))
    assert _padding(passes) <= 0.08
    for batch in passes:   # Section 5.1's update: about 25000 + 25000 real tokens, never over the cap
        assert 0.9 * 50000 <= batch.src_tokens + batch.tgt_tokens <= 50000
        assert batch.src.numel() <= 32000 and batch.tgt_out.numel() <= 32000
    sorted_epoch = TokenBatcher(data.examples, 32000, seed=cfg.seed, budget=25000)
    assert _padding(list(islice(iter(sorted_epoch), 20))) > 0.12   # what the bound is held against


def test_every_pair_is_used_in_bounded_time_in_a_new_order() -> None:
    """A pair waits in its bucket until the bucket fills, or :data:`MAX_WAIT` epochs (twice that where too
    few such pairs wait to fill a pass): a corpus's rare lengths are used too."""
    pairs = _pairs()
    batcher = BucketBatcher(pairs, 1200, seed=3, budget=1000)
    epochs = 2 * MAX_WAIT + 1
    used: Counter = Counter()
    orders = []
    for epoch in range(epochs):
        batches = batcher.epoch_batches(epoch)
        orders.append([tuple(sorted(b.tolist())) for b in batches])
        for batch in batches:
            used.update(batch.tolist())
    assert set(used) == set(range(len(pairs)))
    assert max(used.values()) <= epochs and sum(used.values()) >= (epochs - 2) * len(pairs)
    rare = [i for i, (s, t) in enumerate(pairs) if max(len(s), len(t)) >= 100]
    assert rare and min(used[i] for i in rare) >= 1
    assert orders[5] != orders[6] and set(orders[5]) != set(orders[6])
    other_seed = BucketBatcher(pairs, 1200, seed=4, budget=1000)
    assert [tuple(sorted(b.tolist())) for b in other_seed.epoch_batches(5)] != orders[5]


def test_passes_keep_every_bound_and_are_tight() -> None:
    pairs = _pairs()
    batcher = BucketBatcher(pairs, 1200, seed=1, budget=1000, max_sentences=90)
    batches = list(islice(iter(batcher), 60))
    for batch in batches:
        assert batch.src.numel() <= 1200 and batch.tgt_out.numel() <= 1200 and len(batch) <= 90
        assert batch.src_tokens + batch.tgt_tokens <= 2 * 1000
    assert _padding(batches) < 0.08 and padding(batches) == pytest.approx(_padding(batches))
    assert _padding(list(islice(iter(TokenBatcher(pairs, 1200, seed=1, budget=1000)), 60))) > _padding(batches)


@pytest.mark.parametrize("taken", [0, 1, 17, 40])
def test_resume_at_any_position_gives_the_same_passes(taken: int) -> None:
    pairs = _pairs(800)
    first = BucketBatcher(pairs, 600, seed=2, budget=500)
    it = iter(first)
    for _ in range(taken):
        next(it)
    state = first.state_dict()
    after = [next(it).indices for _ in range(12)]
    resumed = BucketBatcher(pairs, 600, seed=2, budget=500)
    resumed.load_state_dict(state)
    assert [b.indices for b in islice(iter(resumed), 12)] == after
    assert state["batching"] == "buckets"


def test_a_state_of_other_batching_is_refused() -> None:
    pairs = _pairs(300)
    buckets = BucketBatcher(pairs, 600, seed=2, budget=500)
    with pytest.raises(ConfigError, match="batching"):
        TokenBatcher(pairs, 600, seed=2, budget=500).load_state_dict(buckets.state_dict())
    with pytest.raises(ConfigError, match="batching"):
        buckets.load_state_dict(TokenBatcher(pairs, 600, seed=2, budget=500).state_dict())
    with pytest.raises(ConfigError, match="bucket_step"):
        BucketBatcher(pairs, 600, seed=2, budget=500, step=1.2).load_state_dict(buckets.state_dict())


def test_shards_split_each_epoch_s_passes() -> None:
    pairs = _pairs(1500)
    whole = BucketBatcher(pairs, 900, seed=5, budget=700)
    shards = [BucketBatcher(pairs, 900, seed=5, budget=700, num_shards=2, shard=r) for r in range(2)]
    for epoch in range(4, 7):
        mine = [b.tolist() for b in whole.epoch_batches(epoch)]
        got = [b.tolist() for shard in shards for b in shard.epoch_batches(epoch)]
        assert len(shards[0].epoch_batches(epoch)) == len(shards[1].epoch_batches(epoch))
        assert all(b in mine for b in got) and all(b in got for b in mine)
