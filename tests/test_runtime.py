"""repro.runtime: the device a task computes on, for every way a cluster binds GPUs to tasks."""

from __future__ import annotations

import pytest
import torch

from repro.errors import ConfigError
from repro.runtime import Runtime, check_device_name, resolve_device


@pytest.fixture
def gpus(monkeypatch):
    """Pretend this process sees ``n`` GPUs (set_device is a no-op)."""
    def see(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "set_device", lambda *_: None)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "H100")
    return see


def test_a_task_that_sees_the_nodes_gpus_takes_its_local_rank(gpus):
    gpus(8)
    assert [resolve_device("cuda", r) for r in (0, 3, 7)] == [torch.device("cuda", i) for i in (0, 3, 7)]
    assert resolve_device("auto", 5) == torch.device("cuda", 5)


def test_a_task_slurm_bound_to_one_gpu_takes_cuda_0(gpus):
    gpus(1)   # --gpus-per-task=1: every task sees one GPU, whatever its local rank
    assert [resolve_device("cuda", r) for r in (0, 3, 7)] == [torch.device("cuda", 0)] * 3


def test_a_task_that_sees_too_few_gpus_is_refused(gpus):
    gpus(2)
    with pytest.raises(ConfigError, match="local rank 5 sees 2 GPUs"):
        resolve_device("cuda", 5)
    with pytest.raises(ConfigError, match="sees 2 GPU"):
        resolve_device("cuda:4")


def test_cuda_without_a_gpu_is_refused_and_auto_falls_back(gpus):
    gpus(0)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_device("cuda")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "CPU", "", "cuda:-1"])
def test_bad_device_names(name):
    with pytest.raises(ConfigError, match="device must be"):
        check_device_name(name)


def test_a_runtime_on_a_gpu_picks_bf16_and_says_where_it_is(gpus):
    gpus(8)
    runtime = Runtime.resolve("cuda", "auto", world_size=8, rank=3, local_rank=3)
    assert runtime.device == torch.device("cuda", 3) and runtime.precision.name == "bf16"
    assert runtime.provenance()["device"] == "cuda:3" and "rank 3 of 8" in runtime.describe()
