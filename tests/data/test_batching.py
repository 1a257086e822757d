"""TokenBatcher (Section 5.1): token budgets, coverage, exact resume, sharding; gradient accumulation."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
import torch

from repro.data.batching import TokenBatcher, collate
from repro.data.encoded import EncodedPairs
from repro.data.vocab import BOS, EOS, PAD
from repro.errors import ConfigError, DataError


def _examples(n=3000, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = rng.randint(1, 50)
        t = max(1, s + rng.randint(-5, 8))  # lengths correlate, as in translation
        out.append(([rng.randint(4, 99) for _ in range(s)], [rng.randint(4, 99) for _ in range(t)]))
    return out


def test_collate_layout():
    b = collate([([5, 6, 7], [8, 9]), ([5], [8, 9, 10])], indices=[3, 4])
    assert b.src.tolist() == [[5, 6, 7], [5, PAD, PAD]]
    assert b.tgt_in.tolist() == [[BOS, 8, 9, PAD], [BOS, 8, 9, 10]]
    assert b.tgt_out.tolist() == [[8, 9, EOS, PAD], [8, 9, 10, EOS]]
    assert (b.src_tokens, b.tgt_tokens, b.indices, len(b)) == (4, 7, [3, 4], 2)
    assert b.src.dtype == torch.long


def _collate_row_by_row(examples):
    """The layout spelled out one row at a time (what the vectorised collate must equal)."""
    n, src_len, tgt_len = len(examples), max(len(s) for s, _ in examples), max(len(t) for _, t in examples) + 1
    src, tgt_in, tgt_out = (torch.full((n, length), PAD) for length in (src_len, tgt_len, tgt_len))
    for row, (s, t) in enumerate(examples):
        src[row, :len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[row, 0] = BOS
        tgt_in[row, 1:len(t) + 1] = torch.tensor(t, dtype=torch.long)
        tgt_out[row, :len(t)] = torch.tensor(t, dtype=torch.long)
        tgt_out[row, len(t)] = EOS
    return src, tgt_in, tgt_out


def test_vectorised_collate_equals_the_row_by_row_layout():
    rng = random.Random(5)
    for n in (1, 2, 7, 40):
        examples = [([rng.randint(4, 99) for _ in range(rng.randint(0, 12))],
                     [rng.randint(4, 99) for _ in range(rng.randint(0, 12))]) for _ in range(n)]
        b = collate(examples, indices=list(range(n)))
        for got, want in zip((b.src, b.tgt_in, b.tgt_out), _collate_row_by_row(examples)):
            assert got.dtype == torch.long and torch.equal(got, want)
        assert b.src_tokens == sum(len(s) for s, _ in examples)
        assert b.tgt_tokens == sum(len(t) + 1 for _, t in examples)


def test_encoded_pairs_give_the_same_batches_as_lists():
    """The batcher gathers encoded pairs in one indexing per side: the same batches, token for token."""
    examples = _examples(400)
    encoded = EncodedPairs.from_lists(examples)
    for a, b in itertools.islice(zip(TokenBatcher(examples, 300, seed=2), TokenBatcher(encoded, 300, seed=2)), 60):
        assert torch.equal(a.src, b.src) and torch.equal(a.tgt_in, b.tgt_in) and torch.equal(a.tgt_out, b.tgt_out)
        assert (a.src_tokens, a.tgt_tokens, a.indices) == (b.src_tokens, b.tgt_tokens, b.indices)
    with pytest.raises(IndexError):
        encoded.take([0, 400])


def test_every_batch_within_budget_and_epoch_covers_each_example_once():
    ex = _examples()
    batcher = TokenBatcher(ex, max_tokens=600, shuffle=True, seed=1)
    n_batches = len(batcher)
    batches = list(itertools.islice(iter(batcher), n_batches))
    seen = Counter(i for b in batches for i in b.indices)
    assert sorted(seen) == list(range(len(ex))) and set(seen.values()) == {1}
    for b in batches:
        assert b.src.numel() <= 600 and b.tgt_in.numel() <= 600  # padded size, both sides
        assert b.src_tokens == int((b.src != PAD).sum()) and b.tgt_tokens == int((b.tgt_out != PAD).sum())
    fill = sum(b.src_tokens for b in batches) / (600 * len(batches))
    assert fill > 0.75  # grouped by length: batches come close to the budget
    assert batcher.epoch == 0 and batcher.offset == n_batches


def test_length_grouping_beats_random_batches():
    ex = _examples()
    batches = TokenBatcher(ex, max_tokens=600, seed=0).epoch_batches(0)
    padded = sum(len(b) * max(len(ex[i][0]) for i in b) for b in batches)
    real = sum(len(s) for s, _ in ex)
    assert padded / real < 1.15


def test_epochs_differ_and_are_reproducible():
    ex = _examples(500)
    a, b = TokenBatcher(ex, 400, seed=3), TokenBatcher(ex, 400, seed=3)
    e0 = [x.tolist() for x in a.epoch_batches(0)]
    assert e0 == [x.tolist() for x in b.epoch_batches(0)]
    assert e0 != [x.tolist() for x in a.epoch_batches(1)]
    assert e0 != [x.tolist() for x in TokenBatcher(ex, 400, seed=4).epoch_batches(0)]


def test_resume_mid_epoch_yields_identical_remaining_sequence():
    ex = _examples(800)
    full = TokenBatcher(ex, 500, seed=7)
    per_epoch = len(full)
    total = per_epoch + per_epoch // 2 + 5  # runs into the second epoch
    reference = [b.indices for b in itertools.islice(iter(full), total)]

    first = TokenBatcher(ex, 500, seed=7)
    it = iter(first)
    cut = per_epoch // 2 + 3
    head = [next(it).indices for _ in range(cut)]
    state = first.state_dict()
    assert state["epoch"] == 0 and state["offset"] == cut

    resumed = TokenBatcher(ex, 500, seed=7)
    resumed.load_state_dict(state)
    tail = [b.indices for b in itertools.islice(iter(resumed), total - cut)]
    assert head + tail == reference
    # A state taken exactly at an epoch boundary resumes too.
    boundary = TokenBatcher(ex, 500, seed=7)
    boundary.load_state_dict({**state, "epoch": 1, "offset": 0})
    assert [b.indices for b in itertools.islice(iter(boundary), 3)] == reference[per_epoch : per_epoch + 3]


def test_resume_refuses_other_data_or_settings():
    ex = _examples(200)
    state = TokenBatcher(ex, 500, seed=7).state_dict()
    with pytest.raises(ConfigError, match="'seed'"):
        TokenBatcher(ex, 500, seed=8).load_state_dict(state)
    with pytest.raises(ConfigError, match="'fingerprint'"):
        TokenBatcher(_examples(200, seed=1), 500, seed=7).load_state_dict(state)
    with pytest.raises(ConfigError, match="'num_shards'"):
        TokenBatcher(ex, 500, seed=7, num_shards=2).load_state_dict(state)


def test_shards_partition_an_epoch_with_equal_step_counts():
    ex = _examples(1000)
    shards = [TokenBatcher(ex, 500, seed=2, num_shards=3, shard=k) for k in range(3)]
    lengths = {len(s) for s in shards}
    assert len(lengths) == 1  # every DDP rank takes the same number of steps
    single = TokenBatcher(ex, 500, seed=2).epoch_batches(0)
    got = [b.tolist() for s in shards for b in s.epoch_batches(0)]
    assert {tuple(b) for b in got} == {tuple(b.tolist()) for b in single}  # nothing dropped
    assert len(got) - len(single) < 3  # at most num_shards - 1 repeated batches pad the shards


def test_unshuffled_is_one_finite_pass_in_length_order():
    ex = _examples(300)
    batcher = TokenBatcher(ex, 400, shuffle=False)
    first = [b.indices for b in batcher]
    assert sorted(i for b in first for i in b) == list(range(300))
    assert [b.indices for b in batcher] == first  # iterating again gives the same pass
    longer = [max(len(ex[b[0]][0]), len(ex[b[0]][1]) + 1) for b in first]  # ordered by the longer side
    assert longer == sorted(longer)


def test_example_longer_than_budget_is_an_error():
    with pytest.raises(DataError, match="example 1 has 30 source"):
        TokenBatcher([([5], [5]), ([5] * 30, [5])], max_tokens=20)




@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"budget": 0}, {"shard": 2, "num_shards": 2}, {"shard": -1}])
def test_bounds_out_of_range_are_refused_by_name(bad):
    field = "shard" if "shard" in bad else next(iter(bad))
    with pytest.raises(ConfigError, match=field):
        TokenBatcher(_examples(10), **{"max_tokens": 500, **bad})
