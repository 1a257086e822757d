"""Table 3 at named scales in the report: the rows beside the paper's, the verdicts, the differences.

- :func:`table`: a table like Table 3, the paper's columns and, per scale, the row's change at that
  scale, its dev PPL and BLEU (mean over seeds, 95% interval), parameters and seeds;
- :func:`verdicts_table`: each conclusion of Section 6.2 with the paper's own figure and, per scale,
  the verdict (``holds`` / ``reversed`` / ``inconclusive`` / ``not run``) and its parts;
- :func:`difference_figure`: each row's difference from the scale's base row, with its interval.

Every number here is the scale's (``scale: <name>: ...``), never the paper's: it is printed beside
the paper's figure, never as a reproduction of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from repro.claims.claim import Claim
from repro.eval.seeds import combination
from repro.model import TABLE3_ROWS
from repro.model.table3 import changes, get_row
from repro.recipes import SCALES
from repro.report.figures import Figure, _png
from repro.report.values import MISSING, show
from repro.scaled.rows import ScaledTable
from repro.scaled.verdicts import Verdict

_NAMES = {"ppl": "PPL", "bleu": "BLEU"}


def _paper(claims: Mapping[str, Claim], claim_id: str) -> str:
    claim = claims.get(claim_id)
    return show(claim.expected) if claim is not None else MISSING


def _interval(mean: float, ci95: tuple[float, float], digits: int) -> str:
    if not all(math.isfinite(x) for x in (mean, *ci95)):
        return "nan"
    return f"{mean:.{digits}f} [{ci95[0]:.{digits}f}, {ci95[1]:.{digits}f}]"


def _change(scale: str, row: str) -> str:
    """The row's cells at ``scale`` as Table 3 prints them (the scale's recipe table)."""
    spec = SCALES.get(scale)
    if spec is None:
        return MISSING
    if row == "base":
        return ", ".join(f"{k}={v}" for k, v in spec.cells().items())
    return changes(row, spec.cells()).label()


def table(tables: Mapping[str, ScaledTable], claims: Sequence[Claim]) -> pd.DataFrame:
    """One row per Table 3 row measured at any scale (the paper's order), the paper's columns first."""
    by_id = {c.id: c for c in claims}
    measured_rows = [r for r in TABLE3_ROWS if any(r in t.rows for t in tables.values())]
    out = []
    for row in measured_rows:
        cells = {"row": row, "variation (paper)": get_row(row).label,
                 "PPL dev (paper)": _paper(by_id, f"table3.ppl.{row}"),
                 "BLEU dev (paper)": _paper(by_id, f"table3.bleu.{row}"),
                 "params ×10^6 (paper)": _paper(by_id, f"table3.params.{row}")}
        for name, t in sorted(tables.items()):
            entry = t.rows.get(row)
            cells[f"change ({name})"] = _change(name, row)
            for metric, digits in (("ppl", 2), ("bleu", 2)):
                m = t.measured(metric, row)
                cells[f"{_NAMES[metric]} dev ({name})"] = _interval(m.mean, m.ci95, digits) if m else MISSING
            params = entry.parameters if entry is not None else None
            cells[f"params ×10^6 ({name})"] = f"{params / 1e6:.2f}" if params else MISSING
            seeds = sorted({s for m in (entry.metrics.values() if entry else []) for s in m.seeds})
            cells[f"seeds ({name})"] = ", ".join(map(str, seeds)) or MISSING
        out.append(cells)
    return pd.DataFrame(out)


def table_note(tables: Mapping[str, ScaledTable]) -> str:
    parts = []
    for name, t in sorted(tables.items()):
        texts = "; ".join(t.scale_texts[:1]) + (f" (and {len(t.scale_texts) - 1} more runs)" if len(t.scale_texts) > 1
                                                 else "")
        parts.append(f"scale: {name} (signature {t.signature}): {texts}; hardware: {'; '.join(t.hardware)}; commit(s): "
                     f"{', '.join(c[:12] for c in t.commits)}")
    return ("Each measured cell: the mean over the row's seeds on the scale's dev split, with its 95% interval "
            "(Student's t over the seeds combined with each seed's bootstrap over sentences); BLEU with the paper's "
            "tokenized protocol, PPL per wordpiece. Measured at a named scale, never the paper's: "
            + " | ".join(parts) + ". " + " ".join(n for t in tables.values() for n in t.notes))


def verdicts_table(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """One row per conclusion; per scale its verdict and each part (paper's figure, measured, interval)."""
    rows: dict[str, dict[str, str]] = {}
    for v in verdicts:
        row = rows.setdefault(v.claim.id, {"conclusion": v.claim.id, "statement": v.claim.statement,
                                           "paper (Table 3)": show(v.paper_figure)})
        row[f"verdict ({v.scale})"] = v.verdict
        row[f"parts ({v.scale})"] = "; ".join(
            f"{p.text}: paper {p.paper:+.2f}, measured {p.estimate:+.2f} [{p.ci95[0]:+.2f}, {p.ci95[1]:+.2f}] "
            f"{p.verdict}" for p in v.parts) or v.note
    return pd.DataFrame(list(rows.values()))


VERDICTS_NOTE = ("Each conclusion is its relation of claims/relations.toml read over the rows at the scale, split into "
                 "differences of rows; a difference's interval combines Welch's t over the seeds with the rows' "
                 "bootstraps (rows taken as independent: conservative). holds: every difference lies on the paper's "
                 "side of zero (within ±k for 'nearly identical'); reversed: one lies wholly on the other side (wholly "
                 "outside ±k); inconclusive: an interval crosses zero (or ±k); not run: a row it needs is not measured "
                 "at the scale. 'paper' is the relation on Table 3's own figures, each part's 'paper' the same "
                 "difference in Table 3.")


def difference_figure(t: ScaledTable, paper: Mapping[tuple[str, str], float]) -> Figure | str:
    """Each row's dev PPL and BLEU minus the base row's at scale ``t``, with 95% intervals; the paper's
    own difference (Table 3) as an open marker."""
    base = {m: t.measured(m, "base") for m in _NAMES}
    rows = [r for r in TABLE3_ROWS if r != "base" and r in t.rows]
    if not rows or any(b is None for b in base.values()):
        return f"scale {t.scale}: no base row or no other row measured; the figure of differences is not drawn"
    fig = MplFigure(figsize=(10.0, 0.45 * len(rows) + 1.6))
    axes = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(rows))
    for ax, metric in zip(axes, _NAMES):
        est, err, ref = [], [], []
        for row in rows:
            m = t.measured(metric, row)
            if m is None:
                est.append(np.nan), err.append(0.0), ref.append(np.nan)
                continue
            c = combination([(1.0, m.summary), (-1.0, base[metric].summary)])
            est.append(c.estimate)
            err.append(c.half_width if math.isfinite(c.half_width) else 0.0)
            p_row, p_base = paper.get((metric, row)), paper.get((metric, "base"))
            ref.append(p_row - p_base if p_row is not None and p_base is not None else np.nan)
        ax.errorbar(est, y, xerr=err, fmt="o", capsize=3, label=f"scale {t.scale} (mean over seeds, 95% interval)")
        ax.plot(ref, y, "x", color="C3", label="paper (Table 3)")
        ax.axvline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel(f"dev {_NAMES[metric]} − base row's" + (" (lower is better)" if metric == "ppl" else ""))
        ax.set_yticks(y, rows)
    axes[0].invert_yaxis()   # the paper's order from the top (the axes share y)
    axes[1].legend(fontsize="small", loc="best")
    fig.tight_layout()
    caption = (f"scale: {t.scale} (signature {t.signature}; {'; '.join(t.scale_texts[:1])}); hardware: "
               f"{'; '.join(t.hardware)}; commit(s): {', '.join(c[:12] for c in t.commits)}. Never a reproduction "
               "of Table 3's figures.")
    return Figure(f"table3-{t.scale}-differences", f"Table 3 at scale {t.scale}: each row's difference from the base "
                  "row", caption, _png(fig))
