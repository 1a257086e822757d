"""The updates the training loop itself reads (Section 5.1: one update is one batch of ~25000 + 25000
tokens): the loop's own batch source, :func:`repro.train.loop.batches_for`, on either runtime it
chooses between. A claim about the tokens of an update counts what this source gives, not what the
batcher would give if the loop took ``accumulation`` passes from it: a source that takes another
number of passes per update (or reads ahead and loses some) changes the update, not the batcher.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any
from unittest import mock

import repro.train.loop as loop
from repro.train.prefetch import prefetcher

#: The runtimes :func:`repro.train.loop.batches_for` tells apart, by whether they run on a GPU.
SOURCES = {"the CPU's batches": False, "the GPU's prefetcher": True}


def loop_updates(batcher: Any, accumulation: int, updates: int, *, on_gpu: bool) -> list[list[Any]]:
    """The passes of each of the first ``updates`` updates the loop's batch source gives, for a
    process whose batcher is ``batcher`` and whose plan accumulates ``accumulation`` passes, on a GPU
    (the prefetcher, its batches left in ordinary memory: there is no GPU to pin them for) or a CPU."""
    trainer = SimpleNamespace(runtime=SimpleNamespace(on_gpu=on_gpu), batcher=batcher, accumulation=accumulation)

    def unpinned(source: Any, passes: int, **_: Any) -> Any:
        return prefetcher(source, passes, pin=False)

    with mock.patch.object(loop, "prefetcher", unpinned):
        source = loop.batches_for(trainer)
    try:
        return [list(next(source)[0]) for _ in range(updates)]
    finally:
        source.close()


def indices(updates: Sequence[Sequence[Any]]) -> list[list[tuple[int, ...]]]:
    """Each update's passes as the example indices they hold (what two sources must agree on)."""
    return [[tuple(b.indices) for b in passes] for passes in updates]
