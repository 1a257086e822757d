"""Where a run's wall time goes, and the steady-state seconds per update of Section 5.2.

"Each training step took about 0.4 seconds" (Section 5.2, base model, 8 P100) is the time of one
update once training runs: it leaves out what a run pays once or now and then. A run's wall time is
split here, by name:

- ``startup_s``: from the start of the job's training (data preparation, building the model, the
  optimizer and the batcher, restoring a checkpoint) to the start of its first update;
- ``warmup_s``: the first :func:`warmup_updates` updates (the first calls of every kernel, the
  allocator's growth, cuBLAS's and cuDNN's heuristics);
- ``compile_s``: every later update during which ``torch.compile`` compiled (dynamo's count of graphs
  rose): a new shape, a recompilation;
- ``evaluation_s``: the dev evaluations at checkpoints;
- ``checkpoint_s``: writing and pruning checkpoints;
- ``steady_s``: the other updates, each timed from fetching its batches to the end of its optimizer
  step (the update ends with a host sync, so the wall clock sees the device's work; on one GPU with
  fused Adam that sync reads the previous update's figures, so each update's time is the device's
  pace, one update behind).

The step time is the median of the steady updates; its interval is their 2.5-97.5 percentile range,
which contains the median by construction. A run too short to have a steady update says so
(``steady_updates`` 0) and has no step time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: At most this many first updates are warm-up (fewer in short runs: 5 % of the run, at least one).
MAX_WARMUP_UPDATES = 20


def warmup_updates(updates: int) -> int:
    """How many of a run's first ``updates`` count as warm-up."""
    return max(1, min(MAX_WARMUP_UPDATES, updates // 20)) if updates > 1 else 0


def compile_count() -> int:
    """Graphs ``torch.compile`` has compiled in this process so far (dynamo's counter; 0 where dynamo
    was never loaded, which nothing compiled without)."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    return int(dynamo.counters["stats"]["unique_graphs"]) if dynamo is not None else 0


@dataclass
class StepClock:
    """Times one run's updates and what is not an update (module docstring)."""

    clock: Callable[[], float]
    began: float
    compiles: Callable[[], int] = compile_count
    updates: list[float] = field(default_factory=list)
    compiled: list[bool] = field(default_factory=list)
    excluded: dict[str, float] = field(default_factory=lambda: {"evaluation_s": 0.0, "checkpoint_s": 0.0})
    first_update_at: float | None = None
    _top: float = 0.0
    _graphs: int = 0

    def start_update(self) -> None:
        """Before fetching an update's batches."""
        self._top = self.clock()
        self._graphs = self.compiles()
        if self.first_update_at is None:
            self.first_update_at = self._top

    def end_update(self) -> None:
        """After the update's optimizer step."""
        self.updates.append(self.clock() - self._top)
        self.compiled.append(self.compiles() != self._graphs)

    def exclude(self, what: str, seconds: float) -> None:
        """``seconds`` spent on ``what`` (``evaluation_s``, ``checkpoint_s``) between updates."""
        self.excluded[what] = self.excluded.get(what, 0.0) + seconds

    def summary(self, end: float | None = None) -> dict[str, Any]:
        """The split of the run's wall time and the steady-state step time (module docstring)."""
        end = self.clock() if end is None else end
        seconds = np.asarray(self.updates, dtype=float)
        warm = warmup_updates(len(seconds))
        compiled = np.asarray(self.compiled, dtype=bool)
        steady = np.ones(len(seconds), dtype=bool)
        steady[:warm] = False
        steady &= ~compiled
        out: dict[str, Any] = {
            "updates": len(seconds), "steady_updates": int(steady.sum()),
            "warmup_updates": warm, "compile_updates": int((compiled & ~(np.arange(len(seconds)) < warm)).sum()),
            "compiled_updates_total": int(compiled.sum()),
            "startup_s": round((self.first_update_at if self.first_update_at is not None else end) - self.began, 3),
            "warmup_s": round(float(seconds[:warm].sum()), 3),
            "compile_s": round(float(seconds[~steady].sum() - seconds[:warm].sum()), 3),
            **{k: round(v, 3) for k, v in self.excluded.items()},
            "steady_total_s": round(float(seconds[steady].sum()), 3),
            "total_s": round(end - self.began, 3),
        }
        if steady.any():
            p2_5, q1, median, q3, p97_5 = np.percentile(seconds[steady], [2.5, 25, 50, 75, 97.5])
            out.update(steady_s_per_update=round(float(median), 6), ci95_s=[round(float(p2_5), 6), round(float(p97_5), 6)],
                       quartiles_s=[round(float(q1), 6), round(float(q3), 6)])
        return out
