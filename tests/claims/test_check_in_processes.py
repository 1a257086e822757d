"""``repro check --jobs N``: the claims spread over N processes give the records one process gives.

Each claim is seeded from its id, so neither the worker that runs it nor what ran before it there may
change its verdict or its value (the selftest's claims stage runs each side in processes on a GPU host).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from repro.audit.on_device import repro_on
from repro.checks import run_checks, select_claims
from repro.runtime import Runtime

#: quick claims of several kinds: equations, a layer, the loss, the schedule, a setting
PREFIXES = ("sec3.eq1", "sec3.pe", "sec3.sublayer", "sec5.label-smoothing.spread", "sec5.eq3.schedule",
            "sec6.beam-size")


def _claims() -> list:
    return [c for c in select_claims("local") if c.id.startswith(PREFIXES)]


def _row(record) -> tuple:
    return record.claim.id, record.status.value, repr(record.measured), record.detail


def test_the_records_of_two_processes_are_those_of_one() -> None:
    claims = _claims()
    assert len(claims) >= 8
    runtime = Runtime.device_only("cpu")
    one = run_checks(claims, repro_on(runtime))
    seen: list[str] = []
    two = run_checks(claims, None, jobs=2, make_target=partial(repro_on, runtime),
                     on_record=lambda r: seen.append(r.claim.id))
    assert [_row(r) for r in two] == [_row(r) for r in one]
    assert seen == [c.id for c in claims]   # reported in the claims' order


def test_processes_need_a_target_to_build() -> None:
    with pytest.raises(ValueError, match="make_target"):
        run_checks(_claims(), None, jobs=2)


def test_the_cli_takes_jobs_and_refuses_zero(tmp_path: Path) -> None:
    out = tmp_path / "records.json"
    done = subprocess.run([sys.executable, "-m", "repro", "check", "--jobs", "2", "--only", "sec3.eq1",
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert {r["status"] for r in json.loads(out.read_text())} == {"pass"}
    refused = subprocess.run([sys.executable, "-m", "repro", "check", "--jobs", "0"], capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "--jobs" in refused.stderr and "Traceback" not in refused.stderr
    with_run = subprocess.run([sys.executable, "-m", "repro", "check", "--run", str(tmp_path), "--jobs", "2"],
                              capture_output=True, text=True, timeout=120)
    assert with_run.returncode == 2 and "--jobs" in with_run.stderr and "Traceback" not in with_run.stderr
