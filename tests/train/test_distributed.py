"""DDP on the CPU (gloo): two workers keep one update at ~tokens_per_batch tokens and stay in sync."""

from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from repro.recipes import get_recipe
from repro.train.worker import group_worker


def config(out_dir: Path) -> dict:
    """Two workers x 2 passes of 25 real tokens = the update's 100 (synthetic pairs: no data files)."""
    return get_recipe("smoke").replace(tokens_per_batch=100, max_tokens_per_device=30, max_steps=2,
                                       checkpoint_every_steps=0, out_dir=str(out_dir), seed=3).train.to_dict()


@pytest.mark.slow
def test_two_workers_accumulate_and_write_one_checkpoint(tmp_path):
    # the workers' function lives in the package: a spawned process finds it from any directory
    mp.start_processes(group_worker, nprocs=2, join=True, start_method="spawn",
                       args=(2, f"file://{tmp_path / 'init'}", "train", config(tmp_path / "run"), str(tmp_path)))
    results = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    assert results[0]["final_loss"] == results[1]["final_loss"]  # the update's loss is reduced over both workers
    for result in results:
        assert (result["accumulation"], result["world_size"]) == (2, 2)  # ceil(100 / (2 * 30)) = 2
        assert "2 device(s) x 2 accumulated pass(es) x ~25 real tokens per side = ~100 tokens" in \
            result["messages"][0]
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step_00000002.pt"]


@pytest.mark.slow
def test_two_workers_resume_from_rank_zeros_checkpoint(tmp_path):
    """The checkpoint holds rank 0's batcher position; rank 1 resumes in its own shard (a requeued
    multi-GPU job refused to start: "batcher state field 'shard' is 0 but this batcher has 1")."""
    for steps in (2, 3):
        cfg = {**config(tmp_path / "run"), "max_steps": steps, "checkpoint_every_steps": 1}
        mp.start_processes(group_worker, nprocs=2, join=True, start_method="spawn",
                           args=(2, f"file://{tmp_path / f'init{steps}'}", "train", cfg, str(tmp_path)))
    results = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    assert [(r["resumed_from"], r["steps"]) for r in results] == [(2, 3), (2, 3)]
