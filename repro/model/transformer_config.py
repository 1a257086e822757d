"""The model's configuration: one dataclass whose fields are the symbols of Table 3.

Every part of Section 3 that the paper (or Table 3) varies is a field here. Two fields
exist only to express *departures* from the paper, so that variants can be built and the
claims shown to catch them: ``norm_first`` (pre-norm, as in many later implementations)
and ``attention="fused"`` (a fast path that must agree with the reference Eq. 1 path).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from repro.errors import ConfigError
from repro.limits import MAX_POSITIONS, MODEL_PARAMETERS

POSITIONAL_KINDS = ("sinusoidal", "learned")
ATTENTION_IMPLS = ("reference", "fused")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters of the Transformer (defaults: the base model of Table 3).

    Symbols follow the paper: ``n_layers`` is N, ``n_heads`` is h, ``dropout`` is P_drop.
    ``d_k`` and ``d_v`` default to d_model / h (Section 3.2.2) but may be set apart from it,
    as Table 3 rows (A) and (B) do.
    """

    src_vocab_size: int = 37000
    tgt_vocab_size: int = 37000
    n_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    d_k: int | None = None
    d_v: int | None = None
    dropout: float = 0.1
    positional: str = "sinusoidal"
    max_positions: int = 1024         # length of the positional table (longest sequence the model takes)
    share_embeddings: bool = True
    tie_output: bool = True
    norm_first: bool = False
    attention: str = "reference"
    pad_id: int = 0

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"config field '{name}' must be a positive integer, got {value!r}")

        for name in ("src_vocab_size", "tgt_vocab_size", "n_layers", "d_model", "d_ff", "n_heads", "max_positions"):
            positive(name)
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"config field 'd_model' ({self.d_model}) must be divisible by 'n_heads' ({self.n_heads}): "
                "Section 3.2.2 sets d_k = d_v = d_model / h"
            )
        if self.d_k is None:
            object.__setattr__(self, "d_k", self.d_model // self.n_heads)
        if self.d_v is None:
            object.__setattr__(self, "d_v", self.d_model // self.n_heads)
        positive("d_k")
        positive("d_v")
        if self.parameter_estimate() > MODEL_PARAMETERS.hard:  # a typo (d_model=1e9) refused before any allocation
            raise ConfigError(f"config: about {self.parameter_estimate():.3g} parameters (n_layers={self.n_layers}, "
                              f"d_model={self.d_model}, d_ff={self.d_ff}, vocabulary {self.src_vocab_size}); at most "
                              f"{MODEL_PARAMETERS.hard:.0e} ({MODEL_PARAMETERS.why})")
        if self.max_positions > MAX_POSITIONS.hard:
            raise ConfigError(f"config field 'max_positions' must be at most {MAX_POSITIONS.hard} ({MAX_POSITIONS.why}), "
                              f"got {self.max_positions}")
        for name in ("share_embeddings", "tie_output", "norm_first"):
            if not isinstance(getattr(self, name), bool):  # "false" is text, and text is true
                raise ConfigError(f"config field '{name}' must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.pad_id, int) or isinstance(self.pad_id, bool):
            raise ConfigError(f"config field 'pad_id' must be an integer, got {self.pad_id!r}")
        if (not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool)
                or not 0.0 <= self.dropout < 1.0):
            raise ConfigError(f"config field 'dropout' must lie in [0, 1), got {self.dropout!r}")
        if self.positional not in POSITIONAL_KINDS:
            raise ConfigError(f"config field 'positional' must be one of {POSITIONAL_KINDS}, got {self.positional!r}")
        if self.attention not in ATTENTION_IMPLS:
            raise ConfigError(f"config field 'attention' must be one of {ATTENTION_IMPLS}, got {self.attention!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                "config field 'share_embeddings' needs one joint source-target vocabulary (Section 3.4), "
                f"but src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ConfigError(f"config field 'pad_id' ({self.pad_id}) lies outside the vocabulary")

    def parameter_estimate(self) -> int:
        """The number of weights the model will have (biases and norms left out): embeddings and the
        projections of Sections 3.2-3.4, counted from the fields before anything is built."""
        d, h = self.d_model, self.n_heads
        d_k = self.d_k if self.d_k is not None else d // h
        d_v = self.d_v if self.d_v is not None else d // h
        attention = d * h * (2 * d_k + d_v) + h * d_v * d
        ffn = 2 * d * self.d_ff
        embeddings = self.src_vocab_size * d + (0 if self.share_embeddings else self.tgt_vocab_size * d) \
            + (0 if self.tie_output else self.tgt_vocab_size * d)
        positions = 2 * self.max_positions * d if self.positional == "learned" else 0
        return self.n_layers * (3 * attention + 2 * ffn) + embeddings + positions

    def replace(self, **changes: Any) -> "TransformerConfig":
        """A copy with ``changes`` applied (and validated)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        # d_k/d_v follow d_model/h unless given explicitly.
        if ("d_model" in changes or "n_heads" in changes):
            changes.setdefault("d_k", None)
            changes.setdefault("d_v", None)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TransformerConfig":
        """From :meth:`to_dict`'s form; ``max_len``, this field's name before ``max_positions``, is read too."""
        data = dict(data)
        if "max_len" in data and "max_positions" not in data:
            data["max_positions"] = data.pop("max_len")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        return cls(**data)
