"""One update of Section 5: the gradients of ~25000 + 25000 tokens, then Adam at Eq. 3's rate.

The update's micro-batches are spread over the devices (DDP) and accumulated on each; the loss
of the update is the label-smoothed cross-entropy summed over all its target tokens and divided
by their number (over every device), so the gradient is that of the mean loss whatever the
number of devices and passes. :func:`accumulate` forms the gradients (the cluster's gradient
probe calls it alone); :func:`update` adds the learning rate and the optimizer step.

Fit for a GPU: the update's token counts reach the device once (pinned, without blocking), the
loss scale stays a device tensor, and the sums of loss and NLL and a count of non-finite passes
are kept on the device; they are all-reduced over the job's ranks in one collective and read by
the host once per update, before the optimizer step. A non-finite loss on any rank so stops every
rank at the same update, naming it, with no step taken and no checkpoint written.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist

from repro.data.batching import Batch
from repro.errors import ReproError
from repro.model.precision import Precision
from repro.train.schedule import learning_rate, set_learning_rate


class TrainingDiverged(ReproError):
    """The loss became NaN or infinite; the message names the step. No checkpoint is written for it."""

    exit_code = 1


@dataclass(frozen=True)
class UpdateStats:
    """What one update saw: its rate, token counts (over every device) and per-token losses."""

    step: int
    lr: float
    src_tokens: int
    tgt_tokens: int
    loss_per_token: float
    nll_per_token: float
    #: the share of this device's passes that is padding (PAD positions over all positions, both sides)
    padding: float = 0.0


def world() -> tuple[int, int]:
    """(world size, rank) of the current process group; (1, 0) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def _all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` summed over every process of the group, in place (itself without one)."""
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor


def all_reduce_sum(value: float, device: torch.device) -> float:
    """``value`` summed over every process of the group (itself without one)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    return float(_all_reduce(torch.tensor([value], dtype=torch.float64, device=device)).item())


def _on(device: torch.device, values: list[float]) -> torch.Tensor:
    """Host numbers on ``device``: from pinned memory, without blocking, on a GPU."""
    host = torch.tensor(values, dtype=torch.float64)
    if torch.device(device).type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def accumulate(objective: torch.nn.Module, micro: Sequence[Batch], device: torch.device, *,
               step: int, world_size: int = 1, context: str = "",
               precision: Precision | None = None) -> tuple[float, float, int, int]:
    """Back-propagate one update's micro-batches through ``objective`` (a
    :class:`~repro.train.loss.TranslationLoss`, possibly DDP-wrapped); returns this update's
    (loss sum, NLL sum, source tokens, target tokens), each summed over every device.

    DDP averages gradients over devices; scaling each pass by world_size / (the update's target
    tokens) makes the result the gradient of the per-token mean loss of the whole update.
    The forward passes run under ``precision``'s autocast (bf16 mixed precision or none); the
    backward pass follows the forward's dtypes, so the parameters' gradients are fp32.
    Raises :class:`TrainingDiverged` on every rank when any rank's loss is not finite.
    """
    amp = precision.autocast if precision is not None else nullcontext
    tokens = _all_reduce(_on(device, [sum(b.src_tokens for b in micro), sum(b.tgt_tokens for b in micro)]))
    scale = (world_size / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, NLL sum, non-finite passes
    for i, batch in enumerate(micro):
        last = i == len(micro) - 1
        sync = objective.no_sync() if world_size > 1 and not last else nullcontext()  # type: ignore[operator]
        with sync:
            with amp():
                loss, nll, _ = objective(batch.src.to(device, non_blocking=True),
                                         batch.tgt_in.to(device, non_blocking=True),
                                         batch.tgt_out.to(device, non_blocking=True), scale)
            loss.backward()
        totals += torch.stack([loss.detach().double() / scale, nll.detach().to(device).double(),
                               (~torch.isfinite(loss.detach())).double()])
    loss_sum, nll_sum, bad, src_tokens, tgt_tokens = torch.cat([_all_reduce(totals), tokens]).tolist()  # one sync
    if bad:
        raise TrainingDiverged(
            f"step {step}: the loss is {loss_sum / max(tgt_tokens, 1)} (not finite on {int(bad)} pass(es) over "
            f"{world_size} device(s); "
            f"{int(tgt_tokens)} target tokens{'; ' + context if context else ''}); no update taken and "
            "no checkpoint written for this step")
    return loss_sum, nll_sum, int(src_tokens), int(tgt_tokens)


def update(objective: torch.nn.Module, optimizer: torch.optim.Optimizer, micro: Sequence[Batch],
           device: torch.device, *, step: int, d_model: int, warmup_steps: int, lr_scale: float = 1.0,
           world_size: int = 1, precision: Precision | None = None) -> UpdateStats:
    """Update ``step`` (counted from 1): Eq. 3's rate, the update's gradients, one Adam step."""
    lr = learning_rate(step, d_model, warmup_steps, lr_scale)
    set_learning_rate(optimizer, lr)
    optimizer.zero_grad(set_to_none=True)
    loss_sum, nll_sum, src_tokens, tgt_tokens = accumulate(
        objective, micro, device, step=step, world_size=world_size, context=f"lr {lr:.3g}",
        precision=precision)
    optimizer.step()
    tokens = max(tgt_tokens, 1)
    return UpdateStats(step, lr, src_tokens, tgt_tokens, loss_sum / tokens, nll_sum / tokens, padding(micro))


def padding(micro: Sequence[Batch]) -> float:
    """PAD positions over all positions of these passes (both sides), from their shapes and counts: no sync."""
    positions = sum(b.src.numel() + b.tgt_out.numel() for b in micro)
    return 1.0 - sum(b.src_tokens + b.tgt_tokens for b in micro) / positions if positions else 0.0
