"""What makes the training step fast on a GPU, held on the CPU (issue 29's proxies).

- On the fake accelerator: at most one host sync per update (none in the micro-batch loop), and no
  blocking host-to-device copy: a GPU never waits for the host inside an update.
- torch.compile of the objective over 100 updates of the real batcher on real text: no graph break,
  and a stated number of compilations: tests/train/test_compiled.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.train.loop import build, run
from repro.train.update_step import update
from tests.train.test_loop import VOCAB, quiet, tiny_config, toy_examples


def test_one_host_sync_per_update_and_no_blocking_copy(fake_gpu, tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, device="cuda", compile="off", tokens_per_batch=90, max_tokens_per_device=30)
    trainer = build(cfg, toy_examples(40), VOCAB)
    assert trainer.accumulation == 3 and trainer.objective.impl == "dense"
    batches = iter(trainer.batcher)
    updates = 5
    for step in range(1, updates + 1):
        micro = [next(batches) for _ in range(trainer.accumulation)]
        fake_gpu.reset()
        update(trainer.objective, trainer.optimizer, micro, trainer.device, step=step, d_model=32, warmup_steps=4,
               precision=trainer.precision)
        syncs = fake_gpu.sites("sync")
        assert sum(syncs.values()) == 1, f"update {step}: host syncs at {syncs}"
        assert list(syncs) == [next(s for s in syncs if s.startswith("repro/train/update_step.py"))]
        assert fake_gpu.count("host-to-device copy (blocking)") == 0, fake_gpu.report()


def test_the_loop_prefetches_pinned_batches_on_a_gpu(fake_gpu, tmp_path: Path) -> None:
    """The loop's batches arrive from the prefetcher (pinned, copied without blocking), and a resumed
    run still matches an uninterrupted one: the checkpoint holds what was consumed, not what was read."""
    full = run(tiny_config(tmp_path / "full", device="cuda", compile="off"), toy_examples(), VOCAB, log=quiet)
    cfg = tiny_config(tmp_path / "cut", device="cuda", compile="off")
    run(cfg.replace(max_steps=4), toy_examples(), VOCAB, log=quiet)
    resumed = run(cfg, toy_examples(), VOCAB, log=quiet)
    assert resumed.resumed_from == 4 and resumed.final_loss == pytest.approx(full.final_loss, rel=1e-6)
    # (the restore copies the checkpoint onto the device once; the updates copy nothing blocking)
    assert fake_gpu.count("host-to-device copy (blocking)", "repro/train/update_step.py") == 0, fake_gpu.report()
    assert fake_gpu.count("host-to-device copy (non_blocking)", "repro/train/update_step.py") > 0
