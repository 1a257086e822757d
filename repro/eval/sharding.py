"""An evaluation split over a job's ranks: each rank decodes its share, rank 0 gets them all.

After a data-parallel job trains, its every GPU is free: the test set's beam search (3003
sentences of newstest2014, beam 4) runs on all of them. Rank r takes sentences r, r + W, r + 2W,
...; the outputs are gathered and put back in input order, so every rank holds the same list and
rank 0 scores it. Perplexity sums its NLL and token counts over the ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch
import torch.distributed as dist

from repro.runtime import Runtime

T = TypeVar("T")
R = TypeVar("R")


def grouped(runtime: Runtime | None) -> bool:
    """Whether ``runtime`` is one rank of several in a live process group."""
    return runtime is not None and runtime.world_size > 1 and dist.is_available() and dist.is_initialized()


def map_sharded(fn: Callable[[list[T]], list[R]], items: Sequence[T], runtime: Runtime | None) -> list[R]:
    """``fn`` over ``items``, each rank taking every W-th item; the results of all ranks, in input order."""
    if not grouped(runtime):
        return fn(list(items))
    world, rank = runtime.world_size, runtime.rank
    mine = fn(list(items[rank::world]))
    gathered: list[list[R] | None] = [None] * world
    dist.all_gather_object(gathered, mine)
    out: list[R] = [None] * len(items)  # type: ignore[list-item]
    for r, part in enumerate(gathered):
        out[r::world] = part
    return out


def sum_over_ranks(values: Sequence[float], runtime: Runtime | None) -> list[float]:
    """``values`` summed over the ranks (themselves without a group)."""
    if not grouped(runtime):
        return list(values)
    t = torch.tensor(list(values), dtype=torch.float64, device=runtime.device)
    dist.all_reduce(t)
    return t.tolist()


def main_first(fn: Callable[[], R], runtime: Runtime | None) -> R | None:
    """``fn()`` on rank 0 while the other ranks wait at a barrier (a file the others then read:
    the averaged checkpoint); rank 0's error is raised after the barrier, so no rank waits for
    nothing. Returns ``fn()``'s result on rank 0, None on the others."""
    if not grouped(runtime):
        return fn()
    result, failure = None, None
    if runtime.is_main:
        try:
            result = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised below
            failure = err
    dist.barrier()
    if failure is not None:
        raise failure
    return result
