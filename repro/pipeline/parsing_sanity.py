"""The parser's sanity run: can the recipe memorise a few training trees? (Section 6.3 at small scale)

Before the local parser is trained on the whole sample, the same recipe (same model, same
vocabulary, Eq. 3 with the paper-peak rule of :func:`repro.train.schedule.paper_peak_scale`,
P_drop 0) is trained on the first ``trees`` training trees only, and the same sentences are
parsed again with greedy search and scored with EVALB. A recipe that cannot reach F1 >= 90 on
trees it has seen for dozens of epochs has a bug (a truncated target, a broken alignment of
leaves to words, a rate that diverges), whatever it then does on unseen sentences.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from repro.argtypes import OneLineParser, positive_int
from repro.data.text_lines import read_lines
from repro.files.writer import atomic_write_text, make_dirs
from repro.data.corpora import resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.translate import load_model, translate_ids
from repro.errors import ReproError
from repro.model.precision import PRECISIONS
from repro.parsing.prepare import prepare_ptb_sample
from repro.parsing.scoring import score_outputs
from repro.pipeline.parsing_recipe import RECIPE, on_prepared_data
from repro.recipes import Recipe, get_recipe
from repro.results.provenance import git_commit
from repro.train.checkpoint import list_checkpoints
from repro.train.loop import runtime_of, train
from repro.train.schedule import paper_peak_scale

#: The ladder's default: 10 trees, 300 updates (each update holds all 10 trees: 300 epochs), the
#: rate peaking at 7.0e-4 after 100. 60 updates with 20 of warm-up were measured too few: training
#: loss 2.12, every greedy output a flat ``(NP XX XX ...`` (F1 0.00).
TREES = 10
STEPS = 300
WARMUP = 100


@dataclass(frozen=True)
class Overfit:
    trees: int
    epochs: float
    f1: float
    exact_leaf_count: int
    final_train_loss: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"trees": self.trees, "epochs": round(self.epochs, 1), "f1": round(self.f1, 2),
                "exact_leaf_count": self.exact_leaf_count, "final_train_loss": None if self.final_train_loss is None else round(self.final_train_loss, 4)}


def overfit_recipe(recipe: Recipe, out_dir: Path, train_src: Path, train_tgt: Path, *, steps: int = STEPS,
                   warmup: int = WARMUP) -> Recipe:
    """``recipe`` on a few trees: P_drop 0, a short warm-up at the paper-peak rate, one update per epoch."""
    return recipe.replace(out_dir=str(out_dir), dataset=str(train_src.parent), train_src=str(train_src), train_tgt=str(train_tgt),
                          dev_src=str(train_src), dev_tgt=str(train_tgt), max_steps=steps, warmup_steps=warmup,
                          lr_scale=paper_peak_scale(recipe.model.d_model, warmup), dropout=0.0,
                          label_smoothing=0.0, checkpoint_every_steps=steps, keep_checkpoints=1,
                          average_last=1, log_every=max(1, steps // 4))


def overfit_parser(recipe: Recipe, prepared: Path, out_dir: Path, *, trees: int = TREES, steps: int = STEPS,
                   warmup: int = WARMUP, vocab_texts: list[str] | None = None) -> Overfit:
    """Train ``recipe`` on the first ``trees`` training trees of ``prepared`` and score greedy parses of them.

    ``vocab_texts`` (the whole training split's sentences and trees) gives the run the main run's
    vocabulary; without it the vocabulary is learned from the few trees.
    """
    make_dirs(out_dir)
    files = {}
    for suffix in ("src", "tgt", "trees"):
        lines = read_lines(prepared / f"train.{suffix}")[:trees]
        files[suffix] = out_dir / f"overfit.{suffix}"
        atomic_write_text(files[suffix], "".join(line + "\n" for line in lines))
    sized = overfit_recipe(recipe, out_dir, files["src"], files["tgt"], steps=steps, warmup=warmup)
    if vocab_texts is not None and not (out_dir / "vocab.json").exists():
        SharedVocab.train(vocab_texts, sized.train.vocab_size, split=sized.train.bpe_split).save(out_dir / "vocab.json")
    summary = train(sized.train, recipe=sized.to_dict())
    model, _ = load_model(list_checkpoints(out_dir)[-1])
    vocab = SharedVocab.load(out_dir / "vocab.json")
    sentences = read_lines(files["src"])
    ids = translate_ids(model, vocab.encode_batch(sentences), sized.decode, greedy=True)
    outputs = [vocab.decode(out) for out in ids]
    atomic_write_text(out_dir / "overfit.greedy.out", "".join(o + "\n" for o in outputs))
    score = score_outputs(outputs, files["trees"])
    n_tokens = sum(len(t.split()) for t in read_lines(files["tgt"]))
    epochs = summary.steps * sized.train.tokens_per_batch / max(1, n_tokens)
    result = Overfit(trees=len(sentences), epochs=min(float(summary.steps), epochs), f1=score.f1,
                     exact_leaf_count=score.leaf_count["exact"], final_train_loss=summary.final_loss)
    atomic_write_text(out_dir / "overfit.json", json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def training_texts(prepared: Path) -> list[str]:
    """The training split's sentences and trees of a prepared folder: what the vocabulary is learned on."""
    return [line for suffix in ("src", "tgt")
            for line in read_lines(prepared / f"train.{suffix}")]


def main(argv: list[str] | None = None) -> int:
    """``python -m repro.pipeline.parsing_sanity --trees 200 --steps 1200``: one rung of the ladder as a
    committed record, ``REPORTS/parsing_overfit_{trees}.json``."""
    parser = OneLineParser(prog="python -m repro.pipeline.parsing_sanity",
                                     description="overfit the first N training trees of the PTB sample (the sanity ladder)")
    parser.add_argument("--trees", type=positive_int, default=TREES)
    parser.add_argument("--steps", type=positive_int, default=STEPS)
    parser.add_argument("--warmup", type=positive_int, default=WARMUP)
    parser.add_argument("--out-dir", type=Path, default=Path("runs/parsing-overfit"))
    parser.add_argument("--reports", type=Path, default=Path("reports/local"))
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--precision", choices=PRECISIONS, help="the run's numeric precision (default: the recipe's)")
    args = parser.parse_args(argv)
    if min(args.trees, args.steps, args.warmup) < 1:
        parser.error("--trees, --steps and --warmup must be positive")
    try:
        prepared = args.out_dir / "data"
        recipe = get_recipe(RECIPE)
        if args.precision:
            recipe = recipe.replace(precision=args.precision)
        prepare_ptb_sample(resolve_data_dir(args.data_dir), prepared, recipe.targets, within=args.out_dir)
        recipe = on_prepared_data(recipe, prepared)
        texts = training_texts(prepared)
        start = time.monotonic()
        result = overfit_parser(recipe, prepared, args.out_dir / f"trees-{args.trees}", trees=args.trees,
                                steps=args.steps, warmup=args.warmup, vocab_texts=texts)
    except ReproError as err:
        print(f"repro: error: {err}", file=sys.stderr)
        return err.exit_code
    record = {**result.to_dict(), "steps": args.steps, "warmup": args.warmup,
              "seconds": round(time.monotonic() - start, 1), "recipe": RECIPE, "targets": recipe.targets,
              "vocab_size": recipe.train.vocab_size, "n_layers": recipe.model.n_layers,
              **runtime_of(recipe.train).precision.provenance(),
              "threads": torch.get_num_threads(),
              "commit": git_commit(), "reached_90": result.f1 >= 90.0,
              "note": "greedy search on the same training trees, EVALB COLLINS.prm; P_drop 0, no label smoothing"}
    atomic_write_text(args.reports / f"parsing_overfit_{args.trees}.json", json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))
    return 0 if result.f1 >= 90.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
