"""The size of one update, whatever the number of GPUs (Section 5.1).

"Each training batch contained a set of sentence pairs containing approximately 25000 source
tokens and 25000 target tokens." The paper spread that batch over 8 GPUs. On W devices that
each fit ``max_tokens_per_device`` tokens in one forward pass, gradients are accumulated over

    accumulation = ceil(tokens_per_batch / (W * max_tokens_per_device))

micro-batches, so that one update still sees ~tokens_per_batch tokens per side. Each pass holds
at most ``tokens_per_micro_batch`` real tokens per side (the paper counts real tokens, not
padding; source and target taken together) and, padded, at most ``max_tokens_per_device`` (the
device's memory): the batcher of
every pass is built with both bounds (:func:`repro.train.loop.batcher_for`), so an update holds the
paper's batch on 8 P100s, on 8 H100s that could hold more per pass, and on one GPU that accumulates.
The training loop runs this plan; cluster jobs check it before training and log it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from repro.errors import ConfigError


@dataclass(frozen=True)
class UpdatePlan:
    tokens_per_batch: int
    world_size: int
    max_tokens_per_device: int
    accumulation: int

    @property
    def micro_batches(self) -> int:
        """Forward/backward passes per update, over all devices."""
        return self.world_size * self.accumulation

    @property
    def tokens_per_micro_batch(self) -> int:
        """Tokens per side one device processes in one pass."""
        return math.ceil(self.tokens_per_batch / self.micro_batches)

    @property
    def tokens_per_update(self) -> int:
        """Tokens per side one update sees (the batch rounded up to whole micro-batches)."""
        return self.micro_batches * self.tokens_per_micro_batch

    def check(self) -> None:
        """The invariant: the update holds the batch, each pass fits a device, and no pass is wasted."""
        if self.tokens_per_micro_batch > self.max_tokens_per_device:
            raise ConfigError(
                f"update plan: {self.tokens_per_micro_batch} tokens per pass exceed max_tokens_per_device "
                f"({self.max_tokens_per_device})"
            )
        if self.tokens_per_update < self.tokens_per_batch:
            raise ConfigError(f"update plan: an update sees {self.tokens_per_update} < {self.tokens_per_batch} tokens")
        if self.tokens_per_update - self.tokens_per_batch >= self.micro_batches:
            raise ConfigError(
                f"update plan: an update sees {self.tokens_per_update} tokens, more than rounding "
                f"{self.tokens_per_batch} up to {self.micro_batches} passes allows"
            )
        if self.accumulation > 1 and self.world_size * (self.accumulation - 1) * self.max_tokens_per_device >= \
                self.tokens_per_batch:
            raise ConfigError(f"update plan: accumulation {self.accumulation} is more than needed")

    def describe(self) -> str:
        return (
            f"one update = {self.world_size} device(s) x {self.accumulation} accumulated pass(es) x "
            f"~{self.tokens_per_micro_batch} real tokens per side = ~{self.tokens_per_update} tokens per side "
            f"(Section 5.1: ~{self.tokens_per_batch}; a pass padded to at most {self.max_tokens_per_device})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens_per_micro_batch": self.tokens_per_micro_batch,
                "tokens_per_update": self.tokens_per_update}


def plan_update(tokens_per_batch: int, world_size: int, max_tokens_per_device: int) -> UpdatePlan:
    """The smallest accumulation that lets ``world_size`` devices see ``tokens_per_batch`` per update."""
    for name, value in (("tokens_per_batch", tokens_per_batch), ("world_size", world_size),
                        ("max_tokens_per_device", max_tokens_per_device)):
        if not isinstance(value, int) or value <= 0:
            raise ConfigError(f"update plan: '{name}' must be a positive integer, got {value!r}")
    accumulation = math.ceil(tokens_per_batch / (world_size * max_tokens_per_device))
    plan = UpdatePlan(tokens_per_batch, world_size, max_tokens_per_device, accumulation)
    plan.check()
    return plan
