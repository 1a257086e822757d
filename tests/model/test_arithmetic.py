"""Verdicts that do not depend on the hardware: every check runs in IEEE fp32 (repro.model.arithmetic),
whatever a job set before it, and gives the caller's settings back."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

import repro.claims.runner as runner
from repro.audit.on_device import on_device
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import run_checks, select_claims
from repro.model.arithmetic import IEEE_FP32, current, ieee_fp32, pinned, restore, snapshot, tf32_matmul
from repro.model.precision import set_tf32
from repro.runtime import Runtime
from tests.fake_accelerator import FakeAccelerator

#: the claims an H200 failed with TF32 on (shared/gpu-runs/2026-11-27-h200), each held to fp32 tolerances
GPU_SENSITIVE = ["sec3.eq1.scaled-dot-product", "sec3.eq2.feed-forward", "sec3.attention.weighted-sum",
                 "sec5.label-smoothing.loss"]


@pytest.fixture
def caller_settings():
    """TF32 on and every attention kernel enabled, as a training job leaves a process; put back after."""
    before = snapshot()
    set_tf32(True)
    yield
    restore(before)


def test_the_pin_sets_ieee_fp32_and_gives_the_callers_settings_back(caller_settings) -> None:
    outside = current()
    assert outside["float32_matmul_precision"] == "high" and tf32_matmul() and not outside["pinned"]
    with ieee_fp32():
        inside = current()
        assert inside["pinned"] and pinned()
        assert inside["float32_matmul_precision"] == "highest" and not torch.backends.cuda.matmul.allow_tf32
        assert not tf32_matmul()
        assert inside["sdpa"]["math"] and not inside["sdpa"]["mem_efficient"] and not inside["sdpa"]["cudnn"]
        assert inside["cudnn_tf32"] is False
    assert current() == outside
    with pytest.raises(ZeroDivisionError), ieee_fp32():
        1 / 0
    assert current() == outside


def test_a_job_inside_a_check_cannot_turn_tf32_on(caller_settings) -> None:
    with ieee_fp32():
        set_tf32(True)          # what resolving a CUDA runtime does
        assert torch.get_float32_matmul_precision() == "highest" and not tf32_matmul()
        with ieee_fp32():       # nested pins release in order
            pass
        assert pinned()
    assert not pinned()
    assert tf32_matmul()
    set_tf32(False)
    assert not torch.backends.cuda.matmul.allow_tf32 and not tf32_matmul()


def test_every_record_says_its_arithmetic() -> None:
    records = run_checks(select_claims("local", ["sec3.eq2"]), ReproAdapter())
    assert records and all(r.arithmetic == IEEE_FP32 and r.to_dict()["arithmetic"] == IEEE_FP32 for r in records)


def test_on_the_fake_gpu_the_pin_is_what_keeps_the_cpus_verdicts(caller_settings, monkeypatch) -> None:
    """With TF32 on, the fake accelerator computes as an H100/H200 does; the claims that failed on the
    H200 fail there too without the pin, and pass with it."""
    claims = select_claims("local", GPU_SENSITIVE)
    assert [c.id for c in claims] == GPU_SENSITIVE
    with FakeAccelerator():
        adapter = on_device(ReproAdapter(), Runtime.device_only("cuda"))
        pinned_ = {r.claim.id: r.status.value for r in run_checks(claims, adapter)}
        monkeypatch.setattr(runner, "ieee_fp32", nullcontext)
        unpinned = {r.claim.id: r.status.value for r in run_checks(claims, adapter)}
    assert set(pinned_.values()) == {"pass"}, pinned_
    assert set(unpinned.values()) == {"fail"}, unpinned
