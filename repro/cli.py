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

import repro.commands
from repro.argtypes import OneLineParser
from repro.errors import PATH_FAULTS, WRITE_FAULTS, ReproError
from repro.files.text_decoding import one_line
from repro.machine_memory import available_note, out_of_memory


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
    try:
        args = parser.parse_args(argv)   # a flag's type may meet a path the system refuses (a name too long)
        code = int(args.func(args) or 0)
        sys.stdout.flush()   # a closed pipe is met here, not in the interpreter's last flush
        return code
    except ReproError as err:
        print(one_line(f"repro: error: {err}"), file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # the reader went away (`repro claims list | head -1`): stop quietly
        _quiet_stdout()
        return 0
    except OSError as err:
        if err.errno in WRITE_FAULTS:   # a write met a full disk or a read-only folder
            what = "cannot write"
        elif err.errno in PATH_FAULTS and err.filename is not None:   # a path the system refuses to look at
            what = "cannot use this path"
        else:
            raise
        where = err.filename or "a file"
        print(one_line(f"repro: error: {where}: {what} ({err.strerror or os.strerror(err.errno)})"), file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as err:
        if not out_of_memory(err):
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        print(f"repro: error: too large for this machine: an allocation failed ({first}); "
              f"{available_note()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("repro: interrupted", file=sys.stderr)
        return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)   # not a file repro reads or writes: the null device
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
