"""DDP on the CPU (gloo): two workers keep one update at ~tokens_per_batch tokens and stay in sync."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = Path(__file__).parent


def _worker(rank: int, world: int, init_file: str, out_dir: str, queue) -> None:
    spec = importlib.util.spec_from_file_location("tl", HERE / "test_loop.py")
    tl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tl)
    from repro.train.loop import run

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        messages = []
        cfg = tl.tiny_config(out_dir, tokens_per_batch=100, max_tokens_per_device=30, max_steps=2)
        summary = run(cfg, tl.toy_examples(), tl.VOCAB, log=messages.append)
        queue.put((rank, summary.accumulation, summary.world_size, messages[0], summary.final_loss))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_workers_accumulate_and_write_one_checkpoint(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, 2, str(tmp_path / "init"), str(tmp_path / "run"), queue))
             for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(queue.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results[0][4] == results[1][4]  # the update's loss is reduced over both workers
    for rank, accum, world, message, _ in results:
        assert (accum, world) == (2, 2)  # ceil(100 / (2 * 30)) = 2
        assert "2 device(s) x 2 accumulation step(s) x 30 tokens = 120 tokens" in message
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step_00000002.pt"]
