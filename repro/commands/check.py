"""``repro check [--json FILE] [--device DEVICE]``: run every local claim against repro's own implementation.

``--device`` runs the models the claims build on that device (:mod:`repro.audit.on_device`): the
inputs are the CPU's seeded ones, the arithmetic is the device's kernels.

``repro check --run DIR``: every statement of the paper the records of the run in DIR can show, checked
on them (:mod:`repro.checks.run_check`): pass, departs (the run was asked for something else: its value
and the paper's), fail (its records contradict each other or its recipe), or needs another run (why).
Exit 1 when a claim fails or its check breaks, 2 when a record is malformed, 0 otherwise."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

from repro.argtypes import claim_prefix, existing_dir, not_blank, output_dir, output_file, positive_int, seed
from repro.files.writer import atomic_write_text
from repro.audit.on_device import repro_on
from repro.checks import run_checks, select_claims
from repro.claims.loader import as_input as claims_folder, known_values
from repro.claims.runner import CheckRecord
from repro.checks.run_check import check_run
from repro.claims.table import render, render_run
from repro.errors import UsageError
from repro.observed.judge import verdict
from repro.paths import outside_inputs
from repro.cli_flags import add_device_argument, runtime_from_args
from repro.report.newest import latest
from repro.results import DEFAULT_RESULTS, ResultStore, store_records


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="run every local claim; exit non-zero when one fails")
    parser.add_argument("--json", metavar="FILE", type=output_file, help="write the records as a JSON array to FILE")
    parser.add_argument("--claims-dir", default=None, type=existing_dir,
                        help="directory of claims files (default: $REPRO_CLAIMS_DIR, else the claims repro ships)")
    parser.add_argument(
        "--results", metavar="DIR", default=None, type=not_blank,
        help=f"results store to read metric results from (default: {DEFAULT_RESULTS} when it exists)",
    )
    parser.add_argument("--store", metavar="DIR", default=None, type=output_dir,
                        help="also write each measurement to this results store")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="leave out invalid records of --results (listing each on stderr) instead of refusing "
                             "the store (the default: exit 2 naming the first)")
    parser.add_argument("--only", metavar="PREFIX", action="append", default=[], type=claim_prefix, help="only claims whose id starts so")
    parser.add_argument("--run", metavar="DIR", type=existing_dir, default=None,
                        help="check the paper's statements on the records of the run in DIR (a repro train --out-dir, "
                             "a repro submit job's run, the main job's runs/local) instead of on the code")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random inputs (0 .. 2**31 - 1)")
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                        help="check the claims in N processes (each claim is seeded from its id: the same verdicts "
                             "and values as one process; default 1)")
    add_device_argument(parser, default="cpu", what="the models the claims build run there, fed the CPU's seeded "
                                                    "inputs; the default keeps the CPU's verdicts")
    parser.set_defaults(func=main)


def progress(record: CheckRecord) -> None:
    """One line per claim on stderr as it finishes."""
    print(f"  {record.status.value:14s} {record.claim.id} ({record.seconds:.1f} s)", file=sys.stderr)


def _stored(results_dir: Path, args: argparse.Namespace) -> dict:
    """The newest record of each claim in ``results_dir``, every record validated against the claims."""
    expected = known_values(args.claims_dir)
    store = ResultStore(results_dir, skip_invalid=args.skip_invalid, expected=expected)
    newest = latest(store)
    for _, why in store.skipped:
        print(f"repro check: WARNING: skipping invalid result record or stray file: {why}", file=sys.stderr)
    return newest


def check_a_run(args: argparse.Namespace) -> int:
    """``--run DIR``: the run's records against the paper (module docstring)."""
    if args.store or args.results:
        raise UsageError("--run checks a run's own records: --store and --results do not go with it")
    if args.jobs != 1:
        raise UsageError("--run checks a run's records in one process: --jobs does not go with it")
    check = check_run(args.run, args.claims_dir, args.only,
                      on_record=lambda r: print(f"  {verdict(r):17s} {r.claim.id} ({r.seconds:.1f} s)", file=sys.stderr))
    print(check.describe())
    print(render_run(check.records))
    if args.json:
        cut = check.files.interrupted
        rows = [{**r.to_dict(), "verdict": verdict(r), "run": str(check.files.path),
                 "interrupted": cut.to_dict() if cut is not None else None} for r in check.records]
        atomic_write_text(Path(args.json), json.dumps(rows, indent=2, default=str) + "\n")
    return 1 if any(r.status.broken for r in check.records) else 0


def main(args: argparse.Namespace) -> int:
    outside_inputs(args.json, [claims_folder(args.claims_dir), (args.results or DEFAULT_RESULTS, "results store", None),
                               (args.store, "results store (--store)", None)], "JSON output (--json)")
    if args.run is not None:
        return check_a_run(args)
    claims = select_claims("local", args.only, args.claims_dir)
    results_dir = Path(args.results) if args.results else DEFAULT_RESULTS
    results = _stored(results_dir, args) if (args.results or results_dir.exists()) else {}
    runtime = runtime_from_args(args, "check", resolve_precision=False)
    if runtime.on_gpu:
        print(f"repro check: the claims' models run on {runtime.device}", file=sys.stderr)
    records = run_checks(claims, repro_on(runtime) if args.jobs == 1 else None, results=results, seed=args.seed,
                         on_record=progress, jobs=args.jobs, make_target=partial(repro_on, runtime))
    print(render(records))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in records], indent=2, default=str) + "\n")
    if args.store:
        store_records(records, ResultStore(args.store), device=str(runtime.device))
    return 1 if any(r.status.broken for r in records) else 0
