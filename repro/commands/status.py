"""``repro status``: submitted experiments and the states of their jobs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from repro.argtypes import not_blank
from repro.paths import existing_dir
from repro.cluster.experiments import EXPERIMENTS
from repro.cluster.ledger import ENV_STATE_DIR, Ledger, default_state_dir, job_states
from repro.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="list submitted experiments and their jobs' states",
                              description=__doc__)
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="submission ids (default: all)")
    p.add_argument("--state-dir", type=Path, default=None, help="ledger directory (default runs/cluster)")
    p.add_argument("--experiment", default=None, type=not_blank, help="only this experiment's submissions")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--skip-invalid", action="store_true",
                   help="leave out ledger records that are not valid (listing each on stderr) instead of refusing "
                        "the ledger (the default: exit 2 naming the first)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    state_dir = args.state_dir or default_state_dir()
    if args.state_dir is not None or os.environ.get(ENV_STATE_DIR):  # a typo is not "no submissions"
        source = "--state-dir" if args.state_dir is not None else f"${ENV_STATE_DIR}"
        existing_dir(state_dir, f"state directory ({source})")
    ledger = Ledger(state_dir, skip_invalid=args.skip_invalid)
    records = ledger.read_all()
    for _, why in ledger.skipped:
        print(f"repro status: WARNING: skipping invalid ledger record: {why}", file=sys.stderr)
    if args.submissions:
        known = {r.id for r in records}
        unknown = [s for s in args.submissions if s not in known]
        if unknown:
            raise ConfigError(f"{ledger.directory}: no submission {', '.join(unknown)}")
        records = [r for r in records if r.id in args.submissions]
    if args.experiment:   # a typo is not "no submissions" either
        if args.experiment not in EXPERIMENTS and all(r.experiment != args.experiment for r in records):
            raise ConfigError(f"--experiment: no experiment {args.experiment!r} (one of {', '.join(EXPERIMENTS)})")
        records = [r for r in records if r.experiment == args.experiment]
    out = [{**r.to_dict(), "jobs": job_states(r)} for r in records]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if not out:
        print(f"no submissions under {ledger.directory}")
    for sub in out:
        print(f"{sub['id']}  {sub['experiment']}  profile={sub['profile']}  executor={sub['executor']}  "
              f"{sub['created']}")
        for job in sub["jobs"]:
            print(f"  {job['job_id']:>12}  {job['state']:<12} {job['name']}")
    return 0
