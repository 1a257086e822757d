"""The loop's figures read one update late (issue 42): on one GPU with fused Adam the host launches
update k + 1 before it reads update k's loss, and the optimizer leaves a non-finite update out on the
device (``found_inf``). Held on the CPU with torch's fused CPU Adam, which takes the same flag:

- a run read late equals the same run read at once, figure for figure and weight for weight;
- update k's figures are read after update k + 1 is launched, except where a checkpoint is due;
- a non-finite update changes nothing on the device, and the run stops naming it, with no
  checkpoint written for it or after it;
- a resumed run read late equals an uninterrupted one.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from repro.train import loop, update_step
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.optimizer import build_optimizer
from repro.train.update_step import InFlight, TrainingDiverged, launch_update, skips_on_device
from tests.train.test_loop import VOCAB, quiet, tiny_config, toy_examples


def _fused(cfg, model) -> torch.optim.Adam:
    params = list(dict.fromkeys(p for p in model.parameters() if p.requires_grad))
    return torch.optim.Adam(params, lr=0.0, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps, fused=True)


@pytest.fixture
def fused_adam(monkeypatch):
    monkeypatch.setattr(loop, "optimizer_for", _fused)


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in ("elapsed_s", "tokens_per_s")} for row in csv.DictReader(f)]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def test_the_flag_is_what_a_gpu_run_has() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    assert skips_on_device(torch.optim.Adam(params, fused=True))
    assert not skips_on_device(torch.optim.Adam(params))             # the CPU's default: read before the step
    assert not skips_on_device(build_optimizer(torch.nn.Linear(2, 2)))


def test_a_run_read_late_equals_one_read_at_once(fused_adam, monkeypatch, tmp_path: Path) -> None:
    cfg = dict(max_steps=10, checkpoint_every_steps=4)
    late = loop.run(tiny_config(tmp_path / "late", **cfg), toy_examples(), VOCAB, log=quiet)
    monkeypatch.setattr(update_step, "skips_on_device", lambda optimizer: False)
    at_once = loop.run(tiny_config(tmp_path / "at-once", **cfg), toy_examples(), VOCAB, log=quiet)
    assert late.final_loss == at_once.final_loss and late.steps == at_once.steps == 10
    assert _rows(tmp_path / "late") == _rows(tmp_path / "at-once") and len(_rows(tmp_path / "late")) == 10
    for a, b in zip(list_checkpoints(tmp_path / "late"), list_checkpoints(tmp_path / "at-once"), strict=True):
        wa, wb = _weights(a), _weights(b)
        assert all(torch.equal(wa[k], wb[k]) for k in wa), a.name


def test_figures_are_read_once_the_next_update_is_launched(fused_adam, monkeypatch, tmp_path: Path) -> None:
    events: list[tuple[str, int]] = []
    launch, result = loop.Trainer.launch, InFlight.result

    def spy_launch(self, micro, step):
        launched = launch(self, micro, step)
        events.append(("launch", step))
        return launched

    def spy_result(self):
        if self._stats is None:
            events.append(("read", self.step))
        return result(self)

    monkeypatch.setattr(loop.Trainer, "launch", spy_launch)
    monkeypatch.setattr(InFlight, "result", spy_result)
    loop.run(tiny_config(tmp_path, max_steps=6, checkpoint_every_steps=3), toy_examples(), VOCAB, log=quiet)
    # 3 and 6 are due for a checkpoint: read before the next launch; the others after it
    assert events == [("launch", 1), ("launch", 2), ("read", 1), ("launch", 3), ("read", 2), ("read", 3),
                      ("launch", 4), ("launch", 5), ("read", 4), ("launch", 6), ("read", 5), ("read", 6)]


def test_a_non_finite_update_changes_nothing_on_the_device(fused_adam, tmp_path: Path) -> None:
    trainer = loop.build(tiny_config(tmp_path), toy_examples(), VOCAB)
    batches = iter(trainer.batcher)
    trainer.update(trainer.micro_batches(batches), 1)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    state = {id(p): {k: v.clone() for k, v in s.items()} for p, s in trainer.optimizer.state.items()}
    micro = trainer.micro_batches(batches)
    with torch.no_grad():   # an infinite logit: the loss is NaN
        trainer.model.output_projection.weight[0, 0] = float("inf")
    poisoned = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    launched = launch_update(trainer.objective, trainer.optimizer, micro, trainer.device, step=2, d_model=32,
                             warmup_steps=4, precision=trainer.precision)
    assert launched.deferred   # the step was launched before the loss was read
    with pytest.raises(TrainingDiverged, match="step 2"):
        launched.result()
    after = trainer.model.state_dict()
    assert all(torch.equal(after[k], poisoned[k]) for k in after)
    assert not all(torch.equal(after[k], before[k]) for k in after)   # (only the poisoned entry differs)
    for p, s in trainer.optimizer.state.items():
        assert all(torch.equal(s[k], state[id(p)][k]) for k in s), "Adam's moments or step count moved"


def test_a_run_read_late_stops_at_the_update_that_diverged(fused_adam, tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, max_steps=10, checkpoint_every_steps=2)
    built: list[loop.Trainer] = []

    def poison(step: int) -> None:
        if step == 4:   # update 5's loss is not finite; 5 is not due for a checkpoint, so it is read late
            with torch.no_grad():
                built[0].model.output_projection.weight.fill_(float("nan"))

    with pytest.raises(TrainingDiverged, match=r"^step 5: .*the last checkpoint is .*0*4"):
        loop.run(cfg, toy_examples(), VOCAB, log=quiet, on_built=built.append, on_step=poison)
    assert [load_checkpoint(p)["step"] for p in list_checkpoints(tmp_path)] == [2, 4]


def test_a_resumed_run_read_late_equals_an_uninterrupted_one(fused_adam, tmp_path: Path) -> None:
    full = loop.run(tiny_config(tmp_path / "full", max_steps=8, checkpoint_every_steps=3), toy_examples(), VOCAB,
                    log=quiet)
    cut = tiny_config(tmp_path / "cut", max_steps=8, checkpoint_every_steps=3)
    loop.run(cut.replace(max_steps=5), toy_examples(), VOCAB, log=quiet)
    resumed = loop.run(cut, toy_examples(), VOCAB, log=quiet)
    assert resumed.resumed_from == 5 and resumed.final_loss == full.final_loss
