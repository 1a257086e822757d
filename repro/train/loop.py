"""The training loop of Section 5: Adam, the schedule of Eq. 3, label smoothing, checkpoints.

One update sees about ``tokens_per_batch`` source and target tokens (Section 5.1: 25000),
whatever the number of devices: each device takes batches of ``max_tokens_per_device``
tokens and accumulates ``ceil(tokens_per_batch / (world_size * max_tokens_per_device))`` of
them before the update. The loss of an update is the label-smoothed cross-entropy summed
over its target tokens and divided by their number (over all devices).

Exact resume: every checkpoint holds the model, Adam's state, the step, the RNG states and
the batcher's position, and training restarts from the newest checkpoint in ``out_dir``; an
interrupted and resumed run ends with the same parameters as an uninterrupted one (CPU).
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from tqdm import tqdm

from repro.errors import CheckpointError, ReproError
from repro.model import Transformer, TransformerConfig
from repro.train.checkpoint import (
    checkpoint_path, list_checkpoints, load_checkpoint, prune_checkpoints, save_checkpoint,
)
from repro.train.config import TrainConfig
from repro.train.loss import TranslationLoss
from repro.train.metrics import MetricsLog
from repro.train.optimizer import build_optimizer
from repro.train.schedule import learning_rate, set_learning_rate


class TrainingDiverged(ReproError):
    """The loss became NaN or infinite; the message names the step. No checkpoint is written for it."""

    exit_code = 1


class Batcher(Protocol):
    def __iter__(self): ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


#: make_batcher(examples, max_tokens, seed, num_shards, shard) -> Batcher
BatcherFactory = Callable[[list, int, int, int, int], Batcher]


@dataclass
class TrainSummary:
    steps: int
    final_loss: float
    out_dir: Path
    checkpoints: list[Path]
    tokens_per_s: float
    resumed_from: int = 0
    accumulation: int = 1
    world_size: int = 1
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (paths as strings), for result records and cluster jobs."""
        return {"steps": self.steps, "final_loss": self.final_loss, "out_dir": str(self.out_dir),
                "checkpoints": [str(p) for p in self.checkpoints], "tokens_per_s": self.tokens_per_s,
                "resumed_from": self.resumed_from, "accumulation": self.accumulation,
                "world_size": self.world_size, "elapsed_s": self.elapsed_s, **self.extra}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _default_batcher(examples: list, max_tokens: int, seed: int, num_shards: int, shard: int) -> Batcher:
    from repro.data.batching import TokenBatcher

    return TokenBatcher(examples, max_tokens, shuffle=True, seed=seed, num_shards=num_shards, shard=shard)


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def _all_reduce_sum(value: float, device: torch.device) -> float:
    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


def train(cfg: TrainConfig, **kwargs: Any) -> TrainSummary:
    """Train on ``cfg.dataset`` (BPE built or reloaded under ``cfg.out_dir``), resuming when possible."""
    from repro.train.data import prepare_training_data

    data = prepare_training_data(cfg)
    summary = run(cfg, data.examples, len(data.vocab), **kwargs)
    summary.extra.update(filtered=data.filtered, train_pairs=len(data.examples), vocab_size=len(data.vocab))
    return summary


def run(
    cfg: TrainConfig,
    examples: list[tuple[list[int], list[int]]],
    vocab_size: int,
    *,
    make_batcher: BatcherFactory | None = None,
    on_step: Callable[[int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainSummary:
    """The loop itself, on already encoded ``examples``; ``on_step(step)`` is called after each update."""
    say = log or (lambda msg: print(msg, file=sys.stderr))
    out_dir = Path(cfg.out_dir)
    world_size, rank = _world()
    device = resolve_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    accum = math.ceil(cfg.tokens_per_batch / (world_size * cfg.max_tokens_per_device))
    say(f"repro train: {world_size} device(s) x {accum} accumulation step(s) x {cfg.max_tokens_per_device} tokens "
        f"= {world_size * accum * cfg.max_tokens_per_device} tokens per side per update "
        f"(asked: {cfg.tokens_per_batch}; Section 5.1)")

    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model_cfg = cfg.model_config(vocab_size)
    model = Transformer(model_cfg).to(device)
    objective: torch.nn.Module = TranslationLoss(model, cfg.label_smoothing)
    if world_size > 1:
        objective = torch.nn.parallel.DistributedDataParallel(objective)
    optimizer = build_optimizer(model, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
    batcher = (make_batcher or _default_batcher)(examples, cfg.max_tokens_per_device, cfg.seed, world_size, rank)

    step = 0
    existing = list_checkpoints(out_dir)
    if existing:
        step = _restore(existing[-1], model, optimizer, batcher, model_cfg, rank)
        say(f"repro train: resumed from {existing[-1]} (step {step})")
    resumed_from = step
    metrics = MetricsLog(out_dir / "metrics.csv", resume_step=step, tensorboard=cfg.tensorboard) if rank == 0 else None

    model.train()
    batches = iter(batcher)
    written: list[Path] = []
    last_ckpt_time = time.monotonic()
    start = time.monotonic()
    window_start, window_tokens, run_tokens = start, 0, 0
    loss_per_token = float("nan")
    bar = tqdm(total=cfg.max_steps, initial=step, disable=rank != 0 or not sys.stderr.isatty(),
               desc="train", unit="step", dynamic_ncols=True)
    try:
        while step < cfg.max_steps:
            micro = [next(batches) for _ in range(accum)]
            tgt_tokens = _all_reduce_sum(sum(b.tgt_tokens for b in micro), device)
            src_tokens = _all_reduce_sum(sum(b.src_tokens for b in micro), device)
            step += 1
            lr = learning_rate(step, model_cfg.d_model, cfg.warmup_steps, cfg.lr_scale)
            set_learning_rate(optimizer, lr)
            optimizer.zero_grad(set_to_none=True)
            # DDP averages gradients over devices; scaling by world_size / tokens makes it a per-token mean.
            scale = world_size / max(tgt_tokens, 1.0)
            loss_sum = nll_sum = 0.0
            for i, batch in enumerate(micro):
                sync = objective.no_sync() if world_size > 1 and i < accum - 1 else nullcontext()  # type: ignore[operator]
                with sync:
                    loss, nll, _ = objective(batch.src.to(device), batch.tgt_in.to(device), batch.tgt_out.to(device), scale)
                    if not torch.isfinite(loss):
                        raise TrainingDiverged(
                            f"step {step}: the loss is {loss.item()} (lr {lr:.3g}, batch of {batch.tgt_tokens} target "
                            f"tokens); no checkpoint written for this step; the last one is "
                            f"{(list_checkpoints(out_dir) or ['none'])[-1]}"
                        )
                    loss.backward()
                loss_sum += float(loss.detach()) / scale / world_size
                nll_sum += float(nll)
            optimizer.step()
            loss_per_token = _all_reduce_sum(loss_sum, device) / max(tgt_tokens, 1.0)
            nll_per_token = _all_reduce_sum(nll_sum, device) / max(tgt_tokens, 1.0)  # every rank joins the reduce
            window_tokens += int(src_tokens + tgt_tokens)
            run_tokens += int(src_tokens + tgt_tokens)
            bar.update(1)
            if metrics is not None and (step % cfg.log_every == 0 or step == cfg.max_steps):
                now = time.monotonic()
                tps = window_tokens / max(now - window_start, 1e-9)
                metrics.log({"step": step, "loss": round(loss_per_token, 6),
                             "nll": round(nll_per_token, 6),
                             "lr": lr, "tokens_per_s": round(tps, 1), "src_tokens": int(src_tokens),
                             "tgt_tokens": int(tgt_tokens), "elapsed_s": round(now - start, 2),
                             "epoch": batcher.state_dict().get("epoch", "")})
                bar.set_postfix(loss=f"{loss_per_token:.3f}", lr=f"{lr:.2e}", tok_s=f"{tps:.0f}")
                window_start, window_tokens = now, 0
            due = (cfg.checkpoint_every_steps and step % cfg.checkpoint_every_steps == 0) or (
                cfg.checkpoint_every_minutes and time.monotonic() - last_ckpt_time >= 60 * cfg.checkpoint_every_minutes
            ) or step == cfg.max_steps
            if due and rank == 0:
                written.append(_save(out_dir, step, model, optimizer, batcher, model_cfg, cfg))
                prune_checkpoints(out_dir, cfg.keep_checkpoints)
                last_ckpt_time = time.monotonic()
            if on_step is not None:
                on_step(step)
    finally:
        bar.close()
        if metrics is not None:
            metrics.close()
    elapsed = time.monotonic() - start
    return TrainSummary(
        steps=step, final_loss=loss_per_token, out_dir=out_dir,
        checkpoints=[p for p in written if p.exists()], tokens_per_s=run_tokens / max(elapsed, 1e-9),
        resumed_from=resumed_from, accumulation=accum, world_size=world_size, elapsed_s=elapsed,
    )


def _save(out_dir: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
          batcher: Batcher, model_cfg: TransformerConfig, cfg: TrainConfig) -> Path:
    return save_checkpoint(checkpoint_path(out_dir, step), {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "model_config": model_cfg.to_dict(),
        "train_config": cfg.to_dict(),
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        "data": batcher.state_dict(),
    })


def _restore(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, batcher: Batcher,
             model_cfg: TransformerConfig, rank: int) -> int:
    state = load_checkpoint(path)
    if state["model_config"] != model_cfg.to_dict():
        diff = sorted(k for k in model_cfg.to_dict() if state["model_config"].get(k) != model_cfg.to_dict()[k])
        raise CheckpointError(f"{path}: written for another model (fields {', '.join(diff)} differ); "
                              "use another out_dir or the same configuration")
    for key in ("optimizer", "rng", "data", "step"):
        if key not in state:
            raise CheckpointError(f"{path}: not a training checkpoint (no '{key}'); cannot resume from it")
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: does not fit this model/optimizer ({str(err).splitlines()[0][:200]})") from None
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(_as_random_state(state["rng"]["python"]))
    if torch.cuda.is_available() and state["rng"].get("cuda"):
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    batcher.load_state_dict(state["data"])
    return int(state["step"])


def _as_random_state(value: Iterable) -> tuple:
    version, internal, gauss = value
    return (version, tuple(internal), gauss)
