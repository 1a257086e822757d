"""The smoke training run: it learns, and a resumed run ends exactly where an uninterrupted one does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from repro.cluster.experiments import SMOKE_SYNTHETIC
from repro.cluster.smoke import build_model, checkpoint_path, load_checkpoint, save_checkpoint, synthetic_batch, train_synthetic
from repro.errors import CheckpointError


@pytest.fixture(autouse=True)
def one_thread():
    """Jobs run one thread per CPU; so do these tests (and 2 shared cores are not oversubscribed)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def config(out: Path, steps: int, every: int = 3) -> dict:
    return {"out_dir": str(out), "tokens_per_batch": 128, "max_tokens_per_device": 32, "max_steps": steps,
            "checkpoint_every_steps": every, "keep_checkpoints": 0, "vocab_size": 32, "seed": 1}


def final_params(out: Path, step: int) -> dict[str, torch.Tensor]:
    return load_checkpoint(checkpoint_path(out, step))["model"]


def test_synthetic_batch_is_fixed_and_padded() -> None:
    src, tgt_in, tgt_out = synthetic_batch(16, 8, 32, seed=1)
    assert torch.equal(src, synthetic_batch(16, 8, 32, seed=1)[0])
    lengths = (src != 0).sum(1)
    assert lengths.min() < lengths.max()                       # ranks see unequal token counts
    assert torch.equal((tgt_out != 0).sum(1), lengths + 1)     # y + EOS
    assert (tgt_in[:, 0] == 1).all()                           # BOS + y


def test_smoke_run_learns(tmp_path: Path) -> None:
    summary = train_synthetic(config(tmp_path, 20, every=10), SMOKE_SYNTHETIC)
    assert summary.accumulation == 4 and summary.tokens_per_update == 128
    assert summary.final_loss < 0.75 * summary.first_loss
    assert [Path(p).name for p in summary.checkpoints] == [f"step_{s:08d}.pt" for s in (10, 20)]
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 21


def test_resume_ends_with_the_uninterrupted_parameters(tmp_path: Path) -> None:
    straight = train_synthetic(config(tmp_path / "a", 12), SMOKE_SYNTHETIC)
    assert straight.resumed_from is None
    train_synthetic(config(tmp_path / "b", 6), SMOKE_SYNTHETIC)          # "preempted" after step 6
    resumed = train_synthetic(config(tmp_path / "b", 12), SMOKE_SYNTHETIC)
    assert resumed.resumed_from == 6
    a, b = final_params(tmp_path / "a", 12), final_params(tmp_path / "b", 12)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_without_optimizer_state_is_caught(tmp_path: Path) -> None:
    """A plausible wrong resume (model restored, Adam's moments lost) ends elsewhere."""
    train_synthetic(config(tmp_path / "a", 12), SMOKE_SYNTHETIC)
    train_synthetic(config(tmp_path / "c", 6), SMOKE_SYNTHETIC)
    path = checkpoint_path(tmp_path / "c", 6)
    state = load_checkpoint(path)
    model = build_model(config(tmp_path, 6), 32)
    model.load_state_dict(state["model"])
    state["optimizer"] = torch.optim.Adam(model.parameters()).state_dict()
    save_checkpoint(path, state)
    train_synthetic(config(tmp_path / "c", 12), SMOKE_SYNTHETIC)
    a, c = final_params(tmp_path / "a", 12), final_params(tmp_path / "c", 12)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_truncated_checkpoint_is_named(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path, 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="step_00000003.pt"):
        train_synthetic(config(tmp_path, 6), SMOKE_SYNTHETIC)
