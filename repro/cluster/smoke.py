"""A tiny but real training run for the ``smoke`` experiment and the cluster tests.

It trains :class:`repro.model.Transformer` with Adam (Section 5.3's betas and epsilon) on one
fixed synthetic batch (copy the source reversed), with the same distributed mechanics a real run
has: the global batch is split over ``world_size`` ranks and ``accumulation`` passes per rank
(:mod:`repro.cluster.update`), DDP averages the gradients, checkpoints are written atomically
under ``out_dir/checkpoints/step_{step:08d}.pt`` and a requeued job resumes from the newest.

This stands in for ``repro.train.loop.train`` only when a job's dataset is ``"synthetic"``.
"""

from __future__ import annotations

import contextlib
import csv
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from repro.cluster.update import UpdatePlan, plan_update
from repro.data.vocab import BOS, EOS, UNK
from repro.errors import CheckpointError, ConfigError
from repro.model import Transformer, TransformerConfig

SYNTHETIC = "synthetic"
FIRST_WORD = UNK + 1  # the first id after the special ones

#: A model small enough to train in seconds on one CPU core.
SMOKE_MODEL = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2, "dropout": 0.0}


@dataclass
class SmokeSummary:
    steps: int
    first_loss: float | None
    final_loss: float
    out_dir: str
    checkpoints: list[str]
    tokens_per_s: float
    world_size: int
    accumulation: int
    tokens_per_update: int
    resumed_from: int | None = None
    losses: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def synthetic_batch(sentences: int, length: int, vocab: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Fixed ``(src, tgt_in, tgt_out)`` padded with PAD=0: target = source reversed.

    Lengths vary between length/2 and length, so ranks see different token counts and a
    gradient normalised per rank instead of per global batch would differ (tests rely on it).
    tgt_in = BOS + y, tgt_out = y + EOS.
    """
    gen = torch.Generator().manual_seed(seed)
    src = torch.zeros(sentences, length, dtype=torch.long)
    tgt_in = torch.zeros(sentences, length + 1, dtype=torch.long)
    tgt_out = torch.zeros(sentences, length + 1, dtype=torch.long)
    for i in range(sentences):
        n = int(torch.randint(max(1, length // 2), length + 1, (1,), generator=gen))
        x = torch.randint(FIRST_WORD, vocab, (n,), generator=gen)
        y = x.flip(0)
        src[i, :n] = x
        tgt_in[i, 0], tgt_in[i, 1:n + 1] = BOS, y
        tgt_out[i, :n], tgt_out[i, n] = y, EOS
    return src, tgt_in, tgt_out


def build_model(train: dict[str, Any], vocab: int) -> Transformer:
    overrides = {**SMOKE_MODEL, **train.get("model_overrides", {}),
                 "src_vocab_size": vocab, "tgt_vocab_size": vocab}
    torch.manual_seed(int(train.get("seed", 1)))
    return Transformer(TransformerConfig().replace(**overrides))


def rank_micro_batches(n: int, plan: UpdatePlan, rank: int) -> list[slice]:
    """The sentence slices rank ``rank`` processes: the batch cut into world x accumulation parts."""
    parts = plan.micro_batches
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [slice(bounds[j], bounds[j + 1]) for j in range(rank * plan.accumulation, (rank + 1) * plan.accumulation)]


def accumulate_gradients(model: torch.nn.Module, batch: tuple[torch.Tensor, ...], plan: UpdatePlan, rank: int,
                         label_smoothing: float = 0.0) -> float:
    """One update's gradients on this rank; returns the global mean token loss.

    Each pass's summed loss is divided by the *global* target token count and multiplied by the
    world size, because DDP averages gradients over ranks: the result is the gradient of the mean
    loss over the whole batch, whatever the world size and accumulation.
    """
    src, tgt_in, tgt_out = batch
    total_tokens = int((tgt_out != 0).sum())
    local_sum = 0.0
    slices = rank_micro_batches(src.size(0), plan, rank)
    for k, part in enumerate(slices):
        sync = k == len(slices) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():
            logits = model(src[part], tgt_in[part])
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out[part].flatten(), ignore_index=0,
                                   label_smoothing=label_smoothing, reduction="sum")
            (loss / total_tokens * plan.world_size).backward()
        local_sum += float(loss.detach())
    if plan.world_size > 1:
        value = torch.tensor([local_sum], dtype=torch.float64)
        dist.all_reduce(value)
        local_sum = float(value)
    return local_sum / total_tokens


def distributed_gradients(train: dict[str, Any], synthetic: dict[str, Any]) -> dict[str, Any]:
    """One update's gradients from a fresh model, under the current process group if any.

    With DDP the gradients after the update's last pass are the all-reduced ones; they must
    equal one process's gradients on the same global batch (any world size, any accumulation).
    """
    rank, world = _world()
    vocab = int(train.get("vocab_size", 32))
    plan = plan_update(int(train["tokens_per_batch"]), world, int(train["max_tokens_per_device"]))
    batch = synthetic_batch(int(synthetic["sentences"]), int(synthetic["length"]), vocab, int(train.get("seed", 1)))
    model = build_model(train, vocab)
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    loss = accumulate_gradients(net, batch, plan, rank, float(train.get("label_smoothing", 0.0)))
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return {"rank": rank, "world_size": world, "accumulation": plan.accumulation, "loss": loss, "grads": grads}


def gloo_gradient_worker(rank: int, world: int, init_file: str, train: dict[str, Any],
                         synthetic: dict[str, Any], out_dir: str) -> None:
    """A ``torch.multiprocessing`` worker: join a gloo group, save this rank's gradients."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.save(distributed_gradients(train, synthetic), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def checkpoint_path(out_dir: Path, step: int) -> Path:
    return out_dir / "checkpoints" / f"step_{step:08d}.pt"


def newest_checkpoint(out_dir: Path) -> Path | None:
    found = sorted((out_dir / "checkpoints").glob("step_*.pt"))
    return found[-1] if found else None


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write to a temp file beside ``path`` and rename, so a preempted save leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated or foreign file
        raise CheckpointError(f"{path}: not a readable checkpoint ({err})") from None


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def train_synthetic(train: dict[str, Any], synthetic: dict[str, Any]) -> SmokeSummary:
    """Train on the fixed synthetic batch for ``train['max_steps']`` updates, resuming if possible."""
    rank, world = _world()
    out_dir = Path(train["out_dir"])
    sentences, length = int(synthetic["sentences"]), int(synthetic["length"])
    vocab = int(train.get("vocab_size", 32))
    plan = plan_update(int(train["tokens_per_batch"]), world, int(train["max_tokens_per_device"]))
    if plan.tokens_per_batch != sentences * length:
        raise ConfigError(f"{out_dir}: synthetic batch holds {sentences * length} tokens, "
                              f"tokens_per_batch is {plan.tokens_per_batch}")
    batch = synthetic_batch(sentences, length, vocab, int(train.get("seed", 1)))
    model = build_model(train, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=float(synthetic.get("lr", 3e-3)), betas=(0.9, 0.98), eps=1e-9)
    start, resumed = 0, None
    newest = newest_checkpoint(out_dir)
    if newest is not None:
        state = load_checkpoint(newest)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start = resumed = int(state["step"])
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model

    every = int(train.get("checkpoint_every_steps") or 0)
    sleep_s = float(synthetic.get("step_sleep_s", 0.0))
    smoothing = float(train.get("label_smoothing", 0.0))
    losses: list[float] = []
    first_loss = None
    began = time.perf_counter()
    for step in range(start + 1, int(train["max_steps"]) + 1):
        optimizer.zero_grad(set_to_none=True)
        loss = accumulate_gradients(net, batch, plan, rank, smoothing)
        optimizer.step()
        losses.append(loss)
        first_loss = loss if first_loss is None else first_loss
        if rank == 0:
            _log_metrics(out_dir, step, loss)
            if (every and step % every == 0) or step == int(train["max_steps"]):
                save_checkpoint(checkpoint_path(out_dir, step), {
                    "step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "rng": torch.get_rng_state(),
                })
                _prune(out_dir, int(train.get("keep_checkpoints") or 0))
        if world > 1:
            dist.barrier()
        if sleep_s:
            time.sleep(sleep_s)
    elapsed = max(time.perf_counter() - began, 1e-9)
    done = len(losses)
    return SmokeSummary(
        steps=int(train["max_steps"]), first_loss=first_loss,
        final_loss=losses[-1] if losses else float("nan"), out_dir=str(out_dir),
        checkpoints=[str(p) for p in sorted((out_dir / "checkpoints").glob("step_*.pt"))],
        tokens_per_s=done * plan.tokens_per_update / elapsed, world_size=world,
        accumulation=plan.accumulation, tokens_per_update=plan.tokens_per_update, resumed_from=resumed,
        losses=losses,
    )


def _prune(out_dir: Path, keep: int) -> None:
    """Keep the newest ``keep`` checkpoints (0: all)."""
    if keep > 0:
        for old in sorted((out_dir / "checkpoints").glob("step_*.pt"))[:-keep]:
            old.unlink(missing_ok=True)


def _log_metrics(out_dir: Path, step: int, loss: float) -> None:
    path = out_dir / "metrics.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(["step", "loss"])
        writer.writerow([step, f"{loss:.6f}"])
