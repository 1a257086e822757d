"""``repro train``: train a Transformer with the recipe of Section 5 (resumes from OUT_DIR)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from repro.argtypes import existing_file, non_negative_int, positive_int
from repro.cli_flags import add_device_argument, add_lineage_argument, deprecated_alias
from repro.errors import ConfigError
from repro.model.precision import PRECISIONS
from repro.pipeline.run_dir import check_writable
from repro.run_lock import run_dir_lock
from repro.recipes import Recipe, apply_assignments, get_recipe, parse_assignments, recipe_names
from repro.decode.settings import DecodeSettings
from repro.train.config import DATA_PATH_FIELDS, TrainConfig, read_json_config
from repro.measures.run_dev import evaluate_newest
from repro.train.loop import runtime_of, train
from repro.train.stop import StopSignals


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", dest="profile", default="paper", choices=recipe_names(), metavar="RECIPE",
                        help="a named recipe (repro.recipes): 'paper' (= base, EN-DE), 'paper-big' (= big), "
                             "'local' (Multi30k on a CPU), a Table 3 row 'table3-<row>', 'smoke', ...")
    parser.add_argument("--profile", dest="profile", choices=recipe_names(), metavar="RECIPE",
                        action=deprecated_alias("--recipe"), help="deprecated: --recipe")
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
    if args.config:   # a TrainConfig, or what --print-config printed (its decode, targets and recipe name too)
        data = read_json_config(args.config)
        decode = data.pop("decode", None)
        targets = data.pop("targets", recipe.targets)
        data.pop("recipe", None)
        recipe = Recipe(recipe.name, f"{recipe.source}; training config from {args.config}",
                        TrainConfig.from_dict(data, source=str(args.config)),
                        DecodeSettings.from_dict(decode, source=f"{args.config}: field 'decode'") if decode is not None
                        else recipe.decode, targets)
    changes = {name: getattr(args, name) for name in ("out_dir", "data_dir", "dataset", "preset", "max_steps",
                                                     "device", "threads", "precision", "compile")
               if getattr(args, name, None) is not None}
    assigned = parse_assignments(args.set)
    both = sorted(set(changes) & set(assigned))
    if both:
        raise ConfigError(f"--set {both[0]}: the field is also given by its own flag (--{both[0].replace('_', '-')}); "
                          "give it once")
    changes.update(assigned)
    for name in DATA_PATH_FIELDS:   # recorded as absolute: a check or evaluate from another folder finds the data
        if isinstance(changes.get(name), str) and changes[name]:
            changes[name] = os.path.abspath(changes[name])
    return apply_assignments(recipe, changes) if changes else recipe


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return recipe_from_args(args).train


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("train", help="train a Transformer (Section 5); resumes from the newest checkpoint")
    add_config_arguments(parser)
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    add_lineage_argument(parser, "resume from")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    recipe = recipe_from_args(args)
    cfg = recipe.train
    if args.print_config:   # the training config's fields, then what else the recipe decides (kept in checkpoints)
        print(json.dumps({**cfg.to_dict(), "decode": recipe.decode.to_dict(), "targets": recipe.targets,
                          "recipe": recipe.name}, indent=2))
        return 0
    check_writable(cfg.out_dir, "run directory (out_dir)")
    with run_dir_lock(cfg.out_dir, "run directory (out_dir)"):   # one writer per run directory
        stop = StopSignals()   # SIGINT/SIGTERM: the update in flight is checkpointed, the command resumes
        summary = train(cfg, recipe=recipe.to_dict(), allow_no_lineage=args.allow_no_lineage, stop=stop)
        if not stop.requested:
            # the run's own dev evaluation (perplexity, token accuracy), kept in its records (repro check --run)
            evaluate_newest(cfg.out_dir, recipe.to_dict(), runtime_of(cfg))
        else:
            print(f"repro train: {stop.signal}: the dev evaluation of the newest checkpoint is left out "
                  "(a resumed run that ends makes it; so does `repro evaluate`)", file=sys.stderr)
    print(json.dumps({
        "steps": summary.steps, "final_loss": summary.final_loss, "out_dir": str(summary.out_dir),
        "resumed_from": summary.resumed_from, "tokens_per_s": round(summary.tokens_per_s, 1),
        "elapsed_s": round(summary.elapsed_s, 1), "checkpoints": [str(p) for p in summary.checkpoints],
        **summary.extra,
    }, indent=2))
    return stop.exit_code if "stopped_by" in summary.extra else 0
