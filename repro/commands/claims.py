"""``repro claims list [--json]``, ``repro claims show ID`` and ``repro claims coverage [--json]``."""

from __future__ import annotations

import argparse
import json

from repro.argtypes import existing_dir
from repro.checks import select_claims
from repro.claims import default_claims_dir
from repro.claims.coverage import coverage, load_statements
from repro.claims.table import format_value
from repro.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("claims", help="list or show the paper's claims (claims/*.toml)")
    parser.add_argument("--claims-dir", default=None, type=existing_dir, help="directory of claims files (default: claims/)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    ls = actions.add_parser("list", help="one line per claim")
    ls.add_argument("--json", action="store_true", help="print a JSON array of claims")
    ls.set_defaults(func=list_claims)
    show = actions.add_parser("show", help="everything about one claim")
    show.add_argument("id")
    show.set_defaults(func=show_claim)
    cov = actions.add_parser("coverage", help="the paper's checkable statements (statements.csv) against the claims")
    cov.add_argument("--json", action="store_true", help="print the statements with their coverage as JSON")
    cov.set_defaults(func=coverage_of_claims)


def _as_dict(claim) -> dict:
    return {
        "id": claim.id, "source": claim.source, "kind": claim.kind, "scale": claim.scale,
        "statement": claim.statement, "expected": claim.expected, "tolerance": claim.tolerance or None,
        "rounding": claim.rounding, "bound": claim.bound, "unit": claim.unit, "checker": claim.checker,
        "basis": claim.basis, "target": claim.target, "params": claim.params,
        "notes": claim.notes, "inconsistency": claim.inconsistency,
        "inconsistency_bound": claim.inconsistency_bound or None, "file": claim.file,
    }


def list_claims(args: argparse.Namespace) -> int:
    claims = select_claims(claims_dir=args.claims_dir)
    if args.json:
        print(json.dumps([_as_dict(c) for c in claims], indent=2))
        return 0
    for c in claims:
        print(f"{c.id:42s} {c.kind:14s} {c.scale:7s} {c.source:34s} {c.value_label}: {format_value(c.expected, 40)}")
    return 0


def show_claim(args: argparse.Namespace) -> int:
    claims = {c.id: c for c in select_claims(claims_dir=args.claims_dir)}
    if args.id not in claims:
        raise UsageError(f"no claim with id '{args.id}' (see 'repro claims list')")
    for key, value in _as_dict(claims[args.id]).items():
        if value not in (None, "", {}):
            print(f"{key:14s} {value}")
    return 0


def coverage_of_claims(args: argparse.Namespace) -> int:
    """How the paper's statements are covered: on the code path, through a proxy, by a run, by
    settings only, by the paper's own arithmetic, or not at all (claims/statements.csv)."""
    claims = select_claims(claims_dir=args.claims_dir)
    statements = load_statements(args.claims_dir or default_claims_dir())
    groups = coverage(statements, claims)

    def entry(s) -> dict:
        return {"id": s.id, "section": s.section, "statement": s.statement, "claims": list(s.claims),
                "evidence": s.evidence, "note": s.note}

    known = {c.id: c for c in claims}
    observed = {e: [s for s in group if s.observed_on_a_run(known)] for e, group in groups.items()}
    if args.json:
        # "behaviour", "setting" and "none" as before (measured, read, unchecked); "evidence" splits them;
        # "observed on a run": the statements also checked on a run's own records (repro check --run)
        measured = [s for e in ("code path", "proxy", "run") for s in groups[e]]
        print(json.dumps({"behaviour": [entry(s) for s in measured], "setting": [entry(s) for s in groups["setting"]],
                          "none": [entry(s) for s in groups["none"]],
                          "paper arithmetic": [entry(s) for s in groups["paper arithmetic"]],
                          "evidence": {e: [entry(s) for s in group] for e, group in groups.items()},
                          "observed on a run": {e: [s.id for s in group] for e, group in observed.items()}}, indent=2))
        return 0
    labels = {"code path": "measured on the code that produces the paper's numbers",
              "proxy": "measured through a proxy (the note says which)", "run": "the result of a run",
              "setting": "read from settings only", "paper arithmetic": "the paper's own arithmetic, no code measured",
              "none": "not checked"}
    print(f"{len(statements)} checkable statements of the paper (claims/statements.csv), and how many of each kind "
          "are also observed on a run's own records (repro check --run DIR):")
    for name, group in groups.items():
        print(f"  {len(group):4d} {labels[name]:55s} {len(observed[name]):4d} observed on a run")
    print(f"  {sum(map(len, observed.values())):4d} in all observed on a run")
    for name in ("proxy", "setting", "paper arithmetic", "none"):
        for st in groups[name]:
            print(f"{name:17s} {st.id} ({st.section}) {st.statement}" + (f" -- {st.note}" if st.note else ""))
    return 0
