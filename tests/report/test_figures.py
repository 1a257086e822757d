"""Figures: Eq. 3 against the logged lr, curves, Table 1 fits, attention maps; each names its provenance."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from repro.model import Transformer, TransformerConfig
from repro.report import generate
from repro.report.figures import attention_figure, complexity_figure, curves_figure, schedule_figure
from repro.report.runs import load_run
from repro.results import Result, ResultStore
from repro.train.schedule import learning_rate

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run_dir(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    steps = np.arange(50, 2001, 50)
    lrs = [learning_rate(int(s), 64, 400) for s in steps]
    lines = ["step,loss,nll,lr,tokens_per_s,elapsed_s"] + [
        f"{s},{5 - s / 1000:.3f},{4.5 - s / 1000:.3f},{lr},1000,{s * 0.2:.2f}" for s, lr in zip(steps, lrs)]
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    (folder / "config.json").write_text(json.dumps({"preset": "base", "model_overrides": {"d_model": 64},
                                                    "warmup_steps": 400}))
    return folder


def test_run_figures_and_captions(run_dir, make_provenance):
    run = load_run(run_dir, make_provenance("local: 2-core CPU"), ["local.multi30k.bleu"])
    sched, curves = schedule_figure(run), curves_figure(run)
    for fig in (sched, curves):
        assert fig.png.startswith(PNG)
        assert "local: 2-core CPU" in fig.caption and "synthetic CPU" in fig.caption and "0123456789abcdef" in fig.caption
    assert "no dev column" in curves.caption


def test_missing_inputs_are_said_not_drawn(tmp_path):
    run = load_run(tmp_path / "absent")
    assert any("not found" in n for n in run.notes)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.csv").write_text("step,loss\n1,5.0\n2,4.0\n")
    run = load_run(tmp_path / "r")
    assert "no logged lr" in schedule_figure(run)
    assert "complexity fits not drawn" in complexity_figure({})


def test_complexity_fit_slope(make_provenance):
    n = np.array([64, 128, 256, 512])
    res = Result("table1.self-attention.complexity", 2.0, make_provenance(),
                 extra={"points": {"n": n.tolist(), "cost": (3.0 * n**2).tolist()}})
    fig = complexity_figure({res.claim_id: res})
    assert fig.png.startswith(PNG) and "synthetic CPU" in fig.caption


def test_attention_maps_of_every_head():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, n_layers=2, d_model=16, d_ff=32,
                                          n_heads=4, dropout=0.0))
    fig = attention_figure(model, [4, 5, 6, 7, 8], ["a", "b", "c", "d", "e"], caption="cap")
    assert fig.png.startswith(PNG) and "4 heads" in fig.title and "layer 2" in fig.title
    attn = model.encoder_layers[-1].self_attn
    assert attn.record_weights is False and attn.last_weights is None  # the model is left as found


def test_report_embeds_figures_of_the_run_a_result_names(run_dir, tmp_path, make_provenance):
    store = ResultStore(tmp_path / "results")
    store.write(Result("local.multi30k.bleu", 31.5, make_provenance("local: 2-core CPU", run_dir=str(run_dir))))
    out = tmp_path / "out"
    doc = generate([store.root], out, attention_sentence=None)
    names = sorted(p.name for p in (out / "figures").iterdir())
    assert names == ["curves-base.png", "schedule-base.png"]
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2
    assert "figures/schedule-base.png" in (out / "report.md").read_text()
    assert doc.data.row("local.multi30k.bleu").status == "within tolerance"
    # The step time of the run is listed for its scale (no device peak recorded: not normalised).
    [steps] = [s.table for s in doc.sections if s.title.startswith("Step time")]
    assert steps.iloc[0]["measured s/step"] == pytest.approx(0.2) and steps.iloc[0]["8×P100-equivalent s/step"] is None
