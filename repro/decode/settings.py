"""How a trained model's outputs are searched: Section 6.1 (translation) and 6.3 (parsing).

Section 6.1: "We used beam search with a beam size of 4 and length penalty α = 0.6. [...] We set
the maximum output length during inference to input length + 50, but terminate early when
possible." Section 6.3: "we increased the maximum output length to input length + 300. We used
a beam size of 21 and α = 0.3 for both WSJ only and the semi-supervised setting."
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from repro.errors import ConfigError
from repro.limits import ALPHA, BEAM, MAX_LEN_OFFSET


@dataclass(frozen=True)
class DecodeSettings:
    """Beam size, the GNMT length penalty's alpha, and the output limit (input length + offset);
    ``max_tokens``: how many source tokens x beam one decoding batch holds (a CPU's budget; a GPU
    takes :data:`GPU_DECODE_FACTOR` times as many).

    Defaults: Section 6.1's translation settings.
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_len_offset: int = 50
    max_tokens: int = 6000

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise ConfigError(f"decoding setting 'max_tokens' must be a positive integer, got {self.max_tokens!r}")
        for name in ("beam_size", "max_len_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "beam_size" else 0):
                raise ConfigError(f"decoding setting '{name}' must be a {'positive' if name == 'beam_size' else 'non-negative'} "
                                  f"integer, got {value!r}")
        if (not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or not math.isfinite(self.alpha)
                or self.alpha < 0):
            raise ConfigError(f"decoding setting 'alpha' must be a finite non-negative number, got {self.alpha!r}")
        for name, limit in (("beam_size", BEAM), ("max_len_offset", MAX_LEN_OFFSET), ("alpha", ALPHA)):
            if getattr(self, name) > limit.hard:
                raise ConfigError(f"decoding setting '{name}' must be at most {limit.hard} ({limit.why}), "
                                  f"got {getattr(self, name)}")

    def replace(self, **changes: Any) -> "DecodeSettings":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown decoding setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "decoding settings") -> "DecodeSettings":
        """From :meth:`to_dict`'s form; an unknown or mistyped field is a ConfigError naming it."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: decoding settings must be a JSON object, got {data!r}")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"{source}: unknown decoding setting(s): {', '.join(sorted(unknown))}")
        try:
            return cls(**data)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None


#: Section 6.1: beam 4, alpha 0.6, input + 50.
TRANSLATION = DecodeSettings()
#: Section 6.3: beam 21, alpha 0.3, input + 300 (outputs ~3x the sentence: larger batches).
PARSING = DecodeSettings(beam_size=21, alpha=0.3, max_len_offset=300, max_tokens=12000)
#: A GPU decodes batches this many times larger than ``max_tokens`` (its memory, not a CPU's caches, is the bound).
GPU_DECODE_FACTOR = 8
