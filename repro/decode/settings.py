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
    """Beam size, the GNMT length penalty's alpha, and the output limit (input length + offset).

    Defaults: Section 6.1's translation settings.
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_len_offset: int = 50

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_len_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "beam_size" else 0):
                raise ConfigError(f"decoding setting '{name}' must be a {'positive' if name == 'beam_size' else 'non-negative'} "
                                  f"integer, got {value!r}")
        for name, limit in (("beam_size", BEAM), ("max_len_offset", MAX_LEN_OFFSET), ("alpha", ALPHA)):
            if getattr(self, name) > limit.hard:
                raise ConfigError(f"decoding setting '{name}' must be at most {limit.hard} ({limit.why}), "
                                  f"got {getattr(self, name)}")
        if (not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or not math.isfinite(self.alpha)
                or self.alpha < 0):
            raise ConfigError(f"decoding setting 'alpha' must be a finite non-negative number, got {self.alpha!r}")

    def replace(self, **changes: Any) -> "DecodeSettings":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown decoding setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Section 6.1: beam 4, alpha 0.6, input + 50.
TRANSLATION = DecodeSettings()
#: Section 6.3: beam 21, alpha 0.3, input + 300.
PARSING = DecodeSettings(beam_size=21, alpha=0.3, max_len_offset=300)
