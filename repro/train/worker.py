"""One process of a data-parallel group started on this machine (``torch.multiprocessing``, gloo).

What SLURM tasks do on a cluster, on one host: each process joins the group at ``init_method``,
then either trains a config with the loop (``task="train"``) or returns the first update's
gradients (``task="gradients"``), and writes what it got to ``out/rank<R>.pt`` (tensors and plain
values; read back with ``torch.load(weights_only=True)``). A spawned process imports this module
by its package name, so it runs wherever repro is importable, whatever the current directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data
from repro.train.loop import first_update_gradients, train

TASKS = ("train", "gradients")


def group_worker(rank: int, world: int, init_method: str, task: str, train_config: dict[str, Any], out: str) -> None:
    """The body of process ``rank`` of ``world`` (the first argument, as torch.multiprocessing passes it)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    try:
        cfg = TrainConfig.from_dict(train_config)
        if task == "gradients":
            data = prepare_training_data(cfg, rank=rank, world_size=world)
            result: dict[str, Any] = first_update_gradients(cfg, data.examples, data.vocab_size)
        else:
            messages: list[str] = []
            summary = train(cfg, log=messages.append)
            result = {**summary.to_dict(), "rank": rank, "messages": messages}
        torch.save(result, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
