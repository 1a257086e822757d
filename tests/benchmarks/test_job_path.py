"""``repro bench jobpath``: the job's own path (batcher on real WMT text, accumulation, the compiled
objective, prefetch, optimizer) against the fixed-shape update at the same tokens per update.

On the CPU: the figures are there and consistent, the compiled objective (dynamo's "eager" backend:
it traces as inductor would, without generating code) compiles within its stated bound and never
while measured. On the fake accelerator: the GPU path (prefetch thread, pinned batches, the fixed
batch on the device) runs with one host sync per update, all of them the loop's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import repro.train.loop as loop
from repro.benchmarks import job_path
from repro.cli import main as cli_main
from repro.train.compiled import COMPILATIONS
from repro.train.data import prepare_training_data

TINY = dict(quick=True, steps=2, block=2, warmup=1)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """One folder for the tests' prepared data: the BPE is learned once, then reused."""
    return tmp_path_factory.mktemp("jobpath-data")


@pytest.fixture
def eager_backend(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(loop, "COMPILE_BACKEND", "eager")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))   # build() points inductor there
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_the_job_path_on_the_cpu_compiled_within_its_bound(eager_backend, data_dir: Path, prepared: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "jobpath-cpu.json"
    result = job_path.measure("cpu", compile="on", precision="fp32", data_dir=str(data_dir), out=out,
                              work_dir=prepared, **TINY)
    assert json.loads(out.read_text()) == result
    assert result["benchmark"] == "jobpath" and result["dataset"] == "opennmt-wmt-ende-sample"
    assert result["train_pairs"] == 10000 and result["compiled"] and result["loss_impl"] == "dense"
    assert 1 <= result["compilations"] <= result["compilations_bound"] == COMPILATIONS
    assert result["compilations_while_measured"] == 0 and result["compile_cache"] == str(tmp_path / "inductor")
    job, fixed = result["cases"]["job"], result["cases"]["fixed"]
    # the same tokens per update: the fixed batch is sized to the job's mean (32-token sentences)
    assert fixed["real_tokens_per_update"] == pytest.approx(job["real_tokens_per_update"], rel=0.15)
    assert 0 < job["padding_fraction"] < 0.5
    for case in (job, fixed):
        assert case["s_per_update"] > 0 and case["tokens_per_s"] > 0
        assert case["s_per_update_spread"]["n"] == TINY["steps"]
    assert result["ratio"] == result["ratio_spread"]["median"] > 0
    assert result["ratio_spread"]["n"] == TINY["steps"]
    assert result["compile_s"] > 0 and result["update_plan"]["accumulation"] == 1
    # the gap split: the job's own batches on the device (its shapes, not its data path) run too
    shapes = result["cases"]["shapes"]
    assert shapes["s_per_update"] > 0 and shapes["real_tokens_per_update"] == pytest.approx(
        job["real_tokens_per_update"], rel=0.3)
    assert result["ratio_shapes"] > 0 and result["ratio_data_path"] > 0
    assert set(job["host_ms_per_update"]) == {"batch", "launch", "read"}
    assert set(shapes["host_ms_per_update"]) == set(fixed["host_ms_per_update"]) == {"launch", "read"}
    # launching an update takes host time on every path; none of it was left uncounted
    assert all(case["host_ms_per_update"]["launch"] > 0 for case in (job, shapes, fixed))
    assert sum(job["host_ms_per_update"].values()) <= 1e3 * job["s_per_update"] * 1.05
    assert result["device_allocations_while_measured"] == 0   # the CPU has no driver allocations to count


def test_the_gpu_path_syncs_once_per_update_on_the_fake_device(fake_gpu, data_dir: Path, prepared: Path) -> None:
    # the data prepared first (whatever ran before on this worker), so that the path measured reuses them
    prepare_training_data(job_path.job_config_for("cpu", True, prepared, data_dir=str(data_dir)))
    result = job_path.measure("cuda", quick=True, steps=1, block=1, warmup=0, compile="off", data_dir=str(data_dir),
                              work_dir=prepared, kernels=False)
    assert result["prefetch"] is True and result["device_name"] == "FakeAccelerator" and result["data"] == "reused"
    updates = 5     # the job's first and measured updates, the shapes case's, the fixed batch's warm-up and measured
    syncs = fake_gpu.sites("sync")
    assert sum(syncs.values()) == updates, syncs
    assert all(site.startswith("repro/train/update_step.py") for site in syncs), syncs
    assert fake_gpu.count("host-to-device copy (blocking)", "repro/train/update_step.py") == 0


def test_repro_bench_jobpath_refuses_bad_flags(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as err:
        cli_main(["bench", "jobpath", "--steps", "0"])
    assert err.value.code == 2 and "--steps must be at least 1" in capsys.readouterr().err
    assert cli_main(["bench", "jobpath", "--quick", "--profile", "h100"]) == 2   # 8 devices: not one process's path
    assert "one-device profile" in capsys.readouterr().err


def test_driver_allocations_are_counted_or_said_unknown(monkeypatch) -> None:
    """The count the allocator keeps is read as it is; a torch that keeps none gives None, never 0."""
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device=None: {"num_device_alloc": 5})
    assert job_path._device_allocations(cuda) == 5
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device=None: {})
    assert job_path._device_allocations(cuda) is None
    assert job_path._device_allocations(torch.device("cpu")) == 0
