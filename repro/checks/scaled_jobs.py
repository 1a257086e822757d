"""Table 3 at a named scale (Section 6.2's variations rerun smaller): the jobs ``repro submit table3
--scale NAME`` plans, read from their resolved specs.

Table 3 varies the base model one change at a time ("unlisted values are identical to those of the
base model"). At a scale, each row must be the scale's own base with the same change: a size (N,
d_model, d_ff, h, d_k, d_v, and the train steps: big trains three times as long) by the paper's own
ratio, a rate or a kind (P_drop, epsilon_ls, the positional encoding) as printed. The checker reads
the paper's rows from the claim (``params.paper_rows``, ``params.paper_base``, ``params.sizes``: the
paper's table, not repro's :mod:`repro.model.table3`), takes each scale's base row from the job it
plans for it, works out every other row from those, and compares with what every planned job
trains. And the seeds: each row's jobs train seeds 1 to ``params.seeds``, each its own seed (the
job's training seed is the one its records are filed under), nothing else differing between them,
all of one signature per scale (only such runs are combined into a row's mean and interval).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.cluster.experiments import Plan, plan_jobs
from repro.cluster.profiles import load_profile
from repro.recipes import SCALES
from repro.train.config import TrainConfig

#: Fields a job may change between its seeds: the seed and where the run writes.
PER_SEED = ("seed", "out_dir")


def cells(train: dict[str, Any]) -> dict[str, Any]:
    """Table 3's cells of a job's resolved training settings."""
    cfg = TrainConfig.from_dict(train)
    model = cfg.model_config()
    return {"N": model.n_layers, "d_model": model.d_model, "d_ff": model.d_ff, "h": model.n_heads, "d_k": model.d_k,
            "d_v": model.d_v, "P_drop": model.dropout, "eps_ls": cfg.label_smoothing, "PE": model.positional,
            "train_steps": cfg.max_steps}


def expected_cells(base: dict[str, Any], paper_base: dict[str, Any], printed: dict[str, Any],
                   sizes: list[str]) -> dict[str, Any]:
    """A row at a scale: the scale's base with the paper's change, sizes by the paper's ratio."""
    out = dict(base)
    for symbol, value in printed.items():
        if symbol in sizes:
            ratio = Fraction(base[symbol]) * Fraction(value) / Fraction(paper_base[symbol])
            out[symbol] = int(ratio) if ratio.denominator == 1 else float(ratio)
        else:
            out[symbol] = value
    return out


@checker("scaled.table3_jobs", audits=False, evidence="setting")
def table3_jobs(claim: Claim, ctx: CheckContext) -> Measurement:
    """Cells of Table 3's rows at every scale that differ from the paper's change made to the scale's
    base, and seed problems (a row's seeds not 1..n, a seed the job does not train, seeds that differ
    in more than the seed, several signatures): their number."""
    p = claim.params
    seeds, sizes, paper_base, rows = int(p["seeds"]), list(p["sizes"]), dict(p["paper_base"]), dict(p["paper_rows"])
    profile = load_profile("local")
    wrong: list[str] = []
    checked = 0
    for name in sorted(SCALES):
        jobs = plan_jobs("table3", Plan(profile, Path("runs"), scale=name, seeds=seeds))
        by_row: dict[str, list] = {}
        for job in jobs:
            by_row.setdefault(job.scaled["row"], []).append(job)
        if sorted(by_row) != sorted(rows):
            wrong.append(f"scale {name}: rows {sorted(by_row)}, Table 3 has {sorted(rows)}")
        base = cells(by_row["base"][0].train)
        signatures = {job.scaled["signature"] for job in jobs}
        if len(signatures) != 1:
            wrong.append(f"scale {name}: {len(signatures)} signatures among its jobs")
        for row, printed in rows.items():
            row_jobs = by_row.get(row, [])
            if not row_jobs:
                continue
            want = expected_cells(base, paper_base, printed, sizes)
            got = cells(row_jobs[0].train)
            checked += len(want)
            wrong += [f"scale {name} row {row}: {s} = {got[s]}, the paper's change gives {want[s]}"
                      for s in want if got[s] != want[s]]
            trained = [job.train["seed"] for job in row_jobs]
            filed = [job.scaled["seed"] for job in row_jobs]
            if sorted(trained) != list(range(1, seeds + 1)) or trained != filed:
                wrong.append(f"scale {name} row {row}: trains seeds {trained}, filed as {filed}, asked for 1..{seeds}")
            if len({job.scaled["record"] for job in row_jobs}) != len(row_jobs):
                wrong.append(f"scale {name} row {row}: two seeds share a record")
            first = {k: v for k, v in row_jobs[0].train.items() if k not in PER_SEED}
            for job in row_jobs[1:]:
                other = {k: v for k, v in job.train.items() if k not in PER_SEED}
                changed = sorted(k for k in first.keys() | other.keys() if first.get(k) != other.get(k))
                if changed:
                    wrong.append(f"scale {name} row {row}: seed {job.train['seed']} also changes {', '.join(changed)}")
    return Measurement(len(wrong), detail=(
        f"{checked} cells of {len(rows)} rows at scales {', '.join(sorted(SCALES))} ({seeds} seeds each) read from the "
        "jobs repro submit plans" + (f"; wrong: {'; '.join(wrong[:4])}" if wrong else "; every cell and seed as the paper's "
                                                                                       "change makes it")))
