"""``repro table3``: Table 3 at a named scale: the mapping of every row, and what was measured.

``repro table3 --scale small`` prints each row of Table 3 as the paper prints it beside the same row
at the scale (the recipe table, :class:`repro.recipes.Scale`): its cells and parameter count.
``--results DIR`` adds the measured rows (mean over seeds, 95% interval) and the verdict on each of
Section 6.2's conclusions; ``--json`` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from repro.argtypes import existing_dir
from repro.checks import select_claims
from repro.model import TABLE3_ROWS, Transformer, count_parameters
from repro.model.table3 import changes, get_row
from repro.recipes import SCALES, get_scale
from repro.report.values import show
from repro.scaled.rows import collect
from repro.scaled.verdicts import evaluate_all


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("table3", help="Table 3 at a named scale: each row's change, and the measured rows and verdicts",
                       description=__doc__)
    p.add_argument("--scale", choices=sorted(SCALES), default="small", help="the scale (default: %(default)s)")
    p.add_argument("--results", action="append", type=existing_dir, default=[], metavar="DIR",
                   help="results store(s) to read the scale's measured rows from (repeatable)")
    p.add_argument("--claims-dir", default=None, help="claims directory (default: the claims repro ships)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=main)


def mapping(scale_name: str) -> list[dict[str, Any]]:
    """Each row: the paper's cells and the cells at the scale, the recipe, the parameter count at the
    recipe's vocabulary size."""
    scale = get_scale(scale_name)
    base = scale.cells()
    out = []
    for row in TABLE3_ROWS:
        recipe = scale.row(row)
        change = changes(row, base)
        with torch.device("meta"):
            params = count_parameters(Transformer(recipe.train.model_config(recipe.train.vocab_size)))
        out.append({"row": row, "group": get_row(row).group, "paper": get_row(row).label,
                    "paper_cells": dict(get_row(row).cells), "cells": change.cells if row != "base" else base,
                    "recipe": recipe.name, "parameters": params, "vocab_size": recipe.train.vocab_size})
    return out


def main(args: argparse.Namespace) -> int:
    scale = get_scale(args.scale)
    # the records first: a malformed or contradictory one is refused before the rows are counted
    table = collect([Path(d) for d in args.results]).get(scale.name) if args.results else None
    rows = mapping(args.scale)
    payload: dict[str, Any] = {"scale": scale.name, "description": scale.description,
                               "base": scale.cells(), "rows": rows}
    if args.results:
        claims = select_claims(claims_dir=args.claims_dir)
        payload["measured"] = None if table is None else {
            "signature": table.signature, "scale_texts": table.scale_texts, "notes": table.notes,
            "rows": {row: {**{m: {"mean": x.mean, "ci95": list(x.ci95), "seeds": x.summary.values}
                              for m, x in entry.metrics.items()}, "parameters": entry.parameters}
                     for row, entry in table.rows.items()}}
        payload["verdicts"] = [v.to_dict() for v in evaluate_all(claims, {scale.name: table})] if table else []
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
        return 0
    print(f"Table 3 at scale {scale.name}: {scale.description}; base row {_cells(scale.cells())}")
    print("each row is the scale's base with the paper's change: sizes by the paper's ratio, rates and kinds as "
          "printed (repro/model/table3.py)")
    print(f"  {'row':<11} {'the paper':<52} {'at scale ' + scale.name:<52} params (vocabulary {rows[0]['vocab_size']})")
    for r in rows:
        at_scale = "(the base row)" if r["row"] == "base" else _cells(r["cells"])
        paper = "(the base row)" if r["row"] == "base" else _cells(r["paper_cells"])
        print(f"  {r['row']:<11} {paper:<52} {at_scale:<52} {r['parameters'] / 1e6:.2f}M")
    if args.results:
        measured = payload["measured"]
        if measured is None:
            print(f"no result of Table 3 at scale {scale.name} under {', '.join(args.results)}")
            return 0
        print(f"measured (signature {measured['signature']}): dev PPL and BLEU, mean over seeds [95% interval]")
        for row, entry in measured["rows"].items():
            cells = "  ".join(f"{m.upper()} {x['mean']:.2f} [{x['ci95'][0]:.2f}, {x['ci95'][1]:.2f}] "
                              f"({len(x['seeds'])} seed(s))" for m, x in entry.items() if m != "parameters")
            print(f"  {row:<11} {cells}")
        print("Section 6.2's conclusions (paper's figure beside the measured difference):")
        for v in payload["verdicts"]:
            note = f"  ({v['note']})" if v["note"] else ""
            print(f"  {v['id']:<34} {v['verdict']:<13} paper: {show(v['paper'])}{note}")
            for p in v["parts"]:
                print(f"      {p['part']}: paper {p['paper']:+.2f}, measured {p['measured']:+.2f} "
                      f"[{p['ci95'][0]:+.2f}, {p['ci95'][1]:+.2f}] {p['verdict']}")
    return 0


def _cells(cells: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in cells.items())
