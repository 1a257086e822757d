"""``repro audit TARGET [--json FILE]`` and ``repro audit --zoo [--out DIR]``: check Transformer
implementations against the paper.

TARGET is ``module:factory``; ``factory()`` returns an adapter (:mod:`repro.audit.adapter`).
Prints one row per claim that measures an implementation: its status and why. Exit code 1
when an applicable claim fails or errs, 0 otherwise ("not applicable" never counts as passed).

``--zoo`` audits every installed adapter of the zoo (:mod:`repro.audit.zoo`; ``pip install -e
.[zoo]`` installs the libraries) and writes the side-by-side report (zoo.md, zoo.html, zoo.json)
into ``--out`` (default ``reports/audit``); exit code 0 once it is written, departures included:
finding them is its purpose.

``--device`` (default cpu) builds the implementation's parts on that device and runs them there,
fed the checks' seeded CPU inputs (:mod:`repro.audit.on_device`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro.argtypes import claim_prefix, existing_dir, output_dir, output_file, seed
from repro.files.writer import atomic_write_text
from repro.audit.audit import AuditRecord, auditable_claims, broken, render_audit, run_audit
from repro.audit.load import load_adapter
from repro.audit.on_device import on_device
from repro.audit.side_by_side import run_zoo
from repro.audit.side_by_side_render import write_zoo
from repro.audit.zoo import ZOO, ZooEntry, installed_entries
from repro.claims import Outcome
from repro.claims.loader import as_input as claims_folder
from repro.cli_flags import add_device_argument, runtime_from_args
from repro.errors import ReproError
from repro.paths import outside_inputs
from repro.runtime import Runtime


class AuditUsageError(ReproError):
    exit_code = 2


#: The exit code of an audit in which every claim was "not applicable" (docs/exit-codes.md).
NOTHING_CHECKED = 3


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit", help="check any Transformer implementation (an adapter 'module:factory') against the paper's claims"
    )
    parser.add_argument("target", metavar="TARGET", nargs="?",
                        help="module:factory returning an adapter, e.g. repro.audit.torch_adapter:adapter")
    parser.add_argument("--json", metavar="FILE", type=output_file, help="write the records as a JSON array to FILE")
    parser.add_argument("--zoo", action="store_true",
                        help="audit every installed implementation of the zoo side by side (pip install -e .[zoo])")
    parser.add_argument("--out", metavar="DIR", default=None, type=output_dir,
                        help="with --zoo: folder for zoo.md, zoo.html, zoo.json (default: reports/audit)")
    parser.add_argument("--zoo-only", metavar="KEY", action="append", default=[],
                        help=f"with --zoo: only these columns ({', '.join(e.key for e in ZOO)})")
    parser.add_argument("--claims-dir", default=None, type=existing_dir,
                        help="directory of claims files (default: $REPRO_CLAIMS_DIR, else the checkout's claims/, "
                             "else the claims shipped in the package)")
    parser.add_argument("--only", metavar="PREFIX", action="append", default=[], type=claim_prefix, help="only claims whose id starts so")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random inputs (0 .. 2**31 - 1)")
    add_device_argument(parser, default="cpu", what="the implementation's parts are built and run there, fed the "
                                                    "checks' seeded CPU inputs")
    parser.set_defaults(func=main)


def _runtime(args: argparse.Namespace) -> Runtime:
    """Where ``--device`` builds and runs the implementation's parts, said on stderr off the CPU."""
    runtime = runtime_from_args(args, "audit", resolve_precision=False)
    if runtime.on_gpu:
        print(f"repro audit: the implementation's parts are built and run on {runtime.device}", file=sys.stderr)
    return runtime


def main(args: argparse.Namespace) -> int:
    if args.zoo:
        return zoo_main(args)
    if args.target is None:
        raise AuditUsageError("repro audit: give a TARGET (module:factory) or --zoo")
    if args.out or args.zoo_only:
        raise AuditUsageError("repro audit: --out and --zoo-only go with --zoo")
    outside_inputs(args.json, [claims_folder(args.claims_dir)], "JSON output (--json)")
    adapter = load_adapter(args.target)
    claims = auditable_claims(args.claims_dir, args.only)
    runtime = _runtime(args)

    def progress(record: AuditRecord) -> None:
        print(f"  {record.status.value:14s} {record.claim.id} ({record.check.seconds:.1f} s)", file=sys.stderr)

    records = run_audit(on_device(adapter, runtime), claims, seed=args.seed, on_record=progress)
    print(render_audit(records))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in records], indent=2, default=str) + "\n")
    if all(r.status == Outcome.NOT_APPLICABLE for r in records):
        # a check never passes because nothing ran: exit 3, not 0 (docs/exit-codes.md)
        print(f"repro audit: {adapter.name} exposes no part any claim needs: nothing was checked", file=sys.stderr)
        return NOTHING_CHECKED
    return 1 if broken(records) else 0


def zoo_main(args: argparse.Namespace) -> int:
    if args.target is not None or args.json:
        raise AuditUsageError("repro audit --zoo takes no TARGET and no --json (it writes zoo.json into --out)")
    unknown = sorted(set(args.zoo_only) - {e.key for e in ZOO})
    if unknown:
        raise AuditUsageError(f"repro audit --zoo-only: unknown column {', '.join(unknown)} "
                              f"(the zoo has {', '.join(e.key for e in ZOO)})")
    entries = installed_entries(args.zoo_only or None)
    if not entries:
        raise AuditUsageError("repro audit --zoo: none of the selected implementations is installed (pip install -e .[zoo])")
    claims = auditable_claims(args.claims_dir, args.only)
    runtime = _runtime(args)

    def progress(entry: ZooEntry, record: AuditRecord) -> None:
        print(f"  {entry.key:16s} {record.status.value:14s} {record.claim.id} ({record.check.seconds:.1f} s)",
              file=sys.stderr)

    zoo = run_zoo(entries, claims, seed=args.seed, on_record=progress, runtime=runtime)
    paths = write_zoo(zoo, args.out or Path("reports") / "audit")
    for column in zoo.columns:
        counts = {}
        for cell in column.cells.values():
            counts[cell.category] = counts.get(cell.category, 0) + 1
        state = column.error or ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        print(f"{column.entry.key:16s} {column.name or '-'}: {state} ({column.seconds:.0f} s)")
    for entry in zoo.missing:
        print(f"{entry.key:16s} not installed ({entry.distribution}: pip install -e .[zoo])")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
