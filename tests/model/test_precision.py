"""repro.model.precision: what ``auto`` picks and why, on CPUs with and without fast bf16."""

import pytest
import torch

from repro.errors import ConfigError
from repro.model import precision as prec
from repro.model.precision import Precision, matmul_probe, resolve_precision
from repro.train.config import TrainConfig


def test_auto_picks_fp32_when_the_probe_says_bf16_is_slower():
    # an EPYC without AVX512-BF16 measured ~0.3-1 GFLOP/s in bf16 against ~60-90 in fp32
    p = resolve_precision("auto", "cpu", probe=lambda device: (64.0, 0.3))
    assert p.name == "fp32" and p.dtype == torch.float32 and not p.mixed
    assert "not faster" in p.reason and "0.3" in p.reason and "64.0" in p.reason
    assert p.provenance() == {"precision": "fp32", "precision_reason": p.reason}


def test_auto_picks_bf16_when_the_probe_says_bf16_is_faster():
    # a Xeon with AMX: 1937 against 179 GFLOP/s
    p = resolve_precision("auto", "cpu", probe=lambda device: (179.0, 1937.0))
    assert p.name == "bf16" and p.dtype == torch.bfloat16 and p.mixed and "faster" in p.reason


def test_explicit_choices_are_kept_whatever_the_probe():
    slow = lambda device: (64.0, 0.3)  # noqa: E731
    assert resolve_precision("bf16", "cpu", probe=slow).name == "bf16"
    assert resolve_precision("fp32", "cpu", probe=lambda d: (1.0, 100.0)).name == "fp32"


def test_the_probe_runs_once_per_machine_at_the_models_size(monkeypatch, tmp_path):
    """Measured once per machine, thread count, torch version and model size; every later process
    (here: the in-process cache cleared) reads the same rates and decides the same way."""
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(prec, "matmul_probe", lambda device, shape=None, **_: calls.append(shape) or (2.0, 3.0))
    try:
        for _ in range(3):
            prec._cached_probe.cache_clear()   # a new process
            p = resolve_precision("auto", "cpu", dims=(128, 512))
            assert p.name == "bf16" and "2048x128 @ 128x512" in p.reason and "cached in" in p.reason
        resolve_precision("auto", "cpu", dims=(512, 2048))
    finally:
        prec._cached_probe.cache_clear()
    assert calls == [(2048, 128, 512), (2048, 512, 2048)]
    assert len(__import__("json").loads((tmp_path / "precision-probe.json").read_text())) == 2


def test_bf16_needs_the_margin():
    """A probe within noise of fp32 (1.1x) does not switch a run to bf16."""
    assert resolve_precision("auto", "cpu", probe=lambda d: (100.0, 110.0)).name == "fp32"
    assert resolve_precision("auto", "cpu", probe=lambda d: (100.0, 100.0 * prec.MARGIN)).name == "bf16"


def test_the_probe_measures_both_dtypes():
    fp32, bf16 = matmul_probe("cpu", size=64, budget_s=0.005)
    assert fp32 > 0 and bf16 > 0


def test_cuda_with_bf16_picks_bf16_and_fp32_gets_tf32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "H100")
    tf32 = []
    monkeypatch.setattr(prec, "set_tf32", lambda on: tf32.append(on))
    assert resolve_precision("auto", "cuda").name == "bf16"
    fp32 = resolve_precision("fp32", "cuda")
    assert fp32.name == "fp32" and "TF32" in fp32.reason and tf32[-1] is True
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_precision("auto", "cuda").name == "fp32"


def test_autocast_context():
    a = torch.randn(4, 4)
    with Precision("bf16", "test").autocast():
        assert (a @ a).dtype == torch.bfloat16
    with Precision("fp32", "test").autocast():
        assert (a @ a).dtype == torch.float32


def test_bad_precision_is_a_config_error():
    with pytest.raises(ConfigError, match="precision"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ConfigError, match="'precision'"):
        TrainConfig(precision="half")
