"""Table 3 as data: each row is the base row with the cells the paper prints for it.

Table 3 prints, for each variation, only the cells that differ from the base row ("unlisted
values are identical to those of the base model"). :data:`ROWS` holds those cells as printed;
the paper's presets (:mod:`repro.model.presets`) and recipes (:mod:`repro.recipes`) are the base
with them, and a row at another scale is the same change made to that scale's base row
(:func:`changes`):

- a size (N, d_model, d_ff, h, d_k, d_v, train steps) is multiplied by the paper's own ratio:
  row (C) N = 2 is a third of the base's 6, so from a base of N = 3 it is N = 1; row (A) h = 1,
  d_k = d_v = 512 (an eighth of the heads, eight times 64) is, from a base of h = 8 and d_k = 16,
  h = 1 with d_k = d_v = 128. A ratio that gives no whole number at the scale's base is refused,
  naming the row and the cell (pick a base it divides);
- a rate or a kind (P_drop, epsilon_ls, the positional encoding) is the paper's value.

So at every scale the rows (A) keep h · d_k = d_model, as the paper does, the d_model rows of (C)
move d_k and d_v with d_model, and big is twice as wide, with twice the heads, P_drop 0.3 and three
times the steps. Every name here is the paper's symbol; :data:`CELLS` says which field each sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from repro.errors import ConfigError


@dataclass(frozen=True)
class Cell:
    """A column of Table 3: its symbol, the config field it sets (of the model or of training),
    and whether it is a size (scaled by the paper's ratio) or a value (taken as printed)."""

    symbol: str
    field: str
    part: str          # "model" (TransformerConfig) or "train" (TrainConfig)
    size: bool


CELLS: dict[str, Cell] = {c.symbol: c for c in (
    Cell("N", "n_layers", "model", True),
    Cell("d_model", "d_model", "model", True),
    Cell("d_ff", "d_ff", "model", True),
    Cell("h", "n_heads", "model", True),
    Cell("d_k", "d_k", "model", True),
    Cell("d_v", "d_v", "model", True),
    Cell("P_drop", "dropout", "model", False),
    Cell("eps_ls", "label_smoothing", "train", False),
    Cell("PE", "positional", "model", False),
    Cell("train_steps", "max_steps", "train", True),
)}

#: Table 3's base row (Sections 3 and 5): the cells every other row leaves unlisted.
BASE_CELLS: dict[str, Any] = {"N": 6, "d_model": 512, "d_ff": 2048, "h": 8, "d_k": 64, "d_v": 64, "P_drop": 0.1,
                              "eps_ls": 0.1, "PE": "sinusoidal", "train_steps": 100_000}


@dataclass(frozen=True)
class Row:
    """One row of Table 3: its name, its group (``base``, ``A`` to ``E``, ``big``), the variation in
    words, and the cells the paper prints for it (the others are the base row's)."""

    name: str
    group: str
    label: str
    cells: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.cells) - set(CELLS)
        if unknown:
            raise ConfigError(f"Table 3 row {self.name}: unknown cell(s) {', '.join(sorted(unknown))} "
                              f"(Table 3's columns: {', '.join(CELLS)})")


#: Table 3, in the paper's order (base first, big last).
ROWS: tuple[Row, ...] = (
    Row("base", "base", "base model"),
    Row("A-h1", "A", "h=1, d_k=d_v=512", {"h": 1, "d_k": 512, "d_v": 512}),
    Row("A-h4", "A", "h=4, d_k=d_v=128", {"h": 4, "d_k": 128, "d_v": 128}),
    Row("A-h16", "A", "h=16, d_k=d_v=32", {"h": 16, "d_k": 32, "d_v": 32}),
    Row("A-h32", "A", "h=32, d_k=d_v=16", {"h": 32, "d_k": 16, "d_v": 16}),
    Row("B-dk16", "B", "d_k=16", {"d_k": 16}),
    Row("B-dk32", "B", "d_k=32", {"d_k": 32}),
    Row("C-N2", "C", "N=2", {"N": 2}),
    Row("C-N4", "C", "N=4", {"N": 4}),
    Row("C-N8", "C", "N=8", {"N": 8}),
    Row("C-d256", "C", "d_model=256, d_k=d_v=32", {"d_model": 256, "d_k": 32, "d_v": 32}),
    Row("C-d1024", "C", "d_model=1024, d_k=d_v=128", {"d_model": 1024, "d_k": 128, "d_v": 128}),
    Row("C-dff1024", "C", "d_ff=1024", {"d_ff": 1024}),
    Row("C-dff4096", "C", "d_ff=4096", {"d_ff": 4096}),
    Row("D-drop0.0", "D", "P_drop=0.0", {"P_drop": 0.0}),
    Row("D-drop0.2", "D", "P_drop=0.2", {"P_drop": 0.2}),
    Row("D-ls0.0", "D", "eps_ls=0.0 (the base architecture; the row changes training)", {"eps_ls": 0.0}),
    Row("D-ls0.2", "D", "eps_ls=0.2 (the base architecture; the row changes training)", {"eps_ls": 0.2}),
    Row("E-learned", "E", "learned positional embedding instead of sinusoids", {"PE": "learned"}),
    Row("big", "big", "big model", {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3, "train_steps": 300_000}),
)
ROW: dict[str, Row] = {r.name: r for r in ROWS}


def get_row(name: str) -> Row:
    try:
        return ROW[name]
    except KeyError:
        raise ConfigError(f"unknown Table 3 row '{name}'; the rows: {', '.join(ROW)}") from None


@dataclass(frozen=True)
class Changes:
    """What a row sets at one scale: TransformerConfig fields and TrainConfig fields, and the row's
    cells at that scale (Table 3's symbols)."""

    model: dict[str, Any]
    train: dict[str, Any]
    cells: dict[str, Any]

    def label(self) -> str:
        """The row's cells at this scale, as Table 3 prints them (``h=1, d_k=128, d_v=128``)."""
        return ", ".join(f"{k}={v}" for k, v in self.cells.items()) or "(the scale's base)"


def changes(row: Row | str, base: Mapping[str, Any] = BASE_CELLS) -> Changes:
    """The fields ``row`` sets when its scale's base row has the cells ``base`` (default: the paper's,
    where every change is the cell as printed)."""
    row = get_row(row) if isinstance(row, str) else row
    missing = [s for s in CELLS if s not in base]
    if missing:
        raise ConfigError(f"a base row for Table 3 needs every cell; missing: {', '.join(missing)}")
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    cells: dict[str, Any] = {}
    for symbol, printed in row.cells.items():
        cell = CELLS[symbol]
        value = printed
        if cell.size:
            exact = Fraction(base[symbol]) * Fraction(printed) / Fraction(BASE_CELLS[symbol])
            if exact.denominator != 1 or exact < 1:
                raise ConfigError(
                    f"Table 3 row {row.name}: {symbol}={printed} is {Fraction(printed) / BASE_CELLS[symbol]} of the "
                    f"paper's base {symbol}={BASE_CELLS[symbol]}, which from a base of {symbol}={base[symbol]} is "
                    f"{float(exact):g}, not a whole number of at least 1 (choose a base {symbol} it divides)")
            value = int(exact)
        cells[symbol] = value
        (model if cell.part == "model" else train)[cell.field] = value
    return Changes(model, train, cells)


def cells_of(model: Any, train: Any) -> dict[str, Any]:
    """Table 3's cells of a configuration: ``model`` a TransformerConfig, ``train`` a TrainConfig."""
    return {s: getattr(model if c.part == "model" else train, c.field) for s, c in CELLS.items()}
