"""``repro check [--json FILE]``: run every local claim against repro's own implementation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro.claims import load_claims
from repro.claims.runner import CheckRecord, run_checks
from repro.claims.table import render
from repro.errors import ReproError
from repro.results import Result, ResultStore, collect_provenance
from repro.atomic import atomic_write_text

DEFAULT_RESULTS = Path("reports/local/results")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="run every local claim; exit non-zero when one fails")
    parser.add_argument("--json", metavar="FILE", help="write the records as a JSON array to FILE")
    parser.add_argument("--claims-dir", default=None, help="directory of claims files (default: claims/)")
    parser.add_argument(
        "--results", metavar="DIR", default=None,
        help=f"results store to read metric results from (default: {DEFAULT_RESULTS} when it exists)",
    )
    parser.add_argument("--store", metavar="DIR", default=None, help="also write each measurement to this results store")
    parser.add_argument("--only", metavar="PREFIX", action="append", default=[], help="only claims whose id starts so")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=main)


def store_records(records: list[CheckRecord], store: ResultStore) -> None:
    """Write measured records (pass/fail) to a results store with this process's provenance."""
    for r in records:
        if r.status not in ("pass", "fail", "paper inconsistent") or r.claim.checker == "metric.result":
            continue
        prov = collect_provenance(
            config={"claim": r.claim.id, "params": r.claim.params}, dataset="none (equation-level check)",
            scale="local: equation-level check on the CPU",
        )
        store.write(Result(r.claim.id, r.measured, prov, unit=r.unit or r.claim.unit, status=r.status, detail=r.detail,
                           extra=r.extra))


def main(args: argparse.Namespace) -> int:
    claims = [c for c in load_claims(args.claims_dir) if c.scale == "local"]
    if args.only:
        claims = [c for c in claims if any(c.id.startswith(p) for p in args.only)]
        if not claims:
            raise ReproError(f"no local claim id starts with {', '.join(args.only)}")
    results_dir = Path(args.results) if args.results else DEFAULT_RESULTS
    results = ResultStore(results_dir).latest() if (args.results or results_dir.exists()) else {}

    def progress(record: CheckRecord) -> None:
        print(f"  {record.status:14s} {record.claim.id} ({record.seconds:.1f} s)", file=sys.stderr)

    records = run_checks(claims, results=results, seed=args.seed, on_record=progress)
    print(render(records))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in records], indent=2, default=str) + "\n")
    if args.store:
        store_records(records, ResultStore(args.store))
    return 1 if any(r.status in ("fail", "error") for r in records) else 0
