"""The smoke recipe: the synthetic corpus through repro.train's loop learns, and resumes exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from repro.data.synthetic import SyntheticCorpus
from repro.errors import CheckpointError
from repro.recipes import get_recipe
from repro.train.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from repro.train.config import TrainConfig
from repro.train.loop import train


@pytest.fixture(autouse=True)
def one_thread():
    """Jobs run one thread per CPU; so do these tests (and 2 shared cores are not oversubscribed)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def config(out: Path, steps: int, every: int = 3) -> TrainConfig:
    return get_recipe("smoke").replace(out_dir=str(out), max_steps=steps, checkpoint_every_steps=every,
                                       keep_checkpoints=50).train


def quiet(_msg: str) -> None:
    pass


def final_params(out: Path, step: int) -> dict[str, torch.Tensor]:
    return load_checkpoint(checkpoint_path(out, step))["model"]


def test_synthetic_corpus_is_fixed_and_reversed() -> None:
    pairs = SyntheticCorpus().examples(32, seed=1)
    assert pairs == SyntheticCorpus().examples(32, seed=1) and len(pairs) == 16
    lengths = [len(s) for s, _ in pairs]
    assert min(lengths) < max(lengths) <= 8              # devices see unequal token counts
    assert all(t == s[::-1] and min(s) > 3 for s, t in pairs)  # no special ids


def test_smoke_run_learns(tmp_path: Path) -> None:
    summary = train(config(tmp_path, 20, every=10), log=quiet)
    assert summary.accumulation == 4 and summary.steps == 20
    assert summary.final_loss < 0.75 * summary.first_loss
    assert [Path(p).name for p in summary.checkpoints] == [f"step_{s:08d}.pt" for s in (10, 20)]
    assert (tmp_path / "metrics.csv").read_text().count("\n") == 5  # header + steps 5, 10, 15, 20


def test_resume_ends_with_the_uninterrupted_parameters(tmp_path: Path) -> None:
    straight = train(config(tmp_path / "a", 12), log=quiet)
    assert straight.resumed_from == 0
    train(config(tmp_path / "b", 6), log=quiet)          # "preempted" after step 6
    resumed = train(config(tmp_path / "b", 12), log=quiet)
    assert resumed.resumed_from == 6
    a, b = final_params(tmp_path / "a", 12), final_params(tmp_path / "b", 12)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_without_optimizer_state_is_caught(tmp_path: Path) -> None:
    """A plausible wrong resume (model restored, Adam's moments lost) ends elsewhere."""
    train(config(tmp_path / "a", 12), log=quiet)
    train(config(tmp_path / "c", 6), log=quiet)
    path = checkpoint_path(tmp_path / "c", 6)
    state = load_checkpoint(path)
    fresh = {k: v for k, v in state.items() if k not in ("format", "version")}
    fresh["optimizer"]["state"] = {}
    save_checkpoint(path, fresh)
    train(config(tmp_path / "c", 12), log=quiet)
    a, c = final_params(tmp_path / "a", 12), final_params(tmp_path / "c", 12)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_truncated_checkpoint_is_named(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path, 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="step_00000003.pt"):
        train(config(tmp_path, 6), log=quiet)
