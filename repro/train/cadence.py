"""When training writes a checkpoint (Section 6.1: "checkpoints, which were written at 10-minute
intervals"): every ``every_minutes`` of wall time, optionally every ``every_steps`` updates as
well, and always after the last update, so that a run ends with its final model on disk."""

from __future__ import annotations

from time import monotonic   # the default clock (a module name: the clock tests replace it here alone)
from collections.abc import Callable


class CheckpointCadence:
    """Decides after each update whether a checkpoint is due; ``clock`` gives seconds (a fake one in tests)."""

    def __init__(self, every_steps: int, every_minutes: float, last_step: int,
                 clock: Callable[[], float] | None = None) -> None:
        self.every_steps, self.every_minutes, self.last_step = every_steps, every_minutes, last_step
        self.clock = clock or monotonic
        self._since = self.clock()

    def due(self, step: int) -> bool:
        by_steps = bool(self.every_steps) and step % self.every_steps == 0
        by_time = bool(self.every_minutes) and self.clock() - self._since >= 60 * self.every_minutes
        return by_steps or by_time or step == self.last_step

    def written(self) -> None:
        """A checkpoint was just written: the wall-time interval starts again."""
        self._since = self.clock()
