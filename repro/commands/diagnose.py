"""``repro diagnose parser-curve|parser-sanity [ARGS...]``: the parser's investigations (issue 18).

The learning curve (``python -m repro.pipeline.parsing_curve``: the local recipe trained on the first
K training trees) and the sanity ladder (``python -m repro.pipeline.parsing_sanity``: memorise N
trees); the ``python -m`` forms still work.
"""

from __future__ import annotations

import argparse
import importlib

from repro.cli_flags import add_pass_through

DIAGNOSES = {
    "parser-curve": ("repro.pipeline.parsing_curve", "the parser's learning curve over training-set sizes"),
    "parser-sanity": ("repro.pipeline.parsing_sanity", "the sanity ladder: memorise the first N training trees"),
}


def register(sub: argparse._SubParsersAction) -> None:
    add_pass_through(sub, "diagnose", "the parser's diagnostics: learning curve, sanity ladder",
                     {name: what for name, (_, what) in DIAGNOSES.items()},
                     lambda name, rest: importlib.import_module(DIAGNOSES[name][0]).main(rest))
