"""Data parallelism: a 2-process gloo update has the gradients of one process on the same global batch.

Two processes x 2 accumulated passes and one process x 4 passes must give the same gradients
(Section 5.1's batch, split differently). Run as plain torch.multiprocessing here; the SLURM
version (2 tasks of one job) is in test_slurm.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from repro.cluster.experiments import SMOKE_SYNTHETIC
from repro.cluster.smoke import (
    build_model, distributed_gradients, gloo_gradient_worker, rank_micro_batches, synthetic_batch,
)
from repro.cluster.update import plan_update

TRAIN = {"tokens_per_batch": 128, "max_tokens_per_device": 32, "vocab_size": 32, "seed": 3,
         "label_smoothing": 0.1}


def close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-7) for k in a)


@pytest.fixture(scope="module")
def single() -> dict:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return distributed_gradients(TRAIN, SMOKE_SYNTHETIC)
    finally:
        torch.set_num_threads(before)


def test_single_process_accumulates_four_passes(single: dict) -> None:
    assert (single["world_size"], single["accumulation"]) == (1, 4)


def test_two_gloo_processes_match_one(tmp_path: Path, single: dict) -> None:
    mp.start_processes(gloo_gradient_worker, nprocs=2, join=True, start_method="spawn",
                       args=(2, str(tmp_path / "init"), TRAIN, SMOKE_SYNTHETIC, str(tmp_path)))
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert (got["world_size"], got["accumulation"]) == (2, 2)
        assert abs(got["loss"] - single["loss"]) < 1e-6
        assert close(got["grads"], single["grads"]), f"rank {rank} gradients differ from one process's"


def test_per_rank_normalisation_would_be_caught(single: dict) -> None:
    """The plausible bug: each rank divides by its own token count, then DDP averages."""
    torch.set_num_threads(1)
    src, tgt_in, tgt_out = synthetic_batch(16, 8, 32, TRAIN["seed"])
    plan = plan_update(128, 2, 32)
    model = build_model(TRAIN, 32)
    for rank in (0, 1):
        parts = rank_micro_batches(16, plan, rank)
        rank_tokens = sum(int((tgt_out[p] != 0).sum()) for p in parts)
        for p in parts:
            loss = torch.nn.functional.cross_entropy(
                model(src[p], tgt_in[p]).flatten(0, 1), tgt_out[p].flatten(), ignore_index=0,
                label_smoothing=0.1, reduction="sum")
            (loss / rank_tokens / 2).backward()  # / 2: DDP's average over two ranks
    wrong = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert not close(wrong, single["grads"])
