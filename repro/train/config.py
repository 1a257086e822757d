"""Training configuration (Sections 5 and 6.1).

``TrainConfig`` describes a training run; it is JSON-serialisable, written into every checkpoint
and hashed into every result's provenance. Its model is a preset of :mod:`repro.model.presets`
(the architecture) with ``model_overrides``. The named recipes (the paper's, the local ones)
live in :mod:`repro.recipes`; this class's defaults are the base recipe of Sections 5 and 6.1.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.files import reader
from repro.data.vocab import SPLITS
from repro.errors import ConfigError
from repro.limits import LR_SCALE, SEED, THREADS, TOKENS
from repro.model import TransformerConfig, get_preset
from repro.model.precision import PRECISIONS
from repro.runtime import check_device_name
from repro.train.schedule import PAPER_WARMUP_STEPS


_TEXT_FIELDS = ("preset", "dataset", "bpe_split", "out_dir", "device", "precision", "compile", "batching")
#: ``compile``: torch.compile the training objective (model and loss): ``auto`` compiles on CUDA for runs
#: of at least repro.train.compiled.COMPILE_MIN_UPDATES updates (compiling costs minutes; a short run never earns it back).
COMPILE_MODES = ("auto", "on", "off")
#: ``batching``: how training passes are cut (Section 5.1, "by approximate sequence length"): ``sorted``
#: sorts each epoch by length and cuts it (repro.data.batching); ``buckets`` fills two-sided length buckets
#: from the endless shuffled stream, as tensor2tensor does (repro.data.buckets), ``bucket_step`` apart.
BATCHINGS = ("sorted", "buckets")
#: The fields that name where the data is (a folder, or a split's files).
DATA_PATH_FIELDS = ("data_dir", "train_src", "train_tgt", "dev_src", "dev_tgt")
_OPTIONAL_TEXT_FIELDS = DATA_PATH_FIELDS
_INT_FIELDS = ("vocab_size", "tokens_per_batch", "max_tokens_per_device", "max_steps", "warmup_steps", "max_len",
               "checkpoint_every_steps", "keep_checkpoints", "average_last", "seed", "log_every", "threads")
_FLOAT_FIELDS = ("lr_scale", "adam_beta1", "adam_beta2", "adam_eps", "label_smoothing", "checkpoint_every_minutes",
                 "bucket_step")
#: Fields that say where and how a job computes, not what it trains (a cluster profile, the command
#: line and the machine choose them).
PLACEMENT_FIELDS = ("out_dir", "data_dir", "device", "precision", "threads", "compile", "log_every", "tensorboard",
                    "max_tokens_per_device")
#: Fields that say neither what is trained nor how it is scored: the seed (the paper states none; seeds
#: of one recipe are runs of one experiment), how many checkpoints stay on disk, and the decoding batch.
BOOKKEEPING_FIELDS = ("seed", "keep_checkpoints")


@dataclass(frozen=True)
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
    warmup_steps: int = PAPER_WARMUP_STEPS  # Section 5.3, Eq. 3
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
    precision: str = "auto"            # auto, fp32 or bf16 (mixed; repro.model.precision); master weights stay fp32
    compile: str = "auto"              # torch.compile the objective: auto (on CUDA, runs of >= 5000 updates), on, off
    batching: str = "sorted"           # sorted (each epoch by length) or buckets (tensor2tensor's length buckets)
    bucket_step: float = 1.1           # buckets: ratio of two length ranges' bounds (tensor2tensor's default)

    def __post_init__(self) -> None:
        self._check_types()
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
        try:
            check_device_name(self.device)
        except ConfigError as err:
            raise ConfigError(f"training config field 'device': {err}") from None
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"training config field '{name}' must lie in [0, 1) (Section 5.3), "
                                  f"got {getattr(self, name)!r}")
        for name in ("lr_scale", "adam_eps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"training config field '{name}' must be positive, got {getattr(self, name)!r}")
        for name in ("seed", "threads"):
            if getattr(self, name) < 0:
                raise ConfigError(f"training config field '{name}' must be >= 0, got {getattr(self, name)!r}")
        if self.threads > THREADS.hard:
            raise ConfigError(f"training config field 'threads' must be at most {THREADS.hard} ({THREADS.why}), "
                              f"got {self.threads}")
        for name, limit in (("tokens_per_batch", TOKENS), ("max_tokens_per_device", TOKENS), ("lr_scale", LR_SCALE)):
            if getattr(self, name) > limit.hard:
                raise ConfigError(f"training config field '{name}' must be at most {limit.hard} ({limit.why}), "
                                  f"got {getattr(self, name)!r}")
        if self.seed > SEED.hard:
            raise ConfigError(f"training config field 'seed' must be at most {SEED.hard} ({SEED.why}), got {self.seed}")
        if not self.out_dir.strip():
            raise ConfigError("training config field 'out_dir' must not be empty")
        if self.compile not in COMPILE_MODES:
            raise ConfigError(f"training config field 'compile' must be one of {', '.join(COMPILE_MODES)}, "
                              f"got {self.compile!r}")
        if self.batching not in BATCHINGS:
            raise ConfigError(f"training config field 'batching' must be one of {', '.join(BATCHINGS)}, "
                              f"got {self.batching!r}")
        if not 1.0 < self.bucket_step <= 4.0:
            raise ConfigError(f"training config field 'bucket_step' must lie in (1, 4], got {self.bucket_step!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"training config field 'precision' must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.precision!r}")
        if self.keep_checkpoints < self.average_last:
            raise ConfigError(
                f"training config keeps {self.keep_checkpoints} checkpoints but averages the last {self.average_last}"
            )

    def _check_types(self) -> None:
        """Each field has its declared type (a JSON config or ``--set`` cannot smuggle in text for a number);
        a path given as ``os.PathLike`` is kept as text, so the config stays JSON."""
        for name in _TEXT_FIELDS + _OPTIONAL_TEXT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
            elif not isinstance(value, str) and not (value is None and name in _OPTIONAL_TEXT_FIELDS):
                raise ConfigError(f"training config field '{name}' must be text, got {value!r}")
            elif isinstance(value, str) and not value.strip():  # "" would mean the working directory, silently
                raise ConfigError(f"training config field '{name}' must not be empty"
                                  + (" (leave it out for the default)" if name in _OPTIONAL_TEXT_FIELDS else ""))
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"training config field '{name}' must be an integer, got {value!r}")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ConfigError(f"training config field '{name}' must be a finite number, got {value!r}")
        if not isinstance(self.tensorboard, bool):
            raise ConfigError(f"training config field 'tensorboard' must be true or false, got {self.tensorboard!r}")
        if not isinstance(self.model_overrides, dict):
            raise ConfigError("training config field 'model_overrides' must be a JSON object of TransformerConfig "
                              f"fields, got {self.model_overrides!r}")

    def model_config(self, vocab_size: int | None = None) -> TransformerConfig:
        """The preset's model with the overrides applied and, when given, the vocabulary actually built."""
        overrides = dict(self.model_overrides)
        if vocab_size is not None:
            overrides.update(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)
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
            cfg = cls(**data)
            cfg.model_config()  # the preset with the overrides: a bad override is refused here, by name
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None
        return cfg

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainConfig":
        return cls.from_dict(read_json_config(path), source=str(path))


def recipe_identity(train: dict[str, Any], decode: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run trains and how its outputs are searched: the training config without
    :data:`PLACEMENT_FIELDS` and :data:`BOOKKEEPING_FIELDS`, and the decoding settings without their
    batch size. Two runs with one identity are runs of one recipe, wherever and with whatever seed they
    ran; its hash (``repro.results.provenance.config_hash``) is the ``config_hash`` every job's results
    record, compared with a paper experiment's before a result counts for its claim."""
    left_out = (*PLACEMENT_FIELDS, *BOOKKEEPING_FIELDS)
    return {"train": {k: v for k, v in sorted(train.items()) if k not in left_out},
            "decode": {k: v for k, v in sorted((decode or {}).items()) if k != "max_tokens"}}


def read_json_config(path: str | Path) -> dict[str, Any]:
    """A JSON object from ``path``, read strictly (:mod:`repro.files.strict_json`: a key given twice, NaN and
    Infinity are refused); a missing file or bad JSON is a ConfigError naming file and line."""
    path = Path(path)
    data = reader.read_json(path, "training config", error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a training config must be a JSON object")
    return data
