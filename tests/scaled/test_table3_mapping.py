"""Table 3 as data: the paper's rows as printed, and every row at a named scale by the paper's own change."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from repro.errors import ConfigError
from repro.model import TABLE3_ROWS, get_preset
from repro.model.table3 import BASE_CELLS, changes, get_row
from repro.recipes import RECIPES, SCALES, get_recipe, get_scale

#: Table 3 as /work/shared/paper/tables.md transcribes it (N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls,
#: train steps, positional encoding), written out whole for every row: independent of repro's table.
PAPER = {
    "base": (6, 512, 2048, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "A-h1": (6, 512, 2048, 1, 512, 512, 0.1, 0.1, 100_000, "sinusoidal"),
    "A-h4": (6, 512, 2048, 4, 128, 128, 0.1, 0.1, 100_000, "sinusoidal"),
    "A-h16": (6, 512, 2048, 16, 32, 32, 0.1, 0.1, 100_000, "sinusoidal"),
    "A-h32": (6, 512, 2048, 32, 16, 16, 0.1, 0.1, 100_000, "sinusoidal"),
    "B-dk16": (6, 512, 2048, 8, 16, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "B-dk32": (6, 512, 2048, 8, 32, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-N2": (2, 512, 2048, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-N4": (4, 512, 2048, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-N8": (8, 512, 2048, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-d256": (6, 256, 2048, 8, 32, 32, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-d1024": (6, 1024, 2048, 8, 128, 128, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-dff1024": (6, 512, 1024, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "C-dff4096": (6, 512, 4096, 8, 64, 64, 0.1, 0.1, 100_000, "sinusoidal"),
    "D-drop0.0": (6, 512, 2048, 8, 64, 64, 0.0, 0.1, 100_000, "sinusoidal"),
    "D-drop0.2": (6, 512, 2048, 8, 64, 64, 0.2, 0.1, 100_000, "sinusoidal"),
    "D-ls0.0": (6, 512, 2048, 8, 64, 64, 0.1, 0.0, 100_000, "sinusoidal"),
    "D-ls0.2": (6, 512, 2048, 8, 64, 64, 0.1, 0.2, 100_000, "sinusoidal"),
    "E-learned": (6, 512, 2048, 8, 64, 64, 0.1, 0.1, 100_000, "learned"),
    "big": (6, 1024, 4096, 16, 64, 64, 0.3, 0.1, 300_000, "sinusoidal"),
}
SIZES = ("n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v")


def cells(recipe) -> tuple:
    m, t = recipe.model, recipe.train
    return (m.n_layers, m.d_model, m.d_ff, m.n_heads, m.d_k, m.d_v, m.dropout, t.label_smoothing, t.max_steps,
            m.positional)


def test_the_paper_rows_are_table_3_as_printed():
    assert TABLE3_ROWS == tuple(PAPER)
    for row, printed in PAPER.items():
        assert cells(get_recipe(f"table3-{row}")) == printed, row
        assert get_preset(row).model.replace(attention="fused") == get_recipe(f"table3-{row}").model  # its architecture


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_every_row_at_a_scale_is_the_papers_change_to_the_scales_base(scale: str):
    base = get_scale(scale).base
    paper_base = PAPER["base"]
    for row, printed in PAPER.items():
        recipe = get_scale(scale).row(row)
        assert recipe.name == f"table3-{scale}-{row}" and RECIPES[recipe.name] == recipe
        mine, theirs = cells(recipe), cells(base)
        for i, (p, p0, got, got0) in enumerate(zip(printed, paper_base, mine, theirs)):
            if i in (6, 7, 9):     # P_drop, eps_ls, positional: the paper's value where the row changes it
                assert got == (p if p != p0 else got0), (row, i)
            else:                  # sizes (and steps): the paper's ratio, exactly
                assert Fraction(got) / Fraction(got0) == Fraction(p) / Fraction(p0), (row, i)
        # nothing else moves: data, vocabulary, batch, schedule, decoding are the scale's
        for field in ("dataset", "vocab_size", "tokens_per_batch", "warmup_steps", "lr_scale", "average_last"):
            assert getattr(recipe.train, field) == getattr(base.train, field), (row, field)
        assert recipe.decode == base.decode


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_rows_a_keep_h_times_dk_and_every_row_is_distinct(scale: str):
    spec = get_scale(scale)
    for row in ("base", "A-h1", "A-h4", "A-h16", "A-h32"):
        m = spec.row(row).model
        assert m.n_heads * m.d_k == m.n_heads * m.d_v == m.d_model
    built = {row: (spec.row(row).model, spec.row(row).train.label_smoothing, spec.row(row).train.max_steps)
             for row in TABLE3_ROWS}
    assert len(set(built.values())) == 20


def test_the_small_scale():
    small = get_scale("small")
    assert small.cells() == {"N": 3, "d_model": 128, "d_ff": 512, "h": 8, "d_k": 16, "d_v": 16, "P_drop": 0.1,
                             "eps_ls": 0.1, "PE": "sinusoidal", "train_steps": 300}
    assert small.base.train.dataset == "multi30k-en-de" and small.base.train.average_last == 1
    assert [small.row(r).model.n_layers for r in ("C-N2", "C-N4", "C-N8")] == [1, 2, 4]
    assert (small.row("A-h1").model.n_heads, small.row("A-h1").model.d_k) == (1, 128)
    assert small.row("big").train.max_steps == 900 and small.row("big").model.dropout == 0.3


def test_a_ratio_without_a_whole_number_is_refused_by_row_and_cell():
    with pytest.raises(ConfigError, match=r"row C-N2: N=2 is 1/3 of the paper's base N=6, which from a base of N=2 "
                                          r"is 0\.666667, not a whole number"):
        changes("C-N2", {**BASE_CELLS, "N": 2})
    with pytest.raises(ConfigError, match=r"row A-h1: h=1 .* from a base of h=4 is 0\.5"):
        changes("A-h1", {**BASE_CELLS, "h": 4, "d_k": 128, "d_v": 128})
    with pytest.raises(ConfigError, match="unknown Table 3 row 'A-h2'"):
        get_row("A-h2")
    assert changes("C-N2").model == {"n_layers": 2} and changes("D-ls0.0").train == {"label_smoothing": 0.0}


def test_repro_table3_prints_the_mapping(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "repro", "table3", "--scale", "small", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["scale"] == "small" and [r["row"] for r in data["rows"]] == list(TABLE3_ROWS)
    by_row = {r["row"]: r for r in data["rows"]}
    assert by_row["A-h1"]["cells"] == {"h": 1, "d_k": 128, "d_v": 128} and by_row["A-h1"]["paper_cells"]["d_k"] == 512
    assert by_row["A-h1"]["parameters"] == by_row["base"]["parameters"]     # (A) keeps h·d_k: the same count
    assert by_row["B-dk16"]["parameters"] < by_row["B-dk32"]["parameters"] < by_row["base"]["parameters"]
    assert by_row["C-N2"]["parameters"] < by_row["C-N4"]["parameters"] < by_row["base"]["parameters"] \
        < by_row["C-N8"]["parameters"]
    text = subprocess.run([sys.executable, "-m", "repro", "table3"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path).stdout
    assert "C-N2" in text and "N=1" in text and "h=32, d_k=4, d_v=4" in text
