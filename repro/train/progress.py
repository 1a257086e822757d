"""What a training run shows while it runs: the metrics log (``metrics.csv``, every ``log_every``
updates, the last, and every dev evaluation) and the terminal's progress bar, or a plain line every
:data:`~repro.train.progress_line.EVERY_LOGGED` logged rows when the output is a file."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from repro.train.config import TrainConfig
from repro.train.metrics_log import MetricsLog
from repro.train.progress_line import EVERY_LOGGED, progress_line
from repro.train.update_step import UpdateStats


class Progress:
    """The metrics log (every ``log_every`` updates and the last) and the terminal progress bar."""

    def __init__(self, cfg: TrainConfig, out_dir: Path, step: int, rank: int,
                 clock: Callable[[], float], say: Callable[[str], None] = lambda _: None) -> None:
        self.cfg, self.clock = cfg, clock
        # Without a terminal (a log file), a plain line every EVERY_LOGGED logged steps instead of the bar.
        self.plain = say if rank == 0 and not sys.stderr.isatty() else None
        self.initial_step, self.logged = step, 0
        self.metrics = (MetricsLog(out_dir / "metrics.csv", resume_step=step, tensorboard=cfg.tensorboard)
                        if rank == 0 else None)
        self.bar = tqdm(total=cfg.max_steps, initial=step, disable=rank != 0 or not sys.stderr.isatty(),
                        desc="train", unit="step", dynamic_ncols=True)
        self.start = clock()
        self.window_start, self.window_tokens, self.run_tokens = self.start, 0, 0
        self.first_loss: float | None = None
        self.last_loss: float | None = None   # None until an update runs (a run resumed at its max_steps)

    def training_seconds(self) -> float:
        """Wall seconds since the loop started, less the dev evaluations."""
        return self.clock() - self.start

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` (a dev evaluation) out of the throughput and the logged elapsed time."""
        self.start += seconds
        self.window_start += seconds

    def record(self, stats: UpdateStats, dev: dict[str, float] | None = None, epoch: int | str = "") -> None:
        tokens = stats.src_tokens + stats.tgt_tokens
        self.window_tokens += tokens
        self.run_tokens += tokens
        self.last_loss = stats.loss_per_token
        if self.first_loss is None:
            self.first_loss = stats.loss_per_token
        self.bar.update(1)
        if self.metrics is not None and (stats.step % self.cfg.log_every == 0 or stats.step == self.cfg.max_steps
                                         or dev):
            now = self.clock()
            tps = self.window_tokens / max(now - self.window_start, 1e-9)
            self.metrics.log({"step": stats.step, "loss": round(stats.loss_per_token, 6),
                              "nll": round(stats.nll_per_token, 6), "lr": stats.lr, "tokens_per_s": round(tps, 1),
                              "src_tokens": stats.src_tokens, "tgt_tokens": stats.tgt_tokens,
                              "elapsed_s": round(now - self.start, 2),
                              "epoch": epoch, "padding": round(stats.padding, 4), **(dev or {})})
            self.bar.set_postfix(loss=f"{stats.loss_per_token:.3f}", lr=f"{stats.lr:.2e}", tok_s=f"{tps:.0f}")
            self.logged += 1
            if self.plain is not None and (self.logged % EVERY_LOGGED == 0 or stats.step == self.cfg.max_steps):
                self.plain(progress_line(stats.step, self.cfg.max_steps, tps, stats.loss_per_token, stats.lr,
                                         now - self.start, stats.step - self.initial_step))
            self.window_start, self.window_tokens = now, 0

    def close(self) -> None:
        self.bar.close()
        if self.metrics is not None:
            self.metrics.close()
