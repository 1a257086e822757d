"""The training loop: memorising a tiny batch, exact resume, NaN loss, metrics log, accumulation."""

import random

import pandas as pd
import pytest
import torch

from repro.data.batching import TokenBatcher
from repro.decode import greedy_decode
from repro.model import Transformer
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.config import TrainConfig
from repro.train.loop import TrainingDiverged, run

VOCAB = 24


def tiny_config(out_dir, **changes) -> TrainConfig:
    base = dict(
        model_overrides=dict(n_layers=1, d_model=32, d_ff=64, n_heads=2, dropout=0.1, max_positions=64),
        dataset="multi30k-en-de", vocab_size=VOCAB, tokens_per_batch=40, max_tokens_per_device=40,
        max_steps=6, warmup_steps=4, checkpoint_every_steps=2, checkpoint_every_minutes=0,
        keep_checkpoints=10, average_last=1, out_dir=str(out_dir), device="cpu", log_every=1, seed=3,
    )
    base.update(changes)
    return TrainConfig(**base)


def toy_examples(n=20, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        src = [rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 7))]
        out.append((src, list(reversed(src))))
    return out


def quiet(_msg):
    pass


def test_kill_and_resume_equals_uninterrupted(tmp_path):
    examples = toy_examples()
    full = run(tiny_config(tmp_path / "full"), examples, VOCAB, log=quiet)

    class Killed(Exception):
        pass

    def kill_at_5(step):  # dies after step 5: the checkpoint of step 4 survives, step 5 is lost
        if step == 5:
            raise Killed

    cfg = tiny_config(tmp_path / "cut")
    with pytest.raises(Killed):
        run(cfg, examples, VOCAB, on_step=kill_at_5, log=quiet)
    assert [p.name for p in list_checkpoints(tmp_path / "cut")][-1] == "step_00000004.pt"
    resumed = run(cfg, examples, VOCAB, log=quiet)
    assert resumed.resumed_from == 4 and resumed.steps == 6
    a = load_checkpoint(list_checkpoints(tmp_path / "full")[-1])
    b = load_checkpoint(list_checkpoints(tmp_path / "cut")[-1])
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert a["data"] == b["data"]
    # the metrics log of the resumed run reads like the uninterrupted one
    log_a = pd.read_csv(tmp_path / "full" / "metrics.csv")
    log_b = pd.read_csv(tmp_path / "cut" / "metrics.csv")
    assert list(log_b["step"]) == list(range(1, 7))
    assert log_a["loss"].tolist() == log_b["loss"].tolist()
    assert {"step", "loss", "lr", "tokens_per_s"} <= set(log_a.columns)


def test_resume_without_restoring_rng_differs(tmp_path, monkeypatch):
    """The resume test has teeth: if the RNG state were not restored, dropout masks would differ."""
    examples = toy_examples()
    full = tiny_config(tmp_path / "full")
    run(full, examples, VOCAB, log=quiet)
    cut = tiny_config(tmp_path / "cut", max_steps=4)
    run(cut, examples, VOCAB, log=quiet)
    monkeypatch.setattr(torch, "set_rng_state", lambda state: None)
    run(tiny_config(tmp_path / "cut"), examples, VOCAB, log=quiet)
    a = load_checkpoint(list_checkpoints(tmp_path / "full")[-1])["model"]
    b = load_checkpoint(list_checkpoints(tmp_path / "cut")[-1])["model"]
    assert any(not torch.equal(a[k], b[k]) for k in a)


def test_loss_falls_until_a_tiny_batch_is_memorised(tmp_path):
    examples = toy_examples(4, seed=1)
    cfg = tiny_config(tmp_path, tokens_per_batch=200, max_tokens_per_device=200, max_steps=80, warmup_steps=20,
                      lr_scale=0.5, label_smoothing=0.0, checkpoint_every_steps=0, keep_checkpoints=1,
                      model_overrides=dict(n_layers=1, d_model=32, d_ff=64, n_heads=2, dropout=0.0, max_positions=64))
    summary = run(cfg, examples, VOCAB, log=quiet)
    log = pd.read_csv(tmp_path / "metrics.csv")
    assert log["loss"].iloc[-1] < 0.05 < log["loss"].iloc[0]
    state = load_checkpoint(summary.checkpoints[-1])
    from repro.model import TransformerConfig
    model = Transformer(TransformerConfig.from_dict(state["model_config"]))
    model.load_state_dict(state["model"])
    src = torch.zeros(4, 7, dtype=torch.long)
    for i, (s, _) in enumerate(examples):
        src[i, : len(s)] = torch.tensor(s)
    assert greedy_decode(model, src) == [t for _, t in examples]


def test_nan_loss_names_the_step_and_writes_no_checkpoint(tmp_path):
    cfg = tiny_config(tmp_path, max_steps=6, checkpoint_every_steps=1)

    def poison(step):
        if step == 2:  # the parameters become NaN after the update of step 2: step 3's loss is NaN
            with torch.no_grad():
                for p in model_params:
                    p.fill_(float("nan"))

    model_params = []
    orig_init = Transformer.__init__

    def spy_init(self, cfg_):
        orig_init(self, cfg_)
        model_params.extend(self.parameters())

    Transformer.__init__ = spy_init
    try:
        with pytest.raises(TrainingDiverged, match=r"step 3: the loss is nan.*step_00000002"):
            run(cfg, toy_examples(), VOCAB, on_step=poison, log=quiet)
    finally:
        Transformer.__init__ = orig_init
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000001.pt", "step_00000002.pt"]


def test_accumulation_keeps_tokens_per_update(tmp_path):
    messages = []
    cfg = tiny_config(tmp_path, tokens_per_batch=100, max_tokens_per_device=40, max_steps=1)
    summary = run(cfg, toy_examples(), VOCAB, log=messages.append)
    assert summary.accumulation == 3
    # each pass takes its share of the update (34 real tokens), not the device's padded bound (40)
    assert "1 device(s) x 3 accumulated pass(es) x ~34 real tokens per side = ~102 tokens" in messages[0]
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert 80 <= metrics["tgt_tokens"].iloc[0] <= 102


def test_real_batcher_is_used_by_default(tmp_path):
    cfg = tiny_config(tmp_path, max_steps=1)
    seen = []

    def factory(examples, max_tokens, seed, shards, shard):
        seen.append((max_tokens, seed, shards, shard))
        return TokenBatcher(examples, max_tokens, seed=seed, num_shards=shards, shard=shard)

    run(cfg, toy_examples(), VOCAB, make_batcher=factory, log=quiet)
    assert seen == [(40, 3, 1, 0)]


def test_checkpoints_by_wall_time(tmp_path):
    """Section 6.1's checkpoints every 10 minutes: a fake clock advancing 2 minutes per reading
    makes a checkpoint every few steps, plus the last."""
    clock = iter(range(0, 10**6, 120))  # seconds
    cfg = tiny_config(tmp_path, max_steps=7, checkpoint_every_steps=0, checkpoint_every_minutes=10)
    run(cfg, toy_examples(), VOCAB, log=quiet, clock=lambda: next(clock))
    steps = [int(p.stem.split("_")[1]) for p in list_checkpoints(tmp_path)]
    assert steps[-1] == 7 and 1 < len(steps) < 7
