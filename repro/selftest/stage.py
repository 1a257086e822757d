"""One stage of the acceptance run: what it found (ok, fail or skipped, with the reason), how long it
took, its figures, and the targets its figures are held to."""

from __future__ import annotations

import gc
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.runtime import Runtime

OK, FAIL, SKIPPED = "ok", "fail", "skipped"


class Skip(Exception):
    """The stage does not apply here (no GPU, no checkout); the message says why."""


class StageFailed(Exception):
    """The stage ran and found something wrong; the message says what (its figures are kept)."""

    def __init__(self, message: str, figures: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.figures = figures or {}


@dataclass(frozen=True)
class Target:
    """A figure held to a bound: ``value >= bound`` (``at_least``) or ``value <= bound``."""

    name: str
    value: float | None
    bound: float
    at_least: bool = True
    why: str = ""

    @property
    def met(self) -> bool:
        if self.value is None or not math.isfinite(self.value):
            return False
        return self.value >= self.bound if self.at_least else self.value <= self.bound

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "target": f"{'>=' if self.at_least else '<='} {self.bound:g}",
                "met": self.met, **({"why": self.why} if self.why else {})}


@dataclass
class Context:
    """What every stage is given: where it computes, how small it runs, where it writes."""

    runtime: Runtime
    quick: bool
    out_dir: Path
    data_dir: Path
    checkout: Path | None
    say: Callable[[str], None]

    @property
    def gpu(self) -> bool:
        return self.runtime.on_gpu

    @property
    def device(self) -> str:
        return str(self.runtime.device)


@dataclass
class StageResult:
    name: str
    what: str
    status: str
    seconds: float
    reason: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "status": self.status, "seconds": round(self.seconds, 1),
                "reason": self.reason, "figures": self.figures, "targets": [t.to_dict() for t in self.targets]}


@dataclass(frozen=True)
class Stage:
    """A named step of the run: ``run(ctx)`` returns its figures and targets, raises :class:`Skip` when
    it does not apply, :class:`StageFailed` (or anything else) when it fails."""

    name: str
    what: str
    run: Callable[[Context], tuple[dict[str, Any], list[Target]]]
    #: runs beside the stages after it (it times nothing and they time nothing): a subprocess's wait
    background: bool = False
    #: about how long it takes (seconds) on one H100/H200 and, with --quick, on two CPU cores: what
    #: ``--budget`` holds it to
    gpu_s: float = 60.0
    quick_s: float = 30.0

    def estimate(self, ctx: Context) -> float:
        return 0.0 if self.background else (self.gpu_s if ctx.gpu and not ctx.quick else self.quick_s)

    def __call__(self, ctx: Context) -> StageResult:
        start = time.monotonic()
        ctx.say(f"stage {self.name}: {self.what}")
        try:
            figures, targets = self.run(ctx)
            result = StageResult(self.name, self.what, OK, 0.0, figures=figures, targets=targets)
        except Skip as why:
            result = StageResult(self.name, self.what, SKIPPED, 0.0, reason=str(why))
        except StageFailed as err:
            result = StageResult(self.name, self.what, FAIL, 0.0, reason=str(err), figures=err.figures)
        except Exception as err:  # noqa: BLE001 - a broken stage is that stage's failure, the others still run
            where = traceback.extract_tb(err.__traceback__)[-1]
            result = StageResult(self.name, self.what, FAIL, 0.0,
                                 reason=f"{type(err).__name__}: {err} (at {Path(where.filename).name}:{where.lineno})")
        result.seconds = time.monotonic() - start
        gc.collect()
        if ctx.gpu:   # what the stage's models held goes back to the device, for the next stage (a subprocess)
            torch.cuda.empty_cache()
        ctx.say(f"stage {self.name}: {result.status}" + (f" ({result.reason})" if result.reason else "")
                + f" in {result.seconds:.0f} s")
        return result
