"""``repro reproduce --profile local``: checks, training, averaging, beam search, BLEU and PPL,
with the results written under ``reports/local/`` (the README's first command).
``--profile local-parsing``: the constituency parser of Section 6.3 on the Penn Treebank sample."""

from __future__ import annotations

import argparse
import json
import sys

from repro.argtypes import positive_int
from repro.cli_flags import add_device_argument
from repro.errors import ConfigError
from repro.model.precision import PRECISIONS
from repro.pipeline.local import reproduce_local
from repro.pipeline.parsing import reproduce_parsing_local


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("reproduce", help="run the whole recipe end to end (--profile local: 2-core CPU)")
    parser.add_argument("--profile", default="local", choices=["local", "local-parsing"],
                        help="local: Multi30k on a CPU; local-parsing: the Section 6.3 parser on the PTB sample "
                             "(paper-scale runs go through 'repro submit')")
    parser.add_argument("--out-dir", help="run artifacts (checkpoints, vocab, metrics; default runs/PROFILE)")
    parser.add_argument("--reports", default="reports", metavar="DIR",
                        help="where the report goes (report.md, .html, .json, .csv, figures/); the results it "
                             "reads and the run summary go under DIR/local (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="local: train and evaluate N seeds (the recipe's seed, +1, ...), each in OUT_DIR/seed-S, "
                             "and store the mean with its spread over seeds (default: 1)")
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--fresh", action="store_true", help="delete OUT_DIR first instead of resuming")
    parser.add_argument("--skip-checks", action="store_true", help="do not run the local claims first")
    parser.add_argument("--claims-dir", default=None,
                        help="directory of claims files (default: $REPRO_CLAIMS_DIR, else the claims repro ships)")
    parser.add_argument("--max-steps", type=positive_int, help="override the profile's training steps")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="fp32, bf16 or auto (the recipe's default: bf16 where the CPU computes it natively)")
    add_device_argument(parser, default=None, what="the recipe's own (cpu for the local recipes) when not given")
    parser.add_argument("--test-limit", type=positive_int, metavar="N",
                        help="local-parsing: decode only the first N test sentences (recorded in the result)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    overrides = {}
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise ConfigError(f"--max-steps must be positive, got {args.max_steps}")
        overrides["max_steps"] = args.max_steps
    if args.precision is not None:
        overrides["precision"] = args.precision
    if args.device is not None:
        overrides["device"] = args.device
    out_dir = args.out_dir or f"runs/{args.profile}"
    if args.profile == "local-parsing":
        return _parsing(args, out_dir, overrides)
    if args.test_limit is not None:
        raise ConfigError("--test-limit applies to --profile local-parsing only")
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be positive, got {args.seeds}")
    report = reproduce_local(out_dir=out_dir, reports_dir=f"{args.reports}/local", data_dir=args.data_dir,
                             fresh=args.fresh, checks=not args.skip_checks, overrides=overrides,
                             claims_dir=args.claims_dir, report_dir=args.reports, seeds=args.seeds)
    print(json.dumps({k: report[k] for k in ("sacrebleu", "paper_protocol_bleu", "dev_ppl", "steps",
                                             "wall_minutes_total", "checks")}, indent=2))
    failed = report["checks"].get("failed") or []
    if failed:  # the run and its report are kept; the exit code says the implementation broke a claim
        print(f"repro reproduce: local claims failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _parsing(args: argparse.Namespace, out_dir: str, overrides: dict) -> int:
    if args.seeds != 1:
        raise ConfigError("--seeds applies to --profile local only")
    report = reproduce_parsing_local(out_dir=out_dir, reports_dir=f"{args.reports}/local", data_dir=args.data_dir,
                                     fresh=args.fresh, overrides=overrides, test_limit=args.test_limit)
    print(json.dumps({k: report[k] for k in ("f1", "precision", "recall", "repaired", "at_length_limit",
                                             "test_sentences", "steps", "wall_minutes_total", "stages_s")}, indent=2))
    return 0
