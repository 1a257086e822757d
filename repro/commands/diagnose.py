"""``repro diagnose parser-curve|parser-sanity [ARGS...]``: the parser's investigations (issue 18).

The learning curve (``python -m repro.pipeline.parsing_curve``: the local recipe trained on the first
K training trees) and the sanity ladder (``python -m repro.pipeline.parsing_sanity``: memorise N
trees); the ``python -m`` forms still work.
"""

from __future__ import annotations

import argparse
import importlib

DIAGNOSES = {
    "parser-curve": ("repro.pipeline.parsing_curve", "the parser's learning curve over training-set sizes"),
    "parser-sanity": ("repro.pipeline.parsing_sanity", "the sanity ladder: memorise the first N training trees"),
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diagnose", help="the parser's diagnostics: learning curve, sanity ladder",
                            description="\n".join(f"{k:14s} {v[1]}" for k, v in DIAGNOSES.items()),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=sorted(DIAGNOSES), metavar="NAME", help=", ".join(sorted(DIAGNOSES)))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the diagnosis's own flags (NAME --help)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return int(importlib.import_module(DIAGNOSES[args.name][0]).main(args.args) or 0)
