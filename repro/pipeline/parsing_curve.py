"""The local parser's learning curve: F1 against the number of training trees (issue 18's diagnosis).

Is the Penn Treebank sample too small, or is the run too short? For each size K, the
``local-parsing`` recipe is trained from scratch on the first K training trees of the sample (in
file order, so a smaller set is a prefix of a larger one) with the same number of updates, so the
smaller sets see more epochs; its vocabulary is learned from those K trees, as a run on K trees
would learn it. Every run logs train and dev NLL and greedy dev F1 at its checkpoints
(:class:`repro.pipeline.parsing.ParserProbe`), and its last checkpoint parses all test sentences
with Section 6.3's search and with greedy search. If F1 grows with K at a fixed budget, the sample
limits the run; if it stays flat while the training NLL stays near the dev NLL, the budget does.

The full size need not be trained twice: the summary of ``repro reproduce --pipeline local-parsing``
(``REPORTS/local_parsing_run.json``) is taken as its point when it ran the same recipe on the same
target units. The units are the recipe's (``Recipe.targets``); ``--targets`` (the same as
``--set targets=...``) picks the other: per-word tokens (:mod:`repro.parsing.linearize`) or
Vinyals & Kaiser et al.'s symbols.

    python -m repro.pipeline.parsing_curve [--sizes 400 800 1600] [--reports reports/local] [--targets symbols]

writes ``REPORTS/parsing_curve.json``; run artifacts go to ``runs/parsing-curve/trees-K``
(``runs/parsing-curve-per-word`` on per-word tokens).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from repro.argtypes import OneLineParser, positive_int
from repro.files import reader
from repro.data.text_lines import read_lines
from repro.files.writer import atomic_write_text, make_dirs
from repro.data.corpora import resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.translate import load_model
from repro.errors import ConfigError, ReproError
from repro.parsing.scoring import score_outputs
from repro.parsing.linearize import TARGET_UNITS
from repro.parsing.prepare import prepare_ptb_sample, prepared_targets
from repro.pipeline.parsing import ParserProbe, decode_parses, epochs_seen, load_test_split
from repro.pipeline.parsing_recipe import RECIPE, on_prepared_data
from repro.recipes import Recipe, apply_assignments, get_recipe, parse_assignments
from repro.train.checkpoint import list_checkpoints
from repro.train.loop import runtime_of, train

#: The issue's sizes below the whole training split (3396 trees), which the pipeline's own run gives.
SIZES = (400, 800, 1600)
CURVE_FILE = "parsing_curve.json"
PIPELINE = "repro reproduce --profile local-parsing"  # the source named in committed records


def _say(msg: str) -> None:
    print(f"repro parsing-curve: {msg}", file=sys.stderr, flush=True)


def subset(prepared: Path, out: Path, trees: int) -> Path:
    """A prepared folder holding the first ``trees`` training trees and the whole dev and test splits
    (and a manifest saying so, with the target units of ``prepared``)."""
    make_dirs(out)
    manifest = {"source": f"the first {trees} training trees of {prepared}", "targets": prepared_targets(prepared)}
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    for split in ("train", "dev", "test"):
        for suffix in ("src", "tgt", "trees"):
            lines = read_lines(prepared / f"{split}.{suffix}")
            if split == "train":
                if trees > len(lines):
                    raise ConfigError(f"--sizes: {trees} trees asked, the training split has {len(lines)}")
                lines = lines[:trees]
            atomic_write_text(out / f"{split}.{suffix}", "".join(line + "\n" for line in lines))
    return out


def _comparable(config: dict[str, Any], recipe: Recipe) -> bool:
    """Whether a run's config is ``recipe``'s, data paths and run folder aside, and the precision
    asked for (``auto`` is resolved per machine: each point records the precision it ran in)."""
    ignore = {"dataset", "data_dir", "train_src", "train_tgt", "dev_src", "dev_tgt", "out_dir", "threads", "precision"}
    mine = recipe.train.to_dict()
    return {k: v for k, v in config.items() if k not in ignore} == {k: v for k, v in mine.items() if k not in ignore}


def _same_curve(curve: dict[str, Any], recipe: Recipe) -> bool:
    """Whether a curve file holds ``recipe``'s curve, target units included (files from before ``targets``: symbols)."""
    return _comparable(curve.get("config", {}), recipe) and curve.get("targets", "symbols") == recipe.targets


def _kept_points(path: Path, recipe: Recipe) -> dict[int, dict[str, Any]]:
    """The trained points of the curve file at ``path`` when it holds ``recipe``'s curve in the
    precision this machine resolves it to (the pipeline's full-size point is taken afresh each time)."""
    if not path.exists():
        return {}
    previous = reader.read_json(path, "learning curve", error=ConfigError, allow_nan=True)
    if not _same_curve(previous, recipe):
        return {}
    ran_in = runtime_of(recipe.train).precision.name
    return {p["trees"]: p for p in previous.get("points", [])
            if p.get("source") != PIPELINE and p.get("precision", "fp32") == ran_in}


def point_from_pipeline(summary: dict[str, Any]) -> dict[str, Any]:
    """The curve's point for the whole training split, from the pipeline's ``local_parsing_run.json``."""
    curve = summary.get("curve") or []
    last = curve[-1] if curve else {}
    return {"trees": summary["splits"]["train"], "steps": summary["steps"], "epochs": summary.get("epochs"),
            "test_f1": summary["f1"], "test_greedy_f1": summary["greedy"]["f1"],
            "test_exact_leaf_count": summary["leaf_count"]["exact"],
            "test_greedy_exact_leaf_count": summary["greedy"]["leaf_count"]["exact"],
            "train_nll": last.get("train_nll"), "dev_nll": last.get("dev_nll"),
            "dev_greedy_f1": last.get("dev_greedy_f1"), "probe": curve,
            "train_s": summary["stages_s"].get("train_s"),
            "precision": summary.get("numeric_precision", {}).get("precision", "fp32"), "source": PIPELINE}


def train_point(recipe: Recipe, prepared: Path, run_dir: Path, trees: int,
                say: Callable[[str], None] = _say, test_limit: int | None = None) -> dict[str, Any]:
    """Train ``recipe`` on the first ``trees`` training trees and score its last checkpoint on the test split."""
    data = subset(prepared, run_dir / "data", trees)
    sized = on_prepared_data(recipe.replace(out_dir=str(run_dir)), data)
    precision = runtime_of(sized.train).precision
    probe = ParserProbe(run_dir, data, sized.decode, precision=precision)
    start = time.monotonic()
    summary = train(sized.train, evaluate=probe, recipe=sized.to_dict())
    train_s = time.monotonic() - start
    model, _ = load_model(list_checkpoints(run_dir)[-1])
    vocab = SharedVocab.load(run_dir / "vocab.json")
    sentences, gold, _, _ = load_test_split(data, run_dir, test_limit)
    beam, _ = decode_parses(model, vocab, sentences, sized.decode, precision=precision)
    greedy, _ = decode_parses(model, vocab, sentences, sized.decode, greedy=True, precision=precision)
    beam_score, greedy_score = score_outputs(beam, gold), score_outputs(greedy, gold)
    last = probe.points[-1] if probe.points else {}
    point = {"trees": trees, "steps": summary.steps,
             "epochs": epochs_seen(sized, summary.steps, data / "train.tgt"),
             "test_f1": round(beam_score.f1, 2), "test_greedy_f1": round(greedy_score.f1, 2),
             "test_exact_leaf_count": beam_score.leaf_count["exact"],
             "test_greedy_exact_leaf_count": greedy_score.leaf_count["exact"],
             "train_nll": last.get("train_nll"), "dev_nll": last.get("dev_nll"),
             "dev_greedy_f1": last.get("dev_greedy_f1"), "probe": probe.points,
             "test_sentences": len(sentences), "train_s": round(train_s, 1), "vocab_size": len(vocab),
             "precision": precision.name, "source": f"{run_dir}"}
    say(f"{trees} trees: test F1 {point['test_f1']:.2f} (greedy {point['test_greedy_f1']:.2f}), "
        f"train NLL {point['train_nll']}, dev NLL {point['dev_nll']}")
    return point


def learning_curve(*, sizes: Sequence[int] = SIZES, out_dir: str | Path = "runs/parsing-curve",
                   reports_dir: str | Path = "reports/local", data_dir: str | None = None,
                   overrides: dict[str, Any] | None = None, say: Callable[[str], None] = _say,
                   test_limit: int | None = None, targets: str | None = None) -> dict[str, Any]:
    """Train and score one point per size (a point already in the curve file is kept), add the
    pipeline's full-size run when it used the same recipe, and write ``REPORTS/parsing_curve.json``.
    ``targets`` replaces the recipe's target units."""
    if not sizes or any(k < 1 for k in sizes):
        raise ConfigError(f"--sizes must be positive tree counts, got {list(sizes)}")
    out_dir, reports_dir = Path(out_dir), Path(reports_dir)
    recipe = apply_assignments(get_recipe(RECIPE), overrides) if overrides else get_recipe(RECIPE)
    if targets is not None:
        if targets not in TARGET_UNITS:
            raise ConfigError(f"--targets must be one of {', '.join(TARGET_UNITS)}, got {targets!r}")
        recipe = recipe.replace(targets=targets)
    path = reports_dir / CURVE_FILE
    if path.exists() and not _same_curve(reader.read_json(path, "learning curve", error=ConfigError, allow_nan=True), recipe):
        raise ConfigError(f"{path} holds the curve of another config; give this one its own --reports folder")
    prepared = out_dir / "data"
    prepare_ptb_sample(resolve_data_dir(data_dir), prepared, recipe.targets, within=out_dir)
    trained = {}
    for trees in sizes:
        if trees in _kept_points(path, recipe):
            say(f"{trees} trees: kept from {path}")
            continue
        say(f"{trees} trees: training {recipe.train.max_steps} steps in {out_dir / f'trees-{trees}'}")
        trained[trees] = train_point(recipe, prepared, out_dir / f"trees-{trees}", trees, say, test_limit)
    # read again: another size may have been added meanwhile (sizes can run side by side)
    points = {**_kept_points(path, recipe), **trained}
    full = reports_dir / "local_parsing_run.json"
    if full.exists():
        summary = reader.read_json(full, "local parser's summary", error=ConfigError, allow_nan=True)
        ran_in = runtime_of(recipe.train).precision.name
        if not (_comparable(summary.get("config", {}), recipe) and summary.get("targets", "symbols") == recipe.targets):
            say(f"{full} ran another recipe: the whole split is not on the curve")
        elif summary.get("numeric_precision", {}).get("precision", "fp32") != ran_in:
            say(f"{full} ran in another precision than {ran_in}: the whole split is not on the curve "
                "(ask for one with --set precision=...)")
        else:
            points[summary["splits"]["train"]] = point_from_pipeline(summary)
    curve = {"recipe": RECIPE, "config": recipe.train.to_dict(), "targets": recipe.targets, "threads": torch.get_num_threads(),
             "test": "all 245 trees of files wsj_0180-0199; beam 21, alpha 0.3, input + 300 (Section 6.3) and greedy",
             "points": [points[k] for k in sorted(points)]}
    atomic_write_text(path, json.dumps(curve, indent=2) + "\n")
    return curve


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m repro.pipeline.parsing_curve", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=list(SIZES), help="training-tree counts")
    parser.add_argument("--out-dir", type=Path, help="run folders (default: runs/parsing-curve, "
                        "runs/parsing-curve-per-word with --targets per-word)")
    parser.add_argument("--reports", type=Path, default=Path("reports/local"))
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--set", metavar="FIELD=JSON", action="append", default=[],
                        help="a variant of the local-parsing recipe, as `repro train --set` (e.g. --set lr_scale=0.27); "
                             "a variant's curve needs its own --reports folder")
    parser.add_argument("--targets", choices=TARGET_UNITS,
                        help="target tokens (python -m repro.parsing.prepare --targets; default: the recipe's); "
                             "other units than the recipe's need their own --reports folder")
    args = parser.parse_args(argv)
    try:
        overrides = parse_assignments(args.set)
        if args.targets is not None:
            overrides["targets"] = args.targets
        targets = overrides.get("targets", get_recipe(RECIPE).targets)
        out_dir = args.out_dir or Path("runs/parsing-curve" + ("" if targets == "symbols" else f"-{targets}"))
        curve = learning_curve(sizes=args.sizes, out_dir=out_dir, reports_dir=args.reports, data_dir=args.data_dir,
                               overrides=overrides)
    except ReproError as err:
        print(f"repro: error: {err}", file=sys.stderr)
        return err.exit_code
    for p in curve["points"]:
        print(f"{p['trees']:>5} trees  {p['epochs'] or '':>6} epochs  test F1 {p['test_f1']:6.2f}  "
              f"greedy {p['test_greedy_f1']:6.2f}  train NLL {p['train_nll']}  dev NLL {p['dev_nll']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
