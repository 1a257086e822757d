"""The next updates' batches, built while the device computes the current one.

On a GPU the host must not be on the critical path: collating ~25000 + 25000 tokens into padded
tensors takes ~12 ms on a 2-core host, as long as a fifth of an H100's base-model update. A worker
thread takes each update's micro-batches from the batcher, pins them (page-locked memory, so the copy
to the device can run without blocking the host), and queues them ``depth`` updates ahead. Each
update comes with the batcher's position right after it, so that a checkpoint records what was
consumed, not what was prefetched: exact resume holds.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from repro.data.batching import Batch


def pinned(batch: Batch) -> Batch:
    """``batch`` in page-locked host memory (what a non-blocking copy to a GPU needs)."""
    return Batch(batch.src.pin_memory(), batch.tgt_in.pin_memory(), batch.tgt_out.pin_memory(),
                 batch.src_tokens, batch.tgt_tokens, batch.indices)


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
