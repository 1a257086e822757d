"""The statistics behind Section 6.2's verdicts at a scale (:mod:`repro.scaled.verdicts`), measured on
repro's own code with seeds whose answer is known.

A row of Table 3 at a scale is the mean over its seeds with a 95% interval (Student's t over the
seeds with n - 1 degrees of freedom, combined with the seeds' bootstrap half widths divided by
sqrt(n)); a difference of rows has Welch's interval (Satterthwaite's degrees of freedom, rounded
down); a conclusion holds when its interval lies wholly on the paper's side (an equivalence
``|a - b| <= k``: wholly inside ±k), is reversed when wholly on the other side (wholly outside ±k),
and is inconclusive otherwise (:mod:`repro.eval.seeds`). The checker computes the intervals again
with scipy's t quantiles, sets repro's against them, and runs repro's verdicts on made-up rows
whose verdict is worked out by hand (:data:`VERDICT_CASES`), among them equivalences whose estimate
is inside ±k but whose interval is not (inconclusive, never "holds").
"""

from __future__ import annotations

import math
import statistics

from scipy.stats import t as student_t

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.eval.seeds import combination, over_seeds
from repro.scaled.rows import Measured, ScaledRow, ScaledTable
from repro.scaled.verdicts import evaluate

#: A row's seeds and their bootstrap half widths.
ROW_A = ({1: 25.1, 2: 25.9, 3: 24.8}, [0.4, 0.5, 0.3])
ROW_B = ({1: 24.0, 2: 24.3, 3: 23.1, 4: 24.9}, [0.6, 0.4, 0.5, 0.5])

EQUIVALENCE = "abs({table3.bleu.E-learned} - {table3.bleu.base}) <= 0.3"
ORDER = "{table3.bleu.A-h32} < {table3.bleu.A-h16}"
#: (expression, {row: (seed values, bootstrap half widths)}, the verdict by hand).
VERDICT_CASES = (
    # E - base = 0.05 with seeds 0.01 apart and no bootstrap: the interval is about ±0.02 around 0.05,
    # inside ±0.3: holds.
    (EQUIVALENCE, {"base": ({1: 25.80, 2: 25.81, 3: 25.79}, []), "E-learned": ({1: 25.85, 2: 25.86, 3: 25.84}, [])},
     "holds"),
    # E - base = 0.1, inside ±0.3, but the seeds spread by ±1: the interval is several points wide
    # and crosses ±0.3: inconclusive (an estimate inside ±k is not equivalence).
    (EQUIVALENCE, {"base": ({1: 24.8, 2: 25.8, 3: 26.8}, []), "E-learned": ({1: 24.9, 2: 25.9, 3: 26.9}, [])},
     "inconclusive"),
    # The same tight seeds as the first case but E - base = 0.25, and each seed's bootstrap ±0.5:
    # the bootstrap part, 0.5 / sqrt(3) per row, about 0.41 combined, crosses 0.3: inconclusive.
    (EQUIVALENCE, {"base": ({1: 25.80, 2: 25.81, 3: 25.79}, [0.5] * 3),
                   "E-learned": ({1: 26.05, 2: 26.06, 3: 26.04}, [0.5] * 3)}, "inconclusive"),
    # E - base = 1.0 with tight seeds: wholly outside ±0.3: reversed.
    (EQUIVALENCE, {"base": ({1: 25.80, 2: 25.81, 3: 25.79}, []), "E-learned": ({1: 26.80, 2: 26.81, 3: 26.79}, [])},
     "reversed"),
    # A-h16 - A-h32 = 0.5 with seeds 0.01 apart: wholly above 0: holds.
    (ORDER, {"A-h32": ({1: 25.0, 2: 25.01, 3: 24.99}, []), "A-h16": ({1: 25.5, 2: 25.51, 3: 25.49}, [])}, "holds"),
    # The same difference with seeds spread by ±1 (two seeds each: t with 1 degree of freedom,
    # 12.7): crosses 0: inconclusive.
    (ORDER, {"A-h32": ({1: 24.0, 2: 26.0}, []), "A-h16": ({1: 24.5, 2: 26.5}, [])}, "inconclusive"),
    # A-h16 - A-h32 = -0.5, tight: wholly below 0: reversed.
    (ORDER, {"A-h32": ({1: 25.5, 2: 25.51, 3: 25.49}, []), "A-h16": ({1: 25.0, 2: 25.01, 3: 24.99}, [])}, "reversed"),
)


def t975(df: int) -> float:
    return float(student_t.ppf(0.975, df))


def row_half_width(values: dict[int, float], half_widths: list[float]) -> float:
    """A row's 95% half width, from its definition (module docstring)."""
    n = len(values)
    seeds = t975(n - 1) * statistics.stdev(values.values()) / math.sqrt(n) if n > 1 else 0.0
    sampling = statistics.fmean(half_widths) / math.sqrt(n) if half_widths else 0.0
    return math.hypot(seeds, sampling)


def difference(a: tuple[dict[int, float], list[float]], b: tuple[dict[int, float], list[float]]
               ) -> tuple[float, float, float]:
    """(estimate, Welch's half width, Satterthwaite's degrees of freedom) of mean(a) - mean(b)."""
    va, vb = (statistics.variance(x[0].values()) / len(x[0]) for x in (a, b))
    df = (va + vb) ** 2 / (va ** 2 / (len(a[0]) - 1) + vb ** 2 / (len(b[0]) - 1))
    sampling = math.sqrt(sum((statistics.fmean(x[1]) if x[1] else 0.0) ** 2 / len(x[0]) for x in (a, b)))
    half = math.hypot(t975(math.floor(df + 1e-9)) * math.sqrt(va + vb), sampling)
    return statistics.fmean(a[0].values()) - statistics.fmean(b[0].values()), half, df


def _table(rows: dict[str, tuple[dict[int, float], list[float]]]) -> ScaledTable:
    made = {}
    for row, (values, widths) in rows.items():
        made[row] = ScaledRow(row, {"bleu": Measured(over_seeds(values, widths), dict(zip(values, widths)))})
    return ScaledTable("probe", "probe", made, [], [], [])


def _claim(expression: str) -> Claim:
    return Claim(id="sec6.2.probe", source="Section 6.2", statement=expression, kind="relation", scale="local",
                 checker="relation.expression", file="<probe>", expected=True, params={"expression": expression})


@checker("scaled.verdict_statistics", audits=False)
def verdict_statistics(claim: Claim, ctx: CheckContext) -> Measurement:
    """Disagreements between repro's intervals and verdicts and those worked out independently (a row's
    half width, a difference's half width and degrees of freedom, each verdict case): their number."""
    wrong = []
    rel = float(claim.params.get("rel_tolerance", 1e-3))   # repro's t table is printed to 3 decimals

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= rel * abs(b)

    for name, (values, widths) in (("row A", ROW_A), ("row B", ROW_B)):
        ours, want = over_seeds(values, widths).half_width, row_half_width(values, widths)
        if not close(ours, want):
            wrong.append(f"{name}: half width {ours:.6f}, t with n - 1 = {len(values) - 1} degrees gives {want:.6f}")
    combo = combination([(1.0, over_seeds(*ROW_A)), (-1.0, over_seeds(*ROW_B))])
    estimate, half, df = difference(ROW_A, ROW_B)
    if not (abs(combo.estimate - estimate) <= 1e-9 and close(combo.half_width, half)
            and combo.degrees_of_freedom is not None and abs(combo.degrees_of_freedom - df) <= 1e-6):
        wrong.append(f"row A - row B: {combo.estimate:.4f} ± {combo.half_width:.6f} (df {combo.degrees_of_freedom}), "
                     f"Welch gives {estimate:.4f} ± {half:.6f} (df {df:.4f})")
    for expression, rows, verdict in VERDICT_CASES:
        got = evaluate(_claim(expression), _table(rows), {})
        if got.verdict != verdict:
            parts = "; ".join(f"{p.text} {p.estimate:.3f} [{p.ci95[0]:.3f}, {p.ci95[1]:.3f}]" for p in got.parts)
            wrong.append(f"{expression} on {', '.join(rows)}: {got.verdict} ({parts}), by hand {verdict}")
    return Measurement(len(wrong), detail=(
        f"2 rows' intervals, one Welch difference (df {df:.2f}) and {len(VERDICT_CASES)} verdicts set against "
        "scipy's t and the rule" + (f"; wrong: {'; '.join(wrong[:4])}" if wrong else "; all agree")))
