"""The ``repro`` command line.

Each sub-command lives in its own module under ``repro.commands`` and exposes
``register(subparsers)``; this file only discovers and dispatches them, so adding a
command never means editing this file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

import repro.commands
from repro.errors import WRITE_FAULTS, ReproError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (``repro train: error: argument --seed: ...``)
    and exits 2, like every other refusal of bad input; ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="repro",
        description='Reproduction harness for "Attention Is All You Need" (Vaswani et al., 2017).',
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(repro.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"repro.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ReproError as err:
        print(f"repro: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:
        if err.errno not in WRITE_FAULTS:
            raise
        # a write outside repro.atomic (a log appended to) met a full disk or a read-only folder
        where = err.filename or "a file"
        print(f"repro: error: {where}: cannot write ({err.strerror or os.strerror(err.errno)})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("repro: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`repro claims list | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
