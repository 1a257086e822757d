"""``repro selftest``: one acceptance run that proves a machine, the first thing to run on a new
cluster before spending GPU-days on it.

On one GPU (``--device cuda``), with no network and in about 8 minutes on an H100/H200, it runs
(:mod:`repro.selftest.stages`): the GPU benchmark and the job-path benchmark (the device to itself),
a reduced ``table2-base-ende`` through the local executor (train, average, evaluate, store; its stored
step time checked against its own interval), then the cuda-marked tests (from a checkout) beside
every local claim on the device (its verdict compared to the CPU's) and a short Table 3 subset at
scale small. It writes one JSON summary (each stage: ok, fail or skipped with the reason, its seconds,
its figures and the targets they are held to) and a readable one, and exits 1 when a stage fails.

``--device cpu --quick`` runs every stage at toy size in a few minutes on two cores: CI runs it, so
that the acceptance run cannot rot between the rare days a GPU is at hand.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import json
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from repro.errors import UsageError
from repro.files.writer import atomic_write_text, make_dirs
from repro.results.provenance import git_commit
from repro.runtime import Runtime
from repro.selftest.diagnostics import diagnostics
from repro.selftest.stage import FAIL, SKIPPED, Context, Stage, StageResult, Target
from repro.selftest.stages import STAGE_NAMES, STAGES, checkout_root

#: The whole run's budget on one H100/H200 (issue 37): the summary says whether it was met.
GPU_BUDGET_S = 480.0

__all__ = ["GPU_BUDGET_S", "STAGE_NAMES", "render", "run_selftest"]


def run_selftest(runtime: Runtime, *, quick: bool, out_dir: Path, data_dir: Path,
                 stages: Sequence[str] = STAGE_NAMES, say: Callable[[str], None] = print,
                 json_path: Path | None = None, budget: float | None = None) -> dict[str, Any]:
    """Run ``stages`` (in the order of :data:`STAGES`) on ``runtime``; returns the summary. With
    ``json_path`` the summary (and its ``.md``) is rewritten after every stage, so that a run stopped
    from outside leaves what it measured. With ``budget`` (seconds) a stage whose estimate no longer
    fits in what is left is ``skipped`` with the reason ``budget``."""
    make_dirs(out_dir)
    ctx = Context(runtime, quick, out_dir, data_dir, checkout_root(), say)
    began, started = time.monotonic(), _dt.datetime.now(_dt.timezone.utc)
    results: dict[str, StageResult] = {}
    selected = [s for s in STAGES if s.name in stages]

    def publish(final: bool = False) -> dict[str, Any]:
        summary = _summary(ctx, results, selected, began, started, budget, final)
        if json_path is not None:
            write(summary, json_path)
        return summary

    beside: list[tuple[Stage, concurrent.futures.Future]] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(selected)) as pool:
        for stage in selected:
            left = None if budget is None else budget - (time.monotonic() - began)
            estimate = stage.estimate(ctx)
            if left is not None and estimate > left:
                results[stage.name] = StageResult(stage.name, stage.what, SKIPPED, 0.0, reason=(
                    f"budget: about {estimate:.0f} s needed, {max(left, 0):.0f} s of --budget {budget:g} left"))
                say(f"stage {stage.name}: skipped (budget)")
            elif stage.background:
                beside.append((stage, pool.submit(stage, ctx)))
                continue
            else:
                results[stage.name] = stage(ctx)
            publish()
        for stage, future in beside:
            results[stage.name] = future.result()
            publish()
    return publish(final=True)


def _summary(ctx: Context, results: dict[str, StageResult], selected: Sequence[Stage], began: float,
             started: _dt.datetime, budget: float | None, final: bool) -> dict[str, Any]:
    runtime = ctx.runtime
    ordered = [results[s.name] for s in selected if s.name in results]
    seconds = time.monotonic() - began
    targets = [t for r in ordered for t in r.targets]
    if runtime.on_gpu and not ctx.quick and final:
        targets.append(Target("the whole acceptance run, seconds", round(seconds, 1), GPU_BUDGET_S, at_least=False))
    return {
        "selftest": "repro selftest" + (" --quick" if ctx.quick else ""),
        "ok": all(r.status != FAIL for r in ordered),
        "complete": final and len(ordered) == len(selected),
        "pending": [s.name for s in selected if s.name not in results],
        "device": str(runtime.device),
        "device_name": torch.cuda.get_device_name(runtime.device) if runtime.on_gpu else platform.processor() or "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda, "commit": git_commit(),
        "started": started.isoformat(timespec="seconds"), "seconds": round(seconds, 1), "budget_s": budget,
        "checkout": str(ctx.checkout) if ctx.checkout else None, "out_dir": str(ctx.out_dir),
        "stages": [r.to_dict() for r in ordered],
        "targets": [t.to_dict() for t in targets],
        "targets_met": all(t.met for t in targets),
        "diagnostics": diagnostics(ordered),
    }


def render(summary: dict[str, Any]) -> str:
    """The summary as text a person reads: one line per stage, then the targets."""
    lines = [f"# {summary['selftest']} on {summary['device']} ({summary['device_name']}), commit {summary['commit']}",
             "", f"{'stage':<16} {'status':<8} {'seconds':>8}  reason / figures"]
    for stage in summary["stages"]:
        note = stage["reason"] or ", ".join(f"{k} {_short(v)}" for k, v in stage["figures"].items()
                                            if not isinstance(v, (dict, list)))
        lines.append(f"{stage['name']:<16} {stage['status']:<8} {stage['seconds']:>8.1f}  {note}")
    if summary.get("pending"):
        lines += ["", f"not finished yet: {', '.join(summary['pending'])}"]
    lines += ["", f"in all {summary['seconds']:.0f} s; {'every stage ok or skipped' if summary['ok'] else 'A STAGE FAILED'}"]
    if summary["targets"]:
        lines += ["", "targets:"]
        lines += [f"  {'met   ' if t['met'] else 'MISSED'} {t['name']}: {t['value']} (target {t['target']})"
                  for t in summary["targets"]]
    return "\n".join(lines) + "\n"


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def readable_path(json_path: Path) -> Path:
    """Where the readable summary of ``json_path`` goes: beside it, as ``.md``; a ``json_path`` that is
    that file itself (``--json summary.md``) is refused, as one summary would overwrite the other."""
    readable = json_path.with_suffix(".md")
    if readable == json_path:
        raise UsageError(f"{json_path}: the JSON summary would be overwritten by the readable one, which is written "
                         "beside it as .md; give the JSON summary another name (e.g. .json)")
    return readable


def write(summary: dict[str, Any], json_path: Path) -> Path:
    """The JSON summary at ``json_path`` and the readable one beside it (``.md``), each written whole."""
    readable = readable_path(json_path)
    atomic_write_text(json_path, json.dumps(summary, indent=2, default=str) + "\n")
    atomic_write_text(readable, render(summary))
    return readable

