"""``repro reproduce --pipeline table3-small``: Section 6.2's conclusions at the small scale, on this machine.

The subset of Table 3 a 2-core CPU runs in about half an hour (docs/cluster.md, "Table 3 at your scale"):
the base row, rows (A) (the number of heads, h · d_k kept) and rows (D) (dropout, label
smoothing), 2 seeds each, at scale ``small`` (:data:`repro.recipes.SMALL`: Multi30k). Every job
is one that ``repro submit table3 --scale small`` submits (:func:`repro.cluster.experiments.plan_jobs`
on the ``local`` profile), run in this process, one after another, by the cluster's own code
(:class:`repro.cluster.job.TrainingJob`): training, then the dev split's BLEU and perplexity with
their bootstraps, one record per seed under ``RESULTS/table3-small.*/``. A job whose records are
stored is not run again, so a second run resumes where the first stopped (``--fresh`` runs all).
Then each row over its seeds, the verdict on each of Section 6.2's conclusions that these rows
decide (:mod:`repro.scaled.verdicts`), a summary ``REPORTS/table3_small_run.json`` with the wall
time of every job, and the report.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from repro.files.reader import read_json
from repro.files.writer import atomic_write_text
from repro.checks import select_claims
from repro.claims.loader import known_values
from repro.cluster.experiments import JobSpec, Plan, finished, plan_jobs, scale_signature
from repro.cluster.job import TrainingJob
from repro.cluster.profiles import load_profile
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.errors import ConfigError, ReproError
from repro.manifest import Manifest
from repro.paths import existing_dir, output_dir
from repro.pipeline import run_dir
from repro.recipes import get_scale
from repro.report import generate
from repro.results import ResultStore
from repro.scaled.rows import collect
from repro.scaled.verdicts import evaluate_all

#: The rows a 2-core CPU runs: the base, rows (A) and rows (D) of Table 3.
SUBSET = ("base", "A-h1", "A-h4", "A-h16", "A-h32", "D-drop0.0", "D-drop0.2", "D-ls0.0", "D-ls0.2")
SUBSET_SEEDS = 2


def _say(msg: str) -> None:
    print(f"repro reproduce: {msg}", file=sys.stderr, flush=True)


def reproduce_table3(
    *,
    scale: str = "small",
    rows: tuple[str, ...] = SUBSET,
    seeds: int = SUBSET_SEEDS,
    out_dir: str | Path = "runs/table3-small",
    reports_dir: str | Path = "reports/local",
    data_dir: str | None = None,
    fresh: bool = False,
    overrides: dict[str, Any] | None = None,
    precision: str | None = None,
    write_report: bool = True,
    claims_dir: str | None = None,
    report_dir: str | Path | None = None,
    say: Callable[[str], None] = _say,
) -> dict[str, Any]:
    """Run the jobs of ``rows`` x ``seeds`` at ``scale`` that have no stored results, then the verdicts and
    the report; returns the summary it writes to ``REPORTS/table3_<scale>_run.json``. Runs go to
    ``OUT_DIR/<signature>/<job>``, results to ``REPORTS/results``, the report to ``report_dir``
    (default: the parent of ``reports_dir``)."""
    began = time.monotonic()
    out_dir, reports_dir = Path(out_dir), Path(reports_dir)
    results_dir = reports_dir / "results"
    report_dir = Path(report_dir) if report_dir is not None else reports_dir.parent
    overrides = dict(overrides or {})
    signature = scale_signature(get_scale(scale), overrides)
    runs_dir = out_dir / signature
    profile = dataclasses.replace(load_profile("local"), executor="local")   # one process: this one
    jobs = plan_jobs("table3", Plan(profile, runs_dir, data_dir, overrides, precision, scale=scale, seeds=seeds,
                                    rows=tuple(rows)))
    # every input before anything is deleted or written
    manifest = check_inputs(jobs, out_dir, [reports_dir, report_dir], results_dir, claims_dir, fresh)
    run_dir.start_run(out_dir, run_dir.TABLE3, manifest, fresh=fresh)
    todo = [j for j in jobs if fresh or not finished(j, results_dir)]
    say(f"Table 3 at scale {scale} (signature {signature}): {len(jobs)} job(s), {len(jobs) - len(todo)} with stored "
        f"results left out; rows {', '.join(dict.fromkeys(j.scaled['row'] for j in jobs))}; {seeds} seed(s) each")
    timings = []
    for i, job in enumerate(todo, 1):
        say(f"{i}/{len(todo)} {job.name}: training ({job.train['max_steps']} steps) and dev evaluation")
        start = time.monotonic()
        summary = TrainingJob(job.to_dict(), str(results_dir), max_requeues=0)()
        seconds = time.monotonic() - start
        timings.append({"job": job.name, "row": job.scaled["row"], "seed": job.scaled["seed"],
                        "seconds": round(seconds, 1), "train_seconds": round(float(summary.get("elapsed_s", 0)), 1),
                        "steps": summary.get("steps"), "resumed_from": summary.get("resumed_from")})
        say(f"    {seconds:.0f} s (training {summary.get('elapsed_s', 0):.0f} s)")
    claims = select_claims(claims_dir=claims_dir)
    table = collect([results_dir]).get(scale)
    if table is None:
        raise ConfigError(f"{results_dir}: no result of Table 3 at scale {scale} was stored")
    verdicts = evaluate_all(claims, {scale: table})
    for v in verdicts:
        say(f"    {v.claim.id}: {v.verdict}" + (f" ({v.note})" if v.note else ""))
    total = time.monotonic() - began
    summary_path = reports_dir / f"table3_{scale}_run.json"
    known = _earlier_timings(summary_path, signature)   # a resumed run keeps the times of the jobs it left out
    known.update({t["job"]: t for t in timings})
    timed = [known[j.name] for j in jobs if j.name in known]
    per_row: dict[str, list[float]] = {}
    for t in timed:
        per_row.setdefault(t["row"], []).append(t["seconds"])
    report = {
        "profile": f"table3-{scale}", "scale": scale, "signature": signature, "rows": list(dict.fromkeys(rows)),
        "seeds": seeds, "jobs_run": len(todo), "jobs_left_out": len(jobs) - len(todo), "jobs": timed,
        "seconds_per_row": {row: round(sum(s) / len(s), 1) for row, s in per_row.items()},
        "seconds_all_jobs": round(sum(t["seconds"] for t in timed), 1),
        "wall_minutes_total": round(total / 60, 2), "threads": torch.get_num_threads(),
        "verdicts": [v.to_dict() for v in verdicts],
        "table": {row: {m: {"mean": round(x.mean, 4), "ci95": [round(c, 4) for c in x.ci95],
                            "seeds": {str(k): v for k, v in x.summary.values.items()}}
                        for m, x in entry.metrics.items()} | {"parameters": entry.parameters}
                  for row, entry in table.rows.items()},
        "notes": table.notes,
    }
    atomic_write_text(summary_path, json.dumps(report, indent=2, default=str) + "\n")
    if write_report:
        say(f"report: {report_dir}/report.md, report.html, report.json")
        first = Path(jobs[0].train["out_dir"])
        generate([results_dir], report_dir, claims_dir=claims_dir, run_dirs=[first] if first.is_dir() else [])
    return report


def check_inputs(jobs: list[JobSpec], out_dir: Path, output_dirs: list[Path], results_dir: Path,
                 claims_dir: str | None, fresh: bool) -> Manifest:
    """What the runs read and write, checked before anything is deleted or written: the data set's
    training and dev splits, the claims, the records the verdicts and the report read, the folders
    written, and (``fresh``) what ``--fresh`` would leave (:func:`repro.pipeline.run_dir.check_fresh`)."""
    train = jobs[0].train
    existing_dir(resolve_data_dir(train.get("data_dir")), "data directory (--data-dir)")
    dataset = get_dataset(str(train["dataset"]), resolve_data_dir(train.get("data_dir")))
    for split in ("train", "dev"):
        dataset.split(split)
    select_claims(claims_dir=claims_dir)
    for folder, what in ((out_dir, "run directory (--out-dir)"), *((d, "reports directory (--reports)")
                                                                   for d in output_dirs)):
        output_dir(folder, what)
    if results_dir.exists():
        ResultStore(results_dir, expected=known_values(claims_dir)).read_all()
    return run_dir.check_fresh(out_dir, run_dir.TABLE3_RESUMED_FROM) if fresh else Manifest.load(out_dir)


def _earlier_timings(path: Path, signature: str) -> dict[str, dict[str, Any]]:
    """The wall times an earlier run of the same signature recorded in ``path``, by job."""
    try:
        earlier = read_json(path, "earlier summary") if path.exists() else {}
    except ReproError:   # unreadable: no earlier timings
        return {}
    if not isinstance(earlier, dict) or earlier.get("signature") != signature:
        return {}
    return {t["job"]: t for t in earlier.get("jobs", []) if isinstance(t, dict) and "job" in t and "seconds" in t
            and "row" in t}
