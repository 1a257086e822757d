"""repro.train.allocator: expandable segments for a run of ever new shapes, on real CUDA only, never
over the user's own setting."""

from __future__ import annotations

import pytest
import torch

from repro.train import allocator


@pytest.fixture
def real_cuda(monkeypatch):
    """A CUDA build with a device, as far as the function can tell; the settings it passes, recorded."""
    calls: list[str] = []
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_set_allocator_settings", calls.append)
    for name in allocator.USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return calls


def test_on_cuda_the_segments_grow(real_cuda) -> None:
    assert allocator.grow_segments_for_varying_shapes() == "expandable_segments:True"
    assert real_cuda == ["expandable_segments:True"]


@pytest.mark.parametrize("name", allocator.USER_VARIABLES)
def test_the_users_own_setting_is_kept(real_cuda, monkeypatch, name: str) -> None:
    monkeypatch.setenv(name, "expandable_segments:False,max_split_size_mb:512")
    assert allocator.grow_segments_for_varying_shapes().startswith(f"as the user set it ({name}=")
    assert real_cuda == []


def test_elsewhere_nothing_is_touched(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda.memory, "_set_allocator_settings",
                        lambda _: pytest.fail("the allocator was configured without CUDA"))
    monkeypatch.setattr(torch.version, "cuda", None)
    assert allocator.grow_segments_for_varying_shapes() == "not CUDA: left as it is"


def test_a_gpu_build_calls_it(real_cuda, monkeypatch) -> None:
    """build() on a GPU runtime sets it before the model's first allocation (the fake accelerator's CPU tensors)."""
    import repro.train.loop as loop
    seen: list[str] = []
    monkeypatch.setattr(loop, "grow_segments_for_varying_shapes", lambda: seen.append("grown") or "x")
    monkeypatch.setattr(loop, "train_with_shape_free_kernels", lambda: seen.append("kernels"))

    class Stop(Exception):
        pass

    def stop(*_args, **_kwargs):
        raise Stop

    monkeypatch.setattr(loop, "plan_update", stop)

    class GPU:
        on_gpu, world_size = True, 1

    with pytest.raises(Stop):
        loop.build(loop.TrainConfig(), [], 100, runtime=GPU())   # type: ignore[arg-type]
    assert seen == ["kernels", "grown"]
