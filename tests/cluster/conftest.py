"""Fixtures for the cluster tests: a real SLURM controller, or a clear skip.

The SLURM tests need the one-node cluster of ``slurm/local/setup.sh`` (or any reachable SLURM
whose default partition runs jobs on 2 CPUs). Outside CI they skip with the reason; with
``REPRO_REQUIRE_SLURM=1`` (CI) a missing SLURM fails them. They share one xdist group
(run pytest with ``--dist loadgroup``) so that they do not compete for the 2 CPUs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from repro.cluster.executor import slurm_reachable
from repro.cluster.profiles import ClusterProfile, load_profile

LOCAL_CLUSTER_CONF = Path(os.environ.get("REPRO_SLURM_DIR", "/tmp/repro-slurm")) / "etc" / "slurm.conf"
READY_STATES = ("idle", "mix", "alloc", "comp")


def _find_slurm() -> tuple[bool, str]:
    if not os.environ.get("SLURM_CONF") and LOCAL_CLUSTER_CONF.is_file():
        os.environ["SLURM_CONF"] = str(LOCAL_CLUSTER_CONF)  # the local test cluster's config
    ok, why = slurm_reachable(timeout_s=10)
    if not ok:
        return False, why
    states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10).stdout.split()
    if not any(s.rstrip("*~#!%$@^-") in READY_STATES for s in states):
        return False, f"SLURM answers but no node is ready (states: {' '.join(states) or 'none'})"
    return True, why


@pytest.fixture(scope="session")
def slurm() -> str:
    """A reachable SLURM with a ready node; skips (or fails when REPRO_REQUIRE_SLURM=1) otherwise."""
    ok, why = _find_slurm()
    if not ok:
        message = f"no SLURM reachable: {why}. Start one with `bash slurm/local/setup.sh`."
        if os.environ.get("REPRO_REQUIRE_SLURM") == "1":
            pytest.fail(f"REPRO_REQUIRE_SLURM=1 but {message}")
        pytest.skip(message)
    return os.environ.get("SLURM_CONF", "")


@pytest.fixture
def slurm_profile(slurm: str) -> ClusterProfile:
    """The local test cluster's profile, forced onto SLURM."""
    return dataclasses.replace(load_profile("local"), executor="slurm")


@pytest.fixture
def job_name() -> str:
    """A unique SLURM job name per test (xdist workers and reruns never collide)."""
    return f"repro-test-{uuid.uuid4().hex[:8]}"


def _log_tail(job) -> str:
    try:
        return (job.stderr() or "")[-2000:]
    except Exception:  # noqa: BLE001 - diagnostics only
        return "(no log)"


@pytest.fixture
def wait_done() -> Callable:
    """``wait_done(job, timeout_s)``: poll until submitit sees the job finished, else fail with its log."""

    def wait(job, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not job.done(force_check=True):
            if time.monotonic() > deadline:
                job.cancel(check=False)
                pytest.fail(f"job {job.job_id} not done after {timeout_s:.0f} s (state {job.state}):\n{_log_tail(job)}")
            time.sleep(0.5)

    return wait


@pytest.fixture
def wait_for() -> Callable:
    """``wait_for(predicate, timeout_s, what)``: poll a condition, fail after the bound."""

    def wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(0.3)

    return wait
