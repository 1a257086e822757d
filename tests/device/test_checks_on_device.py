"""``repro check --device`` and ``repro audit --device``: the claims' models built and run on the device
(:mod:`repro.audit.on_device`), fed the checks' seeded CPU inputs, under CUDA's device rules (the fake
accelerator) and on a real GPU where one is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from repro.audit.audit import auditable_claims, run_audit
from repro.audit.load import load_adapter
from repro.audit.on_device import DeviceModule, OnDevice, on_device
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import run_checks, select_claims
from repro.cli import main
from repro.results import ResultStore
from repro.runtime import Runtime
from repro.train.loss import projection_loss
from tests.fake_accelerator import FakeAccelerator, on_accelerator


def _empty(folder: Path) -> str:
    """An empty results store: the metric claims read none (the same on every device)."""
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def _statuses(path: Path) -> dict[str, str]:
    return {r["id"]: r["status"] for r in json.loads(path.read_text())}


@pytest.fixture(scope="module")
def cpu_check(tmp_path_factory) -> dict[str, str]:
    """Every local claim's verdict on the CPU (the default)."""
    out = tmp_path_factory.mktemp("check-cpu") / "cpu.json"
    main(["check", "--json", str(out), "--results", _empty(out.parent / "no-results")])
    return _statuses(out)


def test_every_local_claim_gives_the_cpus_verdict_on_the_fake_accelerator(cpu_check, tmp_path: Path) -> None:
    """All 170-odd claims, their models on the fake device under CUDA's rules: no claim errs on a tensor
    left on the host, and each verdict is the CPU's, but for the wall-time claim's (on the fake device it
    times the fake's Python wrapper, under whatever load the test machine has: it must run, not pass)."""
    out = tmp_path / "fake.json"
    with FakeAccelerator() as fake:
        # as after a job or a benchmark in the same process: TF32 on, fused attention kernels enabled
        # (the fake then computes fp32 products in TF32, as an H100/H200 does)
        torch.backends.cuda.matmul.allow_tf32 = True
        main(["check", "--device", "cuda", "--json", str(out), "--store", str(tmp_path / "store"),
              "--results", _empty(tmp_path / "no-results")])
        assert torch.backends.cuda.matmul.allow_tf32   # the caller's setting, given back
    on_device_ = _statuses(out)
    assert {r["arithmetic"] for r in json.loads(out.read_text())} == {"ieee-fp32"}
    assert "error" not in on_device_.values()
    timed = {c.id for c in select_claims("local") if c.checker == "attention.additive_speed"}
    assert timed and all(on_device_[claim] in ("pass", "fail") for claim in timed)
    assert {k: v for k, v in on_device_.items() if k not in timed} == \
        {k: v for k, v in cpu_check.items() if k not in timed}
    # the models really ran there: the bridge moved inputs onto the device and answers back
    assert fake.count("host-to-device", "repro/audit/on_device.py") > 100
    assert fake.count("sync: device-to-host", "repro/audit/on_device.py") > 100
    records = ResultStore(tmp_path / "store").read_all()
    assert records and all(r.provenance.scale == "local: equation-level check on cuda:0" for r in records)
    assert all(r.provenance.extra["device"] == "cuda:0" for r in records)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a real CUDA device")
def test_every_local_claim_on_a_real_gpu(cpu_check, tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    main(["check", "--device", "cuda", "--json", str(out), "--results", _empty(tmp_path / "no-results")])
    on_gpu = _statuses(out)
    assert "error" not in on_gpu.values()
    changed = {k: (cpu_check[k], v) for k, v in on_gpu.items() if v != cpu_check[k]}
    assert not changed, changed


class _LossOnTheHost(ReproAdapter):
    """repro's objective fed an identity built on the host beside logits on the device: the mistake
    the device audit exists to catch (the evaluation crash of issue 26 was one of its kind)."""

    def loss(self, logits, target, pad_id, smoothing):
        identity = torch.eye(logits.size(-1), dtype=logits.dtype)
        return projection_loss(logits, identity, target, epsilon=smoothing, pad_id=pad_id).loss


def test_a_tensor_made_on_the_host_fails_on_the_device_and_names_the_method() -> None:
    claims = select_claims("local", ["sec5.label-smoothing.loss"])
    assert [r.status.value for r in run_checks(claims, _LossOnTheHost())] == ["pass"]   # the CPU cannot see it
    with FakeAccelerator():
        record, = run_checks(claims, on_device(_LossOnTheHost(), Runtime.resolve("cuda", "fp32")))
    assert record.status.value == "error"
    assert "adapter method 'loss" in record.detail and "same device" in record.detail


def test_audit_takes_the_device(tmp_path: Path, capsys) -> None:
    only = ["--only", "sec3.eq1", "--only", "sec3.eq2", "--only", "sec3.sublayer", "--only", "sec3.decoder",
            "--only", "impl.padding", "--only", "sec5.label-smoothing"]
    target = "repro.audit.torch_adapter:adapter"
    assert main(["audit", target, "--json", str(tmp_path / "cpu.json"), *only]) in (0, 1)
    with FakeAccelerator() as fake:
        torch.set_float32_matmul_precision("high")   # TF32, as a job leaves it
        assert main(["audit", target, "--device", "cuda", "--json", str(tmp_path / "fake.json"), *only]) in (0, 1)
    assert "repro audit: the implementation's parts are built and run on cuda:0" in capsys.readouterr().err
    cpu, fake_ = _statuses(tmp_path / "cpu.json"), _statuses(tmp_path / "fake.json")
    assert fake_ == cpu and len(cpu) >= 8 and "error" not in fake_.values()
    assert fake.count("host-to-device", "repro/audit/on_device.py") > 0


def test_the_zoo_records_the_device(tmp_path: Path) -> None:
    with FakeAccelerator():
        assert main(["audit", "--zoo", "--zoo-only", "torch", "--only", "sec3.eq1", "--device", "cuda",
                     "--out", str(tmp_path)]) == 0
    hardware = json.loads((tmp_path / "zoo.json").read_text())["provenance"]["hardware"]
    assert hardware.startswith("FakeAccelerator (cuda:0), inputs built on the")


def test_the_bridge_keeps_gradients_hooks_and_the_models_own_weights(fake_gpu) -> None:
    bridge = OnDevice(ReproAdapter(), Runtime.device_only("cuda"))
    # a loss on the device, its gradient on the host logits
    logits = torch.randn(5, 11, requires_grad=True)
    loss = bridge.loss(logits, torch.tensor([4, 5, 0, 6, 7]), 0, 0.1)
    loss.backward()
    assert not on_accelerator(loss) and logits.grad is not None and logits.grad[2].abs().max() == 0
    # a layer built there: its norms are modules whose parameters live there and whose hooks see the host
    layer = bridge.encoder_layer(16, 4, 32)
    norm = layer.norms[0]
    assert isinstance(norm, DeviceModule) and all(on_accelerator(p) for p in norm.parameters())
    seen = []
    handle = norm.register_forward_pre_hook(lambda module, args: seen.append((module, args[0])))
    out = layer.layer(torch.randn(2, 3, 16))
    handle.remove()
    assert not on_accelerator(out) and len(seen) == 1 and seen[0][0] is norm and not on_accelerator(seen[0][1])
    # the weights a part exposes are the model's own, on the device: a write reaches the model
    ffn = bridge.feed_forward(8, 16)
    assert on_accelerator(ffn.w_1) and on_accelerator(ffn.b_2)
    x = torch.randn(1, 2, 8)
    before, old_bias = ffn.module(x), ffn.b_2.detach().cpu().clone()
    with torch.no_grad():
        ffn.b_2.copy_(torch.ones(8))
    assert torch.allclose(ffn.module(x) - before, 1 - old_bias, atol=1e-6)
    # the search runs over the model as the implementation built it
    parts = bridge.model(vocab_size=20, d_model=16, n_heads=4, d_ff=32, n_layers=1)
    assert on_accelerator(parts.source_embedding)
    found = bridge.beam_search(parts, torch.randint(4, 20, (2, 5)), beam_size=2, alpha=0.6, max_len_offset=3)
    assert len(found) == 2 and all(isinstance(t, int) for row in found for t in row)


def test_on_the_cpu_the_adapter_is_itself() -> None:
    adapter = ReproAdapter()
    assert on_device(adapter, Runtime.resolve("cpu", "fp32")) is adapter


def test_parameter_counts_build_on_meta_through_the_bridge(fake_gpu) -> None:
    """Table 3's census builds rows on the meta device; the bridge leaves that context alone."""
    adapter = load_adapter("repro.audit.torch_adapter:adapter")
    built_on, build = [], adapter.model

    def model(*sizes):
        built_on.append(torch.get_default_device().type)
        return build(*sizes)

    adapter.model = model
    claims = [c for c in auditable_claims() if c.id == "table3.params-diff.C-N2"]
    record, = run_audit(OnDevice(adapter, Runtime.resolve("cuda", "fp32")), claims)
    assert record.status.value == "pass", record.check.detail
    assert built_on and set(built_on) == {"meta"}
