"""``repro check [--json FILE]``: run every local claim against repro's own implementation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro.argtypes import existing_dir, non_negative_int
from repro.atomic import atomic_write_text
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import run_checks, select_claims
from repro.claims.runner import CheckRecord
from repro.claims.table import render
from repro.results import DEFAULT_RESULTS, ResultStore, store_records


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="run every local claim; exit non-zero when one fails")
    parser.add_argument("--json", metavar="FILE", help="write the records as a JSON array to FILE")
    parser.add_argument("--claims-dir", default=None, type=existing_dir,
                        help="directory of claims files (default: $REPRO_CLAIMS_DIR, else the claims repro ships)")
    parser.add_argument(
        "--results", metavar="DIR", default=None,
        help=f"results store to read metric results from (default: {DEFAULT_RESULTS} when it exists)",
    )
    parser.add_argument("--store", metavar="DIR", default=None, help="also write each measurement to this results store")
    parser.add_argument("--only", metavar="PREFIX", action="append", default=[], help="only claims whose id starts so")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.set_defaults(func=main)


def progress(record: CheckRecord) -> None:
    """One line per claim on stderr as it finishes."""
    print(f"  {record.status.value:14s} {record.claim.id} ({record.seconds:.1f} s)", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    claims = select_claims("local", args.only, args.claims_dir)
    results_dir = Path(args.results) if args.results else DEFAULT_RESULTS
    results = ResultStore(results_dir).latest() if (args.results or results_dir.exists()) else {}
    records = run_checks(claims, ReproAdapter(), results=results, seed=args.seed, on_record=progress)
    print(render(records))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in records], indent=2, default=str) + "\n")
    if args.store:
        store_records(records, ResultStore(args.store))
    return 1 if any(r.status.broken for r in records) else 0
