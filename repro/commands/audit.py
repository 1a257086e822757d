"""``repro audit TARGET [--json FILE]``: check a Transformer implementation against the paper.

TARGET is ``module:factory``; ``factory()`` returns an adapter (:mod:`repro.audit.adapter`).
Prints one row per claim that measures an implementation: its status and why. Exit code 1
when an applicable claim fails or errs, 0 otherwise ("not applicable" never counts as passed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro.atomic import atomic_write_text
from repro.audit.audit import AuditRecord, auditable_claims, broken, render_audit, run_audit
from repro.audit.load import load_adapter
from repro.claims import Outcome


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit", help="check any Transformer implementation (an adapter 'module:factory') against the paper's claims"
    )
    parser.add_argument("target", metavar="TARGET", help="module:factory returning an adapter, e.g. repro.audit.torch_adapter:adapter")
    parser.add_argument("--json", metavar="FILE", help="write the records as a JSON array to FILE")
    parser.add_argument("--claims-dir", default=None, help="directory of claims files (default: claims/)")
    parser.add_argument("--only", metavar="PREFIX", action="append", default=[], help="only claims whose id starts so")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    adapter = load_adapter(args.target)
    claims = auditable_claims(args.claims_dir, args.only)

    def progress(record: AuditRecord) -> None:
        print(f"  {record.status.value:14s} {record.claim.id} ({record.check.seconds:.1f} s)", file=sys.stderr)

    records = run_audit(adapter, claims, seed=args.seed, on_record=progress)
    print(render_audit(records))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in records], indent=2, default=str) + "\n")
    if all(r.status == Outcome.NOT_APPLICABLE for r in records):
        print(f"repro audit: {adapter.name} exposes no part any claim needs: nothing was checked", file=sys.stderr)
    return 1 if broken(records) else 0
