"""Without a terminal, training prints a plain progress line every 10 logged steps and at the last."""

from __future__ import annotations

import io
import random
import re
import sys

from repro.train.config import TrainConfig
from repro.train.loop import run
from repro.train.progress_line import duration, progress_line

VOCAB = 24


def tiny_config(out_dir, **changes) -> TrainConfig:
    base = dict(model_overrides=dict(n_layers=1, d_model=16, d_ff=32, n_heads=2, max_positions=64),
                dataset="multi30k-en-de", vocab_size=VOCAB, tokens_per_batch=40, max_tokens_per_device=40,
                warmup_steps=4, checkpoint_every_minutes=0, out_dir=str(out_dir), device="cpu", log_every=1, seed=3)
    return TrainConfig(**{**base, **changes})


def toy_examples(n=20):
    rng = random.Random(0)
    return [(src, src[::-1]) for src in ([rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 7))] for _ in range(n))]

LINE = re.compile(r"^repro train: step (\d+)/(\d+) \(\d+%\) \| [\d,]+ tokens/s \| loss \d+\.\d{3} \| lr \S+ \| "
                  r"elapsed \S+ \| ETA \S+$")


def test_plain_lines_every_ten_logged_steps_and_the_last(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    messages: list[str] = []
    run(tiny_config(tmp_path, max_steps=25, checkpoint_every_steps=100), toy_examples(), VOCAB, log=messages.append)
    steps = [int(m.group(1)) for m in map(LINE.match, messages) if m]
    assert steps == [10, 20, 25], messages


def test_the_loops_log_carries_them_so_a_quiet_log_stays_quiet(tmp_path, monkeypatch):
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", err)
    run(tiny_config(tmp_path, max_steps=10, checkpoint_every_steps=100), toy_examples(), VOCAB, log=lambda _: None)
    assert "step 10/10" not in err.getvalue()


def test_eta_follows_the_pace():
    line = progress_line(100, 1000, 5310.4, 4.2134, 7e-4, 60.0, 100)
    assert "step 100/1000 (10%)" in line and "5,310 tokens/s" in line and "loss 4.213" in line
    assert "elapsed 1m00s" in line and "ETA 9m00s" in line  # 0.6 s per step, 900 steps to go
    assert duration(3725) == "1h02m" and duration(12) == "12s"
