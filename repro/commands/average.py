"""``repro average``: average the last k checkpoints of a run into one model (Section 6.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from repro import paths
from repro.argtypes import existing_dir, existing_file, output_file, positive_int
from repro.cli_flags import add_device_argument, add_lineage_argument, runtime_from_args
from repro.errors import UsageError
from repro.train.average import average_last, write_average
from repro.train.checkpoint import list_checkpoints


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("average", help="average the last K checkpoints of a run (base: 5, big: 20)")
    parser.add_argument("run_dir", nargs="?", type=existing_dir, help="run directory holding checkpoints/")
    parser.add_argument("--last", type=positive_int, default=5, help="how many of the newest checkpoints (default 5)")
    parser.add_argument("--checkpoints", nargs="+", metavar="CKPT", type=existing_file, help="average these files instead")
    parser.add_argument("-o", "--output", type=output_file, help="output file (default RUN_DIR/average_lastK.pt)")
    add_device_argument(parser, default="cpu", what="where the checkpoints are loaded and averaged (the file "
                                                    "written holds CPU tensors either way)")
    add_lineage_argument(parser, "average")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.checkpoints:
        if not args.output:
            raise UsageError("--checkpoints needs --output")
        paths.not_an_input(args.output, args.checkpoints, "averaged checkpoint (--output)")
        out = write_average(args.checkpoints, args.output, device=runtime_from_args(args, "average").device,
                            allow_no_lineage=args.allow_no_lineage)
    elif args.run_dir:
        if args.output is None:  # the default output lies in the run directory
            paths.output_file(Path(args.run_dir) / f"average_last{args.last}.pt", "averaged checkpoint")
        paths.not_an_input(args.output, list_checkpoints(args.run_dir)[-args.last:], "averaged checkpoint (--output)")
        out = average_last(args.run_dir, args.last, args.output, device=runtime_from_args(args, "average").device,
                           allow_no_lineage=args.allow_no_lineage)
    else:
        raise UsageError("give a run directory or --checkpoints")
    print(out)
    return 0
