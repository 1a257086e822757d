"""Named architectures: the base and big models, every row of Table 3, the parser of 6.3.

Table 3's rows are the base model with the cells the paper prints for each (:mod:`repro.model.table3`).

A preset is an architecture only (a :class:`TransformerConfig` and the paper's place for it);
how each is trained and decoded is its recipe, in :mod:`repro.recipes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.errors import ConfigError
from repro.model.transformer_config import TransformerConfig
from repro.model.table3 import ROWS as TABLE3
from repro.model.table3 import Row, changes


@dataclass(frozen=True)
class Preset:
    name: str
    source: str
    model: TransformerConfig


BASE = TransformerConfig()  # EN-DE: joint BPE vocabulary of about 37000 (Section 5.1)
BIG = BASE.replace(**changes("big").model)


def _row(row: Row) -> Preset:
    """A row of Table 3 (:mod:`repro.model.table3`): the base model with the row's cells."""
    return Preset(row.name, f"Table 3 row ({row.group}): {row.label}", BASE.replace(**changes(row).model))


_PRESETS: list[Preset] = [
    Preset("base", "Table 3 base row; Section 3 and 5", BASE),
    Preset("big", "Table 3 big row; Table 2 (EN-DE, P_drop=0.3)", BIG),
    Preset("big-enfr", "Section 6.1: EN-FR big model, P_drop=0.1, 32000 word-pieces",
           BIG.replace(dropout=0.1, src_vocab_size=32000, tgt_vocab_size=32000)),
    Preset("base-enfr", "Section 5.1: EN-FR base model, 32000 word-pieces",
           BASE.replace(src_vocab_size=32000, tgt_vocab_size=32000)),
    *(_row(row) for row in TABLE3 if row.group not in ("base", "big")),
    Preset("parser-wsj", "Section 6.3: 4 layers, d_model=1024, 16K vocabulary (WSJ only)",
           BASE.replace(n_layers=4, d_model=1024, src_vocab_size=16000, tgt_vocab_size=16000)),
    Preset("parser-semi", "Section 6.3: 4 layers, d_model=1024, 32K vocabulary (semi-supervised)",
           BASE.replace(n_layers=4, d_model=1024, src_vocab_size=32000, tgt_vocab_size=32000)),
]
PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}

#: The 20 rows of Table 3, in the paper's order (base first, big last).
TABLE3_ROWS: tuple[str, ...] = tuple(row.name for row in TABLE3)


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset '{name}'; known presets: {', '.join(PRESETS)}") from None
