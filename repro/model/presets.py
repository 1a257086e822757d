"""Named architectures: the base and big models, every row of Table 3, the parser of 6.3.

A preset is an architecture only (a :class:`TransformerConfig` and the paper's place for it);
how each is trained and decoded is its recipe, in :mod:`repro.recipes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.errors import ConfigError
from repro.model.config import TransformerConfig


@dataclass(frozen=True)
class Preset:
    name: str
    source: str
    model: TransformerConfig


BASE = TransformerConfig()  # EN-DE: joint BPE vocabulary of about 37000 (Section 5.1)
BIG = BASE.replace(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3)


def _row(name: str, source: str, **changes) -> Preset:
    return Preset(name, source, BASE.replace(**changes))


_PRESETS: list[Preset] = [
    Preset("base", "Table 3 base row; Section 3 and 5", BASE),
    Preset("big", "Table 3 big row; Table 2 (EN-DE, P_drop=0.3)", BIG),
    Preset("big-enfr", "Section 6.1: EN-FR big model, P_drop=0.1, 32000 word-pieces",
           BIG.replace(dropout=0.1, src_vocab_size=32000, tgt_vocab_size=32000)),
    Preset("base-enfr", "Section 5.1: EN-FR base model, 32000 word-pieces",
           BASE.replace(src_vocab_size=32000, tgt_vocab_size=32000)),
    _row("A-h1", "Table 3 row (A): h=1, d_k=d_v=512", n_heads=1, d_k=512, d_v=512),
    _row("A-h4", "Table 3 row (A): h=4, d_k=d_v=128", n_heads=4, d_k=128, d_v=128),
    _row("A-h16", "Table 3 row (A): h=16, d_k=d_v=32", n_heads=16, d_k=32, d_v=32),
    _row("A-h32", "Table 3 row (A): h=32, d_k=d_v=16", n_heads=32, d_k=16, d_v=16),
    _row("B-dk16", "Table 3 row (B): d_k=16", d_k=16),
    _row("B-dk32", "Table 3 row (B): d_k=32", d_k=32),
    _row("C-N2", "Table 3 row (C): N=2", n_layers=2),
    _row("C-N4", "Table 3 row (C): N=4", n_layers=4),
    _row("C-N8", "Table 3 row (C): N=8", n_layers=8),
    _row("C-d256", "Table 3 row (C): d_model=256, d_k=d_v=32", d_model=256, d_k=32, d_v=32),
    _row("C-d1024", "Table 3 row (C): d_model=1024, d_k=d_v=128", d_model=1024, d_k=128, d_v=128),
    _row("C-dff1024", "Table 3 row (C): d_ff=1024", d_ff=1024),
    _row("C-dff4096", "Table 3 row (C): d_ff=4096", d_ff=4096),
    _row("D-drop0.0", "Table 3 row (D): P_drop=0.0", dropout=0.0),
    _row("D-drop0.2", "Table 3 row (D): P_drop=0.2", dropout=0.2),
    _row("D-ls0.0", "Table 3 row (D): eps_ls=0.0 (the base architecture; the row changes training)"),
    _row("D-ls0.2", "Table 3 row (D): eps_ls=0.2 (the base architecture; the row changes training)"),
    _row("E-learned", "Table 3 row (E): learned positional embedding instead of sinusoids", positional="learned"),
    Preset("parser-wsj", "Section 6.3: 4 layers, d_model=1024, 16K vocabulary (WSJ only)",
           BASE.replace(n_layers=4, d_model=1024, src_vocab_size=16000, tgt_vocab_size=16000)),
    Preset("parser-semi", "Section 6.3: 4 layers, d_model=1024, 32K vocabulary (semi-supervised)",
           BASE.replace(n_layers=4, d_model=1024, src_vocab_size=32000, tgt_vocab_size=32000)),
]
PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}

#: The 20 rows of Table 3, in the paper's order (base first, big last).
TABLE3_ROWS: tuple[str, ...] = tuple(
    n for n in PRESETS if n == "base" or n[:2] in {"A-", "B-", "C-", "D-", "E-"}
) + ("big",)


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset '{name}'; known presets: {', '.join(PRESETS)}") from None
