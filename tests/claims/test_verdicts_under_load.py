"""No verdict depends on load or timing (issue 38): the claims that watch wall-clock triggers, file
times, a process group or a timing give the same verdicts on an idle machine and on one whose every
core is kept busy, and the claims of the loop's clock read only the clock they inject."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import repro.train.cadence as cadence_module
import repro.train.loop as loop_module
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import run_checks, select_claims

REPO = Path(__file__).resolve().parents[2]

#: Claims whose verdict a clock, file times, process scheduling or a timing could reach.
TIMING_SENSITIVE = ("sec6.checkpoint-interval.clock", "sec6.average.checkpoints-kept", "impl.resume.newest-checkpoint",
                    "sec5.batch.update-gradient.ddp", "impl.divergence-stop", "impl.main-rank", "impl.resume.ranks",
                    "impl.sharded-evaluation-perplexity",
                    "impl.sharded-evaluation-order", "sec3.2.1.additive.speed")


def _verdicts(out: Path, results: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "repro", "check", "--json", str(out), "--results", str(results)]
    for claim in TIMING_SENSITIVE:
        args += ["--only", claim]
    subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return {r["id"]: r["status"] for r in json.loads(out.read_text())}


def test_the_same_verdicts_with_every_core_busy(tmp_path: Path) -> None:
    results = tmp_path / "no-results"
    results.mkdir()
    idle = _verdicts(tmp_path / "idle.json", results)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.2)
        loaded = _verdicts(tmp_path / "loaded.json", results)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert set(idle) == {c.id for c in select_claims(only=TIMING_SENSITIVE)}
    assert loaded == idle
    assert set(idle.values()) == {"pass"}


def _no_wall_clock() -> float:
    raise AssertionError("a claim read the wall clock")


def test_the_clock_claims_read_only_the_clock_they_inject() -> None:
    """The loop's and the cadence's default clock raises: a claim that fell back on it would err."""
    claims = select_claims(only=("sec6.checkpoint-interval.clock", "sec6.average.checkpoints-kept", "impl.resume"))
    # the loop's and the cadence's own default clock (time.monotonic itself also runs the prefetching
    # worker's queues, which a claim may use)
    with mock.patch.object(loop_module, "monotonic", _no_wall_clock), \
            mock.patch.object(cadence_module, "monotonic", _no_wall_clock):
        records = run_checks(claims, ReproAdapter())
    assert {r.claim.id: r.status.value for r in records} == {c.id: "pass" for c in claims}
