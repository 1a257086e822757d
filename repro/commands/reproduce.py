"""``repro reproduce --pipeline local``: checks, training, averaging, beam search, BLEU and PPL,
with the results written under ``reports/local/`` (the README's first command).
``--pipeline local-parsing``: the constituency parser of Section 6.3 on the Penn Treebank sample.
``--pipeline table3-small``: Table 3's base, (A) and (D) rows at scale small, 2 seeds each, and the
verdicts on Section 6.2's conclusions (:mod:`repro.pipeline.table3_small`)."""

from __future__ import annotations

import argparse
import json
import sys

from repro import limits
from repro.argtypes import integer, name_list, output_dir, positive_int
from repro.cli_flags import add_device_argument, add_lineage_argument, deprecated_alias
from repro.errors import ConfigError
from repro.model.precision import PRECISIONS
from repro.pipeline.local import reproduce_local
from repro.pipeline.parsing import reproduce_parsing_local
from repro.pipeline.table3_small import SUBSET, SUBSET_SEEDS, reproduce_table3
from repro.recipes import parse_assignments
from repro.run_lock import run_dir_lock


#: The local jobs ``repro reproduce`` runs (the cluster's experiments go through ``repro submit``).
PIPELINES = ["local", "local-parsing", "table3-small"]
#: what a second run into the same --out-dir is refused about (:mod:`repro.run_lock`)
LOCKED = "run directory (--out-dir)"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("reproduce", help="run the whole recipe end to end (--pipeline local: 2-core CPU)")
    parser.add_argument("--pipeline", dest="profile", default="local", choices=PIPELINES,
                        help="local: Multi30k on a CPU; local-parsing: the Section 6.3 parser on the PTB sample; "
                             "table3-small: Table 3's base, (A) and (D) rows at scale small, 2 seeds each, with the "
                             "verdicts on Section 6.2's conclusions (paper-scale runs go through 'repro submit')")
    parser.add_argument("--profile", dest="profile", choices=PIPELINES, action=deprecated_alias("--pipeline"),
                        help="deprecated: --pipeline")
    parser.add_argument("--out-dir", type=output_dir, help="run artifacts (checkpoints, vocab, metrics; default runs/PROFILE)")
    parser.add_argument("--reports", default="reports", metavar="DIR", type=output_dir,
                        help="where the report goes (report.md, .html, .json, .csv, figures/); the results it "
                             "reads and the run summary go under DIR/local (default: %(default)s)")
    parser.add_argument("--seeds", type=integer, default=None, metavar="N",
                        help="local: train and evaluate N seeds (the recipe's seed, +1, ...), each in OUT_DIR/seed-S, "
                             "and store the mean with its spread over seeds (default: 1); table3-small: seeds 1..N of "
                             f"every row (default: {SUBSET_SEEDS}); at most {limits.SEEDS.soft}, with --force "
                             f"{limits.SEEDS.hard}")
    parser.add_argument("--rows", default=None, metavar="ROW,ROW", type=name_list,
                        help=f"table3-small: the rows of Table 3 to run (default: {','.join(SUBSET)})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="table3-small: change a recipe field of every row, after its change (VALUE as JSON), "
                             "e.g. max_steps=50; the runs' scale names the change")
    parser.add_argument("--force", action="store_true", help=f"allow more than {limits.SEEDS.soft} --seeds")
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--fresh", action="store_true",
                        help="start over instead of resuming: delete what earlier runs of repro wrote in OUT_DIR (as "
                             "its .repro-manifest.json lists), once every input is checked; nothing else in it")
    parser.add_argument("--skip-checks", action="store_true", help="do not run the local claims first")
    parser.add_argument("--claims-dir", default=None,
                        help="directory of claims files (default: $REPRO_CLAIMS_DIR, else the claims repro ships)")
    parser.add_argument("--max-steps", type=positive_int, help="override the profile's training steps")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="fp32, bf16 or auto (the recipe's default: bf16 where the CPU computes it natively)")
    add_device_argument(parser, default=None, what="the recipe's own (cpu for the local recipes) when not given")
    parser.add_argument("--test-limit", type=positive_int, metavar="N",
                        help="local-parsing: decode only the first N test sentences (recorded in the result)")
    add_lineage_argument(parser, "local and local-parsing: resume from, average and evaluate")
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
    if args.profile != "table3-small" and (args.rows is not None or args.overrides):
        raise ConfigError("--rows and --set apply to --pipeline table3-small only")
    if args.profile == "table3-small":
        if args.allow_no_lineage:
            raise ConfigError("--allow-no-lineage applies to --pipeline local and local-parsing only")
        return _table3(args, out_dir, overrides)
    if args.profile == "local-parsing":
        return _parsing(args, out_dir, overrides)
    if args.test_limit is not None:
        raise ConfigError("--test-limit applies to --pipeline local-parsing only")
    seeds = 1 if args.seeds is None else args.seeds
    if seeds < 1:
        raise ConfigError(f"--seeds must be positive, got {seeds}")
    limits.SEEDS.check(seeds, force=args.force)
    with run_dir_lock(out_dir, LOCKED):
        report = reproduce_local(out_dir=out_dir, reports_dir=f"{args.reports}/local", data_dir=args.data_dir,
                                 fresh=args.fresh, checks=not args.skip_checks, overrides=overrides,
                                 claims_dir=args.claims_dir, report_dir=args.reports, seeds=seeds,
                                 allow_no_lineage=args.allow_no_lineage)
    print(json.dumps({k: report[k] for k in ("sacrebleu", "paper_protocol_bleu", "dev_ppl", "steps",
                                             "wall_minutes_total", "checks")}, indent=2))
    failed = report["checks"].get("failed") or []
    if failed:  # the run and its report are kept; the exit code says the implementation broke a claim
        print(f"repro reproduce: local claims failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _table3(args: argparse.Namespace, out_dir: str, overrides: dict) -> int:
    if args.test_limit is not None:
        raise ConfigError("--test-limit applies to --pipeline local-parsing only")
    seeds = SUBSET_SEEDS if args.seeds is None else args.seeds
    if seeds < 1:
        raise ConfigError(f"--seeds must be positive, got {seeds}")
    limits.SEEDS.check(seeds, force=args.force)
    rows = args.rows if args.rows is not None else SUBSET
    precision = overrides.pop("precision", None)
    with run_dir_lock(out_dir, LOCKED):
        report = reproduce_table3(scale="small", rows=rows, seeds=seeds, out_dir=out_dir,
                                  reports_dir=f"{args.reports}/local", data_dir=args.data_dir, fresh=args.fresh,
                                  overrides={**parse_assignments(args.overrides), **overrides}, precision=precision,
                                  claims_dir=args.claims_dir, report_dir=args.reports)
    print(json.dumps({"scale": report["scale"], "signature": report["signature"], "jobs_run": report["jobs_run"],
                      "jobs_left_out": report["jobs_left_out"], "seconds_per_row": report["seconds_per_row"],
                      "seconds_all_jobs": report["seconds_all_jobs"],
                      "wall_minutes_total": report["wall_minutes_total"],
                      "verdicts": {v["id"]: v["verdict"] for v in report["verdicts"]}}, indent=2))
    return 0


def _parsing(args: argparse.Namespace, out_dir: str, overrides: dict) -> int:
    if args.seeds not in (None, 1):
        raise ConfigError("--seeds applies to --pipeline local only")
    with run_dir_lock(out_dir, LOCKED):
        report = reproduce_parsing_local(out_dir=out_dir, reports_dir=f"{args.reports}/local",
                                         data_dir=args.data_dir, fresh=args.fresh, overrides=overrides,
                                         test_limit=args.test_limit, allow_no_lineage=args.allow_no_lineage)
    print(json.dumps({k: report[k] for k in ("f1", "precision", "recall", "repaired", "at_length_limit",
                                             "test_sentences", "steps", "wall_minutes_total", "stages_s")}, indent=2))
    return 0
