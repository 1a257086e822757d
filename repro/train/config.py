"""Training configuration (Sections 5 and 6.1) and named profiles.

``TrainConfig`` is the one object a training run is described by; it is JSON-serialisable
and hashed into every result's provenance. A *profile* is a named ``TrainConfig``:

- ``paper``      the base EN-DE recipe of Sections 5 and 6.1 (100k steps, 25000 tokens, 8 GPUs);
- ``paper-big``  the big EN-DE model (300k steps, P_drop 0.3, average of the last 20 checkpoints);
- ``local``      a small Transformer on Multi30k that trains on a 2-core CPU in minutes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.data.vocab import SPLITS
from repro.errors import ConfigError
from repro.model import TransformerConfig, get_preset


@dataclass
class TrainConfig:
    """Everything a training run needs. Defaults are the paper's base recipe."""

    preset: str = "base"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    dataset: str = "wmt14-en-de"
    data_dir: str | None = None
    train_src: str | None = None
    train_tgt: str | None = None
    dev_src: str | None = None
    dev_tgt: str | None = None
    vocab_size: int = 37000            # Section 5.1: shared source-target BPE of about 37000 tokens
    bpe_split: str = "bytes"           # words BPE may not cross: "bytes" (byte-level regex) or "words" (whitespace)
    tokens_per_batch: int = 25000      # Section 5.1: ~25000 source and ~25000 target tokens per update
    max_tokens_per_device: int = 25000
    max_steps: int = 100_000           # Section 5.2: base model, 100k steps
    warmup_steps: int = 4000           # Section 5.3, Eq. 3
    lr_scale: float = 1.0              # multiplies Eq. 3; the paper: 1
    adam_beta1: float = 0.9            # Section 5.3
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1       # Section 5.4
    max_len: int = 256                 # training pairs longer than this (wordpieces, either side) are filtered
    checkpoint_every_steps: int = 0    # 0: only by wall time
    checkpoint_every_minutes: float = 10.0  # Section 6.1: checkpoints written at 10-minute intervals
    keep_checkpoints: int = 20
    average_last: int = 5              # Section 6.1: base averages the last 5, big the last 20
    seed: int = 1
    out_dir: str = "runs/train"
    device: str = "auto"
    log_every: int = 100
    threads: int = 0                   # torch intra-op threads; 0 leaves torch's default
    tensorboard: bool = False          # also write TensorBoard scalars under OUT_DIR/tensorboard (optional dep)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "tokens_per_batch", "max_tokens_per_device", "max_steps",
                     "warmup_steps", "max_len", "keep_checkpoints", "average_last", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"training config field '{name}' must be a positive integer, got {value!r}")
        if self.bpe_split not in SPLITS:
            raise ConfigError(f"training config field 'bpe_split' must be one of {', '.join(SPLITS)}, "
                              f"got {self.bpe_split!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"training config field 'label_smoothing' must lie in [0, 1), got {self.label_smoothing!r}")
        if self.checkpoint_every_steps < 0 or self.checkpoint_every_minutes < 0:
            raise ConfigError("training config fields 'checkpoint_every_steps'/'checkpoint_every_minutes' must be >= 0")
        if self.device not in ("cpu", "cuda", "auto") and not self.device.startswith("cuda:"):
            raise ConfigError(f"training config field 'device' must be cpu, cuda or auto, got {self.device!r}")
        if self.keep_checkpoints < self.average_last:
            raise ConfigError(
                f"training config keeps {self.keep_checkpoints} checkpoints but averages the last {self.average_last}"
            )

    def model_config(self, vocab_size: int) -> TransformerConfig:
        """The preset's model with the overrides applied and the vocabulary actually built."""
        overrides = {**self.model_overrides, "src_vocab_size": vocab_size, "tgt_vocab_size": vocab_size}
        return get_preset(self.preset).model.replace(**overrides)

    def replace(self, **changes: Any) -> "TrainConfig":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown training config field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<config>") -> "TrainConfig":
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: a training config must be a JSON object")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"{source}: unknown training config field(s): {', '.join(sorted(unknown))}")
        try:
            return cls(**data)
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from None

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainConfig":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise ConfigError(f"{path}: cannot read training config ({err.strerror})") from None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        return cls.from_dict(data, source=str(path))


#: The local profile: d_model 256, 3 layers, d_ff 1024, 4 heads, one 8k BPE, on Multi30k.
LOCAL_MODEL = {"n_layers": 3, "d_model": 256, "d_ff": 1024, "n_heads": 4, "attention": "fused"}

PROFILES: dict[str, TrainConfig] = {
    "paper": TrainConfig(),
    "paper-big": TrainConfig(preset="big", max_steps=300_000, average_last=20, keep_checkpoints=20),
    "local": TrainConfig(
        preset="base",
        model_overrides=dict(LOCAL_MODEL),
        dataset="multi30k-en-de",
        vocab_size=8000,
        tokens_per_batch=2500,
        max_tokens_per_device=2500,
        max_steps=1000,
        warmup_steps=300,
        lr_scale=0.5,              # Eq. 3 peaks at 1.8e-3 after the short warm-up of a short run
        max_len=100,
        checkpoint_every_steps=80,
        checkpoint_every_minutes=10.0,
        keep_checkpoints=5,
        average_last=5,
        out_dir="runs/local",
        device="cpu",
        log_every=10,
    ),
}


def get_profile(name: str) -> TrainConfig:
    try:
        return dataclasses.replace(PROFILES[name], model_overrides=dict(PROFILES[name].model_overrides))
    except KeyError:
        raise ConfigError(f"unknown training profile '{name}'; known profiles: {', '.join(PROFILES)}") from None
