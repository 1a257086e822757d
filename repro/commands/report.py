"""``repro report [--results DIR]... [--out DIR]``: claims beside every measured result, as
``report.md``, ``report.html``, ``report.json`` and ``report.csv`` (plus ``figures/``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repro.argtypes import existing_dir as existing_dir_arg
from repro.argtypes import output_dir as output_dir_arg
from repro.argtypes import sentence
from repro.checks import select_claims
from repro.claims.loader import known_values
from repro.report import FIGURE3_SENTENCE, OUTPUTS, generate
from repro.errors import ResultError
from repro.paths import existing_dir, outside_inputs, output_dir, output_file
from repro.results import DEFAULT_RESULTS, ResultStore

DEFAULT_OUT = Path("reports")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="write the reproduction report (Markdown, HTML, JSON, CSV)")
    parser.add_argument("--results", metavar="DIR", action="append", default=[],
                        help=f"results store to read (repeatable; default {DEFAULT_RESULTS})")
    parser.add_argument("--out", metavar="DIR", default=str(DEFAULT_OUT), type=output_dir_arg,
                        help=f"output folder (default {DEFAULT_OUT}/)")
    parser.add_argument("--claims-dir", default=None, type=existing_dir_arg, help="directory of claims files (default: claims/)")
    parser.add_argument("--runs", metavar="DIR", action="append", default=[],
                        help="training run directory (metrics.csv, checkpoints/) to draw; repeatable")
    parser.add_argument("--attention-sentence", default=FIGURE3_SENTENCE, type=sentence,
                        help="source sentence for the attention maps (default: the input of Figure 3)")
    parser.add_argument("--no-attention", action="store_true", help="skip the attention maps")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="leave out result records that are not valid (listing each on stderr) instead of "
                             "refusing the store (the default: exit 2 naming the first bad record)")
    parser.set_defaults(func=main)


def skipped_records(result_dirs: list[Path], claims_dir: str | None = None) -> list[tuple[Path, str]]:
    """Every malformed record and stray file under ``result_dirs`` (path, why), read before any
    report is written; records are checked against the claims too (:mod:`repro.results.record_schema`)."""
    select_claims(claims_dir=claims_dir)  # the claims themselves first: a bad claims file is named before any record
    expected = known_values(claims_dir)
    skipped: list[tuple[Path, str]] = []
    for directory in result_dirs:
        store = ResultStore(existing_dir(directory, "results directory (--results)"), skip_invalid=True,
                            expected=expected)
        store.read_all()
        skipped.extend(store.skipped)
    return skipped


def main(args: argparse.Namespace) -> int:
    result_dirs = [Path(d) for d in args.results] or [DEFAULT_RESULTS]
    outside_inputs(args.out, [(d, "results store", None) for d in result_dirs], "report folder (--out)")
    for name in (*OUTPUTS, "figures/"):  # each file the report replaces, before any record is read
        (output_dir if name.endswith("/") else output_file)(Path(args.out) / name, f"report {name.rstrip('/')}")
    for run_dir in args.runs:
        existing_dir(run_dir, "run directory (--runs)")
    skipped = skipped_records(result_dirs, args.claims_dir)
    if skipped and not args.skip_invalid:
        more = f" (and {len(skipped) - 1} more invalid records)" if len(skipped) > 1 else ""
        raise ResultError(f"{skipped[0][1]}{more}; fix or remove it, or pass --skip-invalid to report without it")
    for _, why in skipped:
        print(f"repro report: WARNING: skipping invalid result record or stray file: {why}", file=sys.stderr)
    doc = generate(
        result_dirs, Path(args.out), claims_dir=args.claims_dir, run_dirs=[Path(r) for r in args.runs],
        attention_sentence=None if args.no_attention else args.attention_sentence, skip_invalid=args.skip_invalid,
    )
    counts = ", ".join(f"{n} {s}" for s, n in doc.data.counts().items() if n)
    print(f"wrote {args.out}/report.md, report.html, report.json, report.csv "
          f"({len(doc.figures.figures)} figures): {counts}")
    for note in doc.notes:
        print(f"  note: {note}", file=sys.stderr)
    if skipped:
        print(f"repro report: WARNING: {len(skipped)} invalid result record(s) were left out of this report "
              "(listed above); claims measured only by them show as not run", file=sys.stderr)
    return 0
