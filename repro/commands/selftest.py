"""``repro selftest --device cuda [--json PATH] [--quick] [--budget SECONDS]``: the acceptance run of a machine
(:mod:`repro.selftest`); exit 1 when a stage fails, 2 on bad flags."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path

from repro.argtypes import name_list, output_dir, output_file, positive_float
from repro.cli_flags import add_device_argument
from repro.data.corpora import resolve_data_dir
from repro.errors import ConfigError, UsageError
from repro.run_lock import refuse_nested
from repro.runtime import Runtime
from repro.selftest import STAGE_NAMES, readable_path, render, run_selftest


def _stages(text: str) -> list[str]:
    try:
        names = list(name_list(text))
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"stages must be a comma-separated list of {', '.join(STAGE_NAMES)}: "
                                         f"{err}") from None
    unknown = [s for s in names if s not in STAGE_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"stages must be a comma-separated list of {', '.join(STAGE_NAMES)}"
                                         f"; unknown: {', '.join(unknown)}")
    return names


def _summary_path(text: str) -> str:
    """``--json``: a file the JSON summary can be written to, and beside it (``.md``) the readable one."""
    output_file(text)
    try:
        readable = readable_path(Path(text))
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    output_file(str(readable))
    return text


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("selftest", help="the acceptance run of a machine: tests, claims, benchmarks, reduced jobs",
                            description=__doc__)
    add_device_argument(parser, default="auto", what="the device under test")
    parser.add_argument("--quick", action="store_true",
                        help="every stage at toy size (CI runs `repro selftest --device cpu --quick`)")
    parser.add_argument("--json", metavar="PATH", type=_summary_path, default=None,
                        help="the JSON summary (default OUT_DIR/selftest.json); the readable one beside it (.md)")
    parser.add_argument("--out-dir", metavar="DIR", type=output_dir, default=None,
                        help="where the stages write (default runs/selftest/<UTC time>)")
    parser.add_argument("--data-dir", default=None, help="the shared data sets (default: REPRO_DATA_DIR)")
    parser.add_argument("--stages", type=_stages, default=list(STAGE_NAMES), metavar="NAME,NAME",
                        help=f"only these stages (default all: {','.join(STAGE_NAMES)})")
    parser.add_argument("--budget", metavar="SECONDS", type=positive_float, default=None,
                        help="bound the run: a stage whose estimate no longer fits in what is left is skipped "
                             "(reason: budget); the summary is rewritten after every stage in any case")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    runtime = Runtime.device_only(args.device, why="selftest: each stage resolves its own precision")
    data_dir = resolve_data_dir(args.data_dir)
    if not data_dir.is_dir():
        raise ConfigError(f"{data_dir}: the data directory does not exist (--data-dir or REPRO_DATA_DIR)")
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    out_dir = Path(args.out_dir) if args.out_dir else Path("runs") / "selftest" / stamp
    refuse_nested(out_dir, "selftest folder (--out-dir)")   # its stages train runs there: never inside another run
    json_path = Path(args.json) if args.json else out_dir / "selftest.json"
    summary = run_selftest(runtime, quick=args.quick, out_dir=out_dir.resolve(), data_dir=data_dir,
                           stages=args.stages, say=lambda msg: print(f"repro selftest: {msg}", file=sys.stderr,
                                                                        flush=True),
                           json_path=json_path, budget=args.budget)
    readable = readable_path(json_path)
    print(render(summary), end="")
    print(f"repro selftest: summary in {json_path} and {readable}", file=sys.stderr)
    return 0 if summary["ok"] else 1
