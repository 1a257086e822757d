"""``repro train``: train a Transformer with the recipe of Section 5 (resumes from OUT_DIR)."""

from __future__ import annotations

import argparse
import json

from repro.argtypes import existing_file, non_negative_int, positive_int
from repro.cli_flags import add_device_argument
from repro.model.precision import PRECISIONS
from repro.recipes import Recipe, apply_assignments, get_recipe, parse_assignments, recipe_names
from repro.train.config import TrainConfig
from repro.train.loop import train


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="paper", choices=recipe_names(), metavar="RECIPE",
                        help="a named recipe (repro.recipes): 'paper' (= base, EN-DE), 'paper-big' (= big), "
                             "'local' (Multi30k on a CPU), a Table 3 row 'table3-<row>', 'smoke', ...")
    parser.add_argument("--config", metavar="FILE", type=existing_file, help="a JSON TrainConfig (replaces the recipe's training config)")
    parser.add_argument("--out-dir", help="run directory: checkpoints, vocab.json, metrics.csv")
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--dataset", help="registered dataset name, e.g. wmt14-en-de, multi30k-en-de")
    parser.add_argument("--preset", help="model preset (base, big, a Table 3 row)")
    parser.add_argument("--max-steps", type=positive_int)
    add_device_argument(parser, default=None, what="the recipe's own when not given")
    parser.add_argument("--threads", type=non_negative_int, help="torch intra-op threads")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="fp32, bf16 (mixed: bf16 matrix products, fp32 weights/Adam/checkpoints) or auto "
                             "(bf16 where the device computes it natively; the default)")
    parser.add_argument("--compile", choices=("auto", "on", "off"),
                        help="torch.compile the training objective (model and loss): auto = on CUDA only "
                             "(the recipe field 'compile')")
    parser.add_argument("--set", metavar="FIELD=JSON", action="append", default=[],
                        help="override any recipe field (of TrainConfig, TransformerConfig or DecodeSettings), "
                             "e.g. --set warmup_steps=800 --set d_model=256 "
                             "--set 'model_overrides={\"n_layers\": 2}'")


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    """The recipe the flags name, with ``--config``, the dedicated flags and ``--set`` applied."""
    recipe = get_recipe(args.profile)
    if args.config:
        recipe = Recipe(recipe.name, f"{recipe.source}; training config from {args.config}",
                        TrainConfig.from_file(args.config), recipe.decode, recipe.targets)
    changes = {name: getattr(args, name) for name in ("out_dir", "data_dir", "dataset", "preset", "max_steps",
                                                     "device", "threads", "precision", "compile")
               if getattr(args, name, None) is not None}
    changes.update(parse_assignments(args.set))
    return apply_assignments(recipe, changes) if changes else recipe


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return recipe_from_args(args).train


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("train", help="train a Transformer (Section 5); resumes from the newest checkpoint")
    add_config_arguments(parser)
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2))
        return 0
    summary = train(cfg)
    print(json.dumps({
        "steps": summary.steps, "final_loss": summary.final_loss, "out_dir": str(summary.out_dir),
        "resumed_from": summary.resumed_from, "tokens_per_s": round(summary.tokens_per_s, 1),
        "elapsed_s": round(summary.elapsed_s, 1), "checkpoints": [str(p) for p in summary.checkpoints],
        **summary.extra,
    }, indent=2))
    return 0
