"""One update of Section 5: the gradients of ~25000 + 25000 tokens, then Adam at Eq. 3's rate.

The update's micro-batches are spread over the devices (DDP) and accumulated on each; the loss
of the update is the label-smoothed cross-entropy summed over all its target tokens and divided
by their number (over every device), so the gradient is that of the mean loss whatever the
number of devices and passes. :func:`accumulate` forms the gradients (the cluster's gradient
probe calls it alone); :func:`update` adds the learning rate and the optimizer step.

Fit for a GPU: the update's token counts reach the device once (pinned, without blocking), the
loss scale stays a device tensor, and the sums of loss and NLL and a count of non-finite passes
are kept on the device; they are all-reduced over the job's ranks in one collective. A non-finite
loss on any rank so stops every rank at the same update, naming it, with no step taken and no
checkpoint written.

How the host reads those figures (:func:`launch_update`, :class:`InFlight`):

- **synchronously**, once per update, before the optimizer step, where the optimizer cannot skip a
  step by itself (the CPU's Adam) and in a job of several ranks (every rank must stop at the same
  update);
- **one update late** on one GPU with fused Adam: the figures are copied to pinned host memory
  without blocking, the optimizer step is launched at once with the update's non-finite flag as
  its ``found_inf`` (the fused kernel then leaves the weights, moments and step count untouched on
  the device), and the host reads them once the next update is launched. The host never waits on
  the device inside an update, so the device never idles while the host launches the next one
  (issue 42: ~9.5 ms of the base update's 49 ms on an H200).
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


def _accumulate_on_device(objective: torch.nn.Module, micro: Sequence[Batch], device: torch.device, *,
                          world_size: int = 1, precision: Precision | None = None) -> torch.Tensor:
    """Back-propagate the update's passes; (loss sum, NLL sum, non-finite passes, source tokens,
    target tokens) summed over every device, a float64 tensor on ``device``: no host sync."""
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
    return torch.cat([_all_reduce(totals), tokens])


def _checked(figures: Sequence[float], step: int, world_size: int, context: str) -> tuple[float, float, int, int]:
    """(loss sum, NLL sum, source tokens, target tokens), or :class:`TrainingDiverged` naming ``step``."""
    loss_sum, nll_sum, bad, src_tokens, tgt_tokens = figures
    if bad:
        raise TrainingDiverged(
            f"step {step}: the loss is {loss_sum / max(tgt_tokens, 1)} (not finite on {int(bad)} pass(es) over "
            f"{world_size} device(s); "
            f"{int(tgt_tokens)} target tokens{'; ' + context if context else ''}); no update taken and "
            "no checkpoint written for this step")
    return loss_sum, nll_sum, int(src_tokens), int(tgt_tokens)


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
    figures = _accumulate_on_device(objective, micro, device, world_size=world_size, precision=precision)
    return _checked(figures.tolist(), step, world_size, context)   # one sync


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` can leave a step out on the device, given a ``found_inf`` flag there
    (torch's fused Adam: the flag that ``GradScaler`` hands it)."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False) and optimizer.defaults.get("fused"))


class _Readback:
    """The update's figures on their way to the host: on CUDA a copy into pinned memory, launched
    without blocking, and an event after it; elsewhere the device tensor itself."""

    def __init__(self, figures: torch.Tensor) -> None:
        self.event = None
        if figures.device.type == "cuda":
            self.host = torch.empty(figures.shape, dtype=figures.dtype, pin_memory=True)
            self.host.copy_(figures, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.host = figures

    def values(self) -> list[float]:
        if self.event is not None:
            self.event.synchronize()   # waits for this copy only, not for what was launched after it
        return self.host.tolist()


class InFlight:
    """An update whose optimizer step is launched and whose figures the host has not read yet.
    :meth:`result` reads them (once), raising :class:`TrainingDiverged` for a non-finite loss."""

    def __init__(self, step: int, lr: float, padding: float, readback: _Readback, world_size: int,
                 deferred: bool) -> None:
        self.step, self.lr, self.padding, self.world_size = step, lr, padding, world_size
        #: True when the host reads the figures after the optimizer step was launched (skipped on the
        #: device when not finite); False when they were read, and checked, before it
        self.deferred = deferred
        self._readback: _Readback | None = readback
        self._stats: UpdateStats | None = None

    def result(self) -> UpdateStats:
        if self._stats is None:
            assert self._readback is not None
            loss_sum, nll_sum, src, tgt = _checked(self._readback.values(), self.step, self.world_size,
                                                   f"lr {self.lr:.3g}")
            tokens = max(tgt, 1)
            self._stats = UpdateStats(self.step, self.lr, src, tgt, loss_sum / tokens, nll_sum / tokens, self.padding)
            self._readback = None
        return self._stats


class ReadLate:
    """Updates launched back to back, each one's figures read once the next is launched (the training
    loop's order, for the benchmarks that time its updates)."""

    def __init__(self) -> None:
        self._waiting: InFlight | None = None

    def push(self, launched: InFlight) -> UpdateStats | None:
        """The previous update's figures (None for the first), ``launched`` kept for later."""
        previous, self._waiting = self._waiting, launched
        return previous.result() if previous is not None else None

    def drain(self) -> UpdateStats | None:
        """The last update's figures (raises :class:`TrainingDiverged` for a non-finite loss)."""
        previous, self._waiting = self._waiting, None
        return previous.result() if previous is not None else None


def launch_update(objective: torch.nn.Module, optimizer: torch.optim.Optimizer, micro: Sequence[Batch],
                  device: torch.device, *, step: int, d_model: int, warmup_steps: int, lr_scale: float = 1.0,
                  world_size: int = 1, precision: Precision | None = None, defer: bool = True) -> InFlight:
    """Update ``step`` (counted from 1): Eq. 3's rate, the update's gradients, one Adam step, launched.

    With ``defer`` on one process whose optimizer skips on the device (:func:`skips_on_device`), the
    host does not wait for the device: the step is launched with the update's non-finite flag as
    ``found_inf`` and the figures are read by ``result()``. Otherwise they are read and checked
    before the step (one host sync), so a non-finite loss raises here, with no step taken."""
    lr = learning_rate(step, d_model, warmup_steps, lr_scale)
    set_learning_rate(optimizer, lr)
    optimizer.zero_grad(set_to_none=True)
    figures = _accumulate_on_device(objective, micro, device, world_size=world_size, precision=precision)
    deferred = defer and world_size == 1 and skips_on_device(optimizer)
    pending = InFlight(step, lr, padding(micro), _Readback(figures), world_size, deferred)
    if deferred:
        optimizer.found_inf = (figures[2] > 0).float()   # type: ignore[attr-defined]
        try:
            optimizer.step()
        finally:
            del optimizer.found_inf   # type: ignore[attr-defined]
    else:
        pending.result()   # raises before the step on a non-finite loss
        optimizer.step()
    return pending


def update(objective: torch.nn.Module, optimizer: torch.optim.Optimizer, micro: Sequence[Batch],
           device: torch.device, *, step: int, d_model: int, warmup_steps: int, lr_scale: float = 1.0,
           world_size: int = 1, precision: Precision | None = None) -> UpdateStats:
    """Update ``step`` (counted from 1): Eq. 3's rate, the update's gradients, one Adam step; its
    figures read before returning (:func:`launch_update`, then :meth:`InFlight.result`)."""
    return launch_update(objective, optimizer, micro, device, step=step, d_model=d_model, warmup_steps=warmup_steps,
                         lr_scale=lr_scale, world_size=world_size, precision=precision).result()


def padding(micro: Sequence[Batch]) -> float:
    """PAD positions over all positions of these passes (both sides), from their shapes and counts: no sync."""
    positions = sum(b.src.numel() + b.tgt_out.numel() for b in micro)
    return 1.0 - sum(b.src_tokens + b.tgt_tokens for b in micro) / positions if positions else 0.0
