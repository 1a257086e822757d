"""The next updates' batches, built while the device computes the current one.

On a GPU the host must not be on the critical path: the main thread launches the update's kernels
(hundreds of Python calls per update), and the next updates' batches are drawn, collated and pinned
(page-locked memory, so the copy to the device runs without blocking the host) elsewhere, ``depth``
updates ahead. Each update comes with the batcher's position right after it, so that a checkpoint
records what was consumed, not what was prefetched: exact resume holds.

Two ways, one interface (iterate ``(micro-batches, batcher state)``, then :meth:`close`):

- :class:`WorkerPrefetcher` (the loop's on a GPU, :func:`prefetcher`): the batcher runs in a worker
  process (a ``torch.utils.data.DataLoader`` worker forked from the job, as fairseq and torchtitan
  load their batches), and the batches reach the job through shared memory, then a pinning thread.
  The batcher's Python (an epoch's length buckets: ~16 ms every ~9 updates on the WMT sample on a
  2-core host; each update's gather and collation) then never holds the job's interpreter lock: in a
  thread it did, and the main thread waited for it between two kernel launches.
- :class:`Prefetcher`: the same in a thread of the job (where a process cannot be forked).
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from repro.data.batching import Batch


def pinned(batch: Batch) -> Batch:
    """``batch`` in page-locked host memory (what a non-blocking copy to a GPU needs)."""
    return batch.pin_memory()


class Prefetcher:
    """Iterates (micro-batches of one update, batcher state after them), ``depth`` updates ahead."""

    _END = object()

    def __init__(self, batcher: Any, accumulation: int, *, pin: bool = True, depth: int = 2) -> None:
        self.batcher, self.accumulation, self.pin = batcher, accumulation, pin
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, name="repro-prefetch", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        try:
            batches = iter(self.batcher)
            while not self._stop.is_set():
                micro = [next(batches) for _ in range(self.accumulation)]
                if self.pin:
                    micro = [pinned(b) for b in micro]
                item = (micro, self.batcher.state_dict())
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as err:  # noqa: BLE001 - handed to the consumer, raised there
            self._queue.put((self._END, err))

    def __iter__(self) -> Iterator[tuple[list[Batch], dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[list[Batch], dict[str, Any]]:
        micro, state = self._queue.get()
        if micro is self._END:
            raise state if not isinstance(state, StopIteration) else RuntimeError("the batcher ran out of batches")
        return micro, state

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.1)


class Sequential:
    """The same interface without a thread (the CPU computes and collates in turn)."""

    def __init__(self, batcher: Any, accumulation: int) -> None:
        self.batcher, self.accumulation = batcher, accumulation
        self._batches = iter(batcher)

    def __iter__(self) -> Iterator[tuple[list[Batch], dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[list[Batch], dict[str, Any]]:
        micro = [next(self._batches) for _ in range(self.accumulation)]
        return micro, self.batcher.state_dict()

    def close(self) -> None:
        pass


class _RaisedInWorker:
    """An error the batcher raised in the worker, carried to the job to be raised there as it is."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Updates(IterableDataset):
    """The batcher's updates, ``(micro-batches, batcher state after them)``, drawn in the worker."""

    def __init__(self, batcher: Any, accumulation: int) -> None:
        self.batcher, self.accumulation = batcher, accumulation

    def __iter__(self) -> Iterator[Any]:
        try:
            batches = iter(self.batcher)
            while True:
                micro = [next(batches) for _ in range(self.accumulation)]
                yield micro, self.batcher.state_dict()
        except Exception as err:  # noqa: BLE001 - raised in the job (a DataLoader would wrap it in a traceback)
            yield _RaisedInWorker(err if not isinstance(err, StopIteration)
                                  else RuntimeError("the batcher ran out of batches")), None


def _as_is(item: Any) -> Any:
    return item


def can_fork() -> bool:
    """Whether a worker process can be forked here (it inherits the batcher without copying it)."""
    return "fork" in multiprocessing.get_all_start_methods()


class WorkerPrefetcher:
    """Iterates (micro-batches of one update, batcher state after them), ``depth`` updates ahead,
    drawn by ``batcher`` in a forked worker process (module docstring); ``pin``: handed over in
    page-locked memory."""

    def __init__(self, batcher: Any, accumulation: int, *, pin: bool = True, depth: int = 2) -> None:
        self.batcher, self.accumulation, self.pin = batcher, accumulation, pin
        # a generator of its own: a DataLoader seeds its workers from the global RNG otherwise, and a
        # resumed run would then draw other dropout masks than the run it continues (the batcher's
        # order comes from (seed, epoch) alone)
        loader = DataLoader(_Updates(batcher, accumulation), batch_size=None, collate_fn=_as_is, num_workers=1,
                            prefetch_factor=depth, pin_memory=pin and torch.version.cuda is not None,
                            multiprocessing_context="fork",
                            generator=torch.Generator().manual_seed(0))
        self._updates: Any = iter(loader)

    def __iter__(self) -> Iterator[tuple[list[Batch], dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[list[Batch], dict[str, Any]]:
        if self._updates is None:
            raise RuntimeError("the prefetcher is closed")
        micro, state = next(self._updates)
        if isinstance(micro, _RaisedInWorker):
            self.close()
            raise micro.error
        return micro, state

    def close(self) -> None:
        """Stop the worker (and the pinning thread); idempotent."""
        updates, self._updates = self._updates, None
        if updates is not None:
            # the DataLoader iterator's own shutdown (what its __del__ runs); private to torch, so a torch
            # without it falls back on dropping the last reference, which runs that __del__
            shutdown = getattr(updates, "_shutdown_workers", None)
            if callable(shutdown):
                shutdown()
            del updates


def prefetcher(batcher: Any, accumulation: int, *, pin: bool = True) -> WorkerPrefetcher | Prefetcher:
    """The GPU loop's source of batches: a worker process where one can be forked, else a thread."""
    if can_fork():
        return WorkerPrefetcher(batcher, accumulation, pin=pin)
    return Prefetcher(batcher, accumulation, pin=pin)
