"""The loop's checkpoint-time dev evaluation: the dev perplexity curve of the report."""

from __future__ import annotations

import pandas as pd
import torch

from repro.train.loop import run
from tests.train.test_progress_line import VOCAB, tiny_config, toy_examples


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0  # every reading one second later: each update takes a few seconds
        return self.now


def test_dev_metrics_logged_at_every_checkpoint_and_only_there(tmp_path):
    seen: list[bool] = []
    steps: list[int] = []

    def evaluate(model: torch.nn.Module, step: int) -> dict[str, float]:
        seen.append(model.training)
        steps.append(step)
        return {"dev_ppl": 10.0 + len(seen)}

    run(tiny_config(tmp_path, max_steps=12, checkpoint_every_steps=5, log_every=2), toy_examples(), VOCAB,
        log=lambda _: None, evaluate=evaluate)
    log = pd.read_csv(tmp_path / "metrics.csv")
    with_dev = log.dropna(subset=["dev_ppl"])
    assert with_dev["step"].tolist() == [5, 10, 12]  # the checkpoints (5 is not a logged step: logged for it)
    assert with_dev["dev_ppl"].tolist() == [11.0, 12.0, 13.0]
    assert steps == [5, 10, 12]  # the hook is told the step it evaluates
    assert log["step"].tolist() == [2, 4, 5, 6, 8, 10, 12]


def test_evaluation_time_is_left_out_of_elapsed_time_and_throughput(tmp_path):
    def logged_elapsed(out, evaluate):
        clock = FakeClock()

        def slow(model, step):
            clock.now += 1000.0  # a dev evaluation taking 1000 s
            return evaluate(model) if evaluate else {}

        summary = run(tiny_config(out, max_steps=10, checkpoint_every_steps=5, log_every=5), toy_examples(), VOCAB,
                      log=lambda _: None, clock=clock, evaluate=slow if evaluate else None)
        return pd.read_csv(out / "metrics.csv"), summary

    plain, plain_summary = logged_elapsed(tmp_path / "plain", None)
    evaluated, evaluated_summary = logged_elapsed(tmp_path / "evaluated", lambda m: {"dev_ppl": 1.0})
    assert evaluated_summary.tokens_per_s > 0.5 * plain_summary.tokens_per_s  # the run's figure too
    # The evaluation's readings of the clock add a few seconds, never the 1000 s it took.
    assert (evaluated["elapsed_s"] - plain["elapsed_s"]).abs().max() < 10
    assert evaluated["tokens_per_s"].min() > 0.5 * plain["tokens_per_s"].min()


def test_evaluating_does_not_change_training(tmp_path):
    """The hook runs in eval mode; training goes on in train mode (dropout on) with the same RNG."""
    def final_params(out, evaluate):
        cfg = tiny_config(out, max_steps=8, checkpoint_every_steps=3,
                          model_overrides=dict(n_layers=1, d_model=16, d_ff=32, n_heads=2, max_positions=64, dropout=0.3))
        run(cfg, toy_examples(), VOCAB, log=lambda _: None, evaluate=evaluate)
        state = torch.load(sorted((out / "checkpoints").glob("step_*.pt"))[-1], weights_only=True)
        return state["model"]

    def evaluate(model, step):
        model.eval()
        with torch.no_grad():
            model.encode(torch.tensor([[5, 6, 7, 2]]))
        return {"dev_ppl": 1.0}

    plain, evaluated = final_params(tmp_path / "a", None), final_params(tmp_path / "b", evaluate)
    assert all(torch.equal(plain[k], evaluated[k]) for k in plain)
