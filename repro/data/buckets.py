"""Section 5.1's batches "by approximate sequence length", built the way tensor2tensor builds them:
length buckets filled from the endless shuffled stream of sentence pairs.

Sorting one epoch by length and cutting it into batches (:class:`~repro.data.batching.TokenBatcher`)
leaves as much padding as the epoch has lengths between two batch boundaries; a corpus that holds
only some tens of ~25000-token batches per epoch (the 10k-pair WMT sample: ~10) pads ~18 % of every
pass. tensor2tensor instead repeats the shuffled data and drops each pair into a bucket by length
(``bucket_by_sequence_length``, buckets ``length_bucket_step`` = 1.1 apart); a bucket becomes a
batch when it is full. Every batch is then as tight as its bucket, whatever the corpus's size.

Here a bucket is a cell of two length ranges, one per side (a pair with a short source and a long
target is not padded to the long side on both): a pair goes to the cell of (its source length's
range, its target length's range), ranges ``step`` apart (``1, 2, ..., ceil(b * step)``). Epoch ``e``
streams every pair once, in the order ``(seed, e)`` draws; a cell closes its batch when the next pair
would break a bound of the batch (the padded ``max_tokens`` per side, the real-token ``budget`` of
both sides together, ``max_sentences``) and that pair opens the next. The epoch's batches are those
its stream closed, in the order they closed: random, and different in every epoch. What a cell holds
at the end of an epoch waits for the next one (the pre-roll: on a small corpus the first batches
close after an epoch or more of streaming); a pair that has waited :data:`MAX_WAIT` epochs (a rare
length, whose bucket fills slowly) is batched with the other such pairs, sorted by length, so that
every pair is used within ``MAX_WAIT`` epochs, or twice that where too few such pairs wait to fill a
pass (then they make a small one).

The price, on a small corpus only: a cell filled over several epochs holds some pairs more than once
(tensor2tensor's pipeline does the same); on WMT's 4.5M pairs a cell fills within one epoch.
Everything is a function of ``(seed, epoch)`` and the examples: ``state_dict()`` = (epoch, offset)
restores the exact position (the cells' contents are recomputed from epoch 0, vectorised).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from repro.data.batching import TokenBatcher
from repro.errors import ConfigError

__all__ = ["DEFAULT_STEP", "BucketBatcher", "bucket_bounds"]

#: tensor2tensor's default ``length_bucket_step``.
DEFAULT_STEP = 1.1
#: Epochs a pair may wait in its bucket before it is batched with the other stragglers, sorted by length.
MAX_WAIT = 16
_NONE = np.zeros(0, dtype=np.int64)


def bucket_bounds(step: float, longest: int) -> np.ndarray:
    """Upper bounds of the length ranges: 1, 2, ..., each ``ceil(previous * step)`` (at least one more),
    up to the first at or above ``longest``."""
    if not (isinstance(step, (int, float)) and math.isfinite(step) and step > 1.0):
        raise ConfigError(f"bucket step must be a number above 1, got {step!r}")
    bounds, bound = [], 1
    while True:
        bounds.append(bound)
        if bound >= longest:
            return np.asarray(bounds, dtype=np.int64)
        bound = max(bound + 1, math.ceil(bound * step))


class BucketBatcher(TokenBatcher):
    """Batches of about ``budget`` real tokens per side from two-sided length buckets (module docstring);
    the same bounds, sharding, iteration and exact resume as :class:`TokenBatcher`, training only
    (endless, shuffled)."""

    #: every pair is batched within twice MAX_WAIT epochs (module docstring), the first batches included
    max_empty_epochs = 2 * MAX_WAIT

    def __init__(self, examples: Sequence, max_tokens: int, *, seed: int = 0, num_shards: int = 1, shard: int = 0,
                 max_sentences: int | None = None, budget: int | None = None, step: float = DEFAULT_STEP) -> None:
        super().__init__(examples, max_tokens, shuffle=True, seed=seed, num_shards=num_shards, shard=shard,
                         max_sentences=max_sentences, budget=budget)
        self.step = float(step)
        bounds = bucket_bounds(self.step, int(max(self._src_cost.max(), self._tgt_cost.max())))
        width = len(bounds)
        self._cell = np.searchsorted(bounds, self._src_cost) * width + np.searchsorted(bounds, self._tgt_cost)
        #: (epoch whose stream has been played, the cells' pending pairs after it), to go on from
        self._played: tuple[int, dict[int, tuple[np.ndarray, np.ndarray]]] = (-1, {})

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        if self._plan is not None and self._plan[0] == epoch:
            return self._plan[1]
        played, pending = self._played
        if played >= epoch:   # an earlier epoch (a resume): play the stream again from the start
            played, pending = -1, {}
        while played < epoch:
            played += 1
            batches, pending = self._play(played, pending)
        self._played = (played, pending)
        batches = self._my_share(batches)
        self._plan = (epoch, batches)
        return batches

    def _play(self, epoch: int, pending: dict[int, tuple[np.ndarray, np.ndarray]]
              ) -> tuple[list[np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]]]:
        """Stream epoch ``epoch`` into the cells: the batches it closes (in closing order) and what waits
        (per cell: the pairs, and the epoch each arrived in)."""
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.examples))
        cells = self._cell[order]
        by_cell = np.argsort(cells, kind="stable")            # stream positions, grouped by cell, in order
        starts = np.flatnonzero(np.r_[True, np.diff(cells[by_cell]) != 0])
        closed: list[tuple[int, np.ndarray]] = []              # (stream position that closed it, batch)
        waiting: dict[int, tuple[np.ndarray, np.ndarray]] = dict(pending)   # cells this epoch does not reach
        for first, last in zip(starts, np.r_[starts[1:], len(by_cell)]):
            positions = by_cell[first:last]
            cell = int(cells[positions[0]])
            held, since = pending.get(cell, (_NONE, _NONE))
            members = np.concatenate([held, order[positions]])
            arrival = np.concatenate([np.full(len(held), -1, dtype=np.int64), positions])
            start = 0
            while True:
                n = self._fits(members[start:])
                if start + n >= len(members):
                    break
                closed.append((int(arrival[start + n]), members[start:start + n]))
                start += n
            epochs = np.concatenate([since, np.full(len(positions), epoch, dtype=np.int64)])
            waiting[cell] = (members[start:], epochs[start:])
        closed += [(int(rng.integers(len(order))), batch) for batch in self._flush(epoch, waiting)]
        closed.sort(key=lambda item: item[0])
        return [batch for _, batch in closed], waiting

    def _flush(self, epoch: int, waiting: dict[int, tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """Batches of the pairs that have waited :data:`MAX_WAIT` epochs (a rare length's bucket may take
        longer to fill than a run lasts), cut as one sorted epoch is cut; they leave their cells
        (``waiting`` is updated). A last group too small to close a batch waits on, up to twice as long."""
        cells, places = [], []
        for cell, (_, since) in waiting.items():
            old = np.flatnonzero(since <= epoch - MAX_WAIT)
            cells.append(np.full(len(old), cell, dtype=np.int64))
            places.append(old)
        cell_of, place_of = np.concatenate([_NONE, *cells]), np.concatenate([_NONE, *places])
        if len(cell_of) == 0:
            return []
        pairs = np.array([waiting[int(c)][0][p] for c, p in zip(cell_of, place_of)], dtype=np.int64)
        by_length = np.lexsort((self._tgt_cost[pairs], self._src_cost[pairs], self._longer[pairs]))
        waited = np.array([epoch - waiting[int(c)][1][p] for c, p in zip(cell_of, place_of)], dtype=np.int64)
        batches, start = [], 0
        while True:
            n = self._fits(pairs[by_length[start:]])
            if start + n >= len(pairs):
                if waited[by_length[start:]].max() >= 2 * MAX_WAIT:   # too few to fill a pass, waited too long
                    batches.append(pairs[by_length[start:]])
                    start = len(pairs)
                break
            batches.append(pairs[by_length[start:start + n]])
            start += n
        flushed = by_length[:start]
        for cell in set(cell_of[flushed].tolist()):   # what was batched leaves its cell (by place: a pair
            members, since = waiting[cell]             # may wait in a cell more than once)
            keep = np.ones(len(members), dtype=bool)
            keep[place_of[flushed][cell_of[flushed] == cell]] = False
            waiting[cell] = (members[keep], since[keep])
        return batches

    def _fits(self, members: np.ndarray) -> int:
        """How many of ``members`` (from the first) one batch takes: at least one; as many as keep every bound."""
        members = members[:self.max_tokens + 1]   # every pair costs at least a token a side
        src, tgt = self._src_cost[members], self._tgt_cost[members]
        count = np.arange(1, len(members) + 1)
        ok = ((count * np.maximum.accumulate(src) <= self.max_tokens)
              & (count * np.maximum.accumulate(tgt) <= self.max_tokens)
              & (np.cumsum(src + tgt) <= 2 * (self.budget or self.max_tokens)))
        if self.max_sentences:
            ok &= count <= self.max_sentences
        return max(1, int(np.argmin(ok)) if not ok.all() else len(members))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "batching": "buckets", "bucket_step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("batching") == "buckets" and state.get("bucket_step") != self.step:
            raise ConfigError(f"batcher state field 'bucket_step' is {state.get('bucket_step')!r} but this batcher has "
                              f"{self.step!r}: exact resume needs the same batching")
        super().load_state_dict(state)
