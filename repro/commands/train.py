"""``repro train``: train a Transformer with the recipe of Section 5 (resumes from OUT_DIR)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from repro.errors import ConfigError
from repro.train.config import PROFILES, TrainConfig, get_profile


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="paper", choices=sorted(PROFILES),
                        help="named recipe: 'paper' (base EN-DE), 'paper-big', 'local' (Multi30k on a CPU)")
    parser.add_argument("--config", metavar="FILE", help="a JSON TrainConfig (replaces --profile)")
    parser.add_argument("--out-dir", help="run directory: checkpoints, vocab.json, metrics.csv")
    parser.add_argument("--data-dir", help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--dataset", help="registered dataset name, e.g. wmt14-en-de, multi30k-en-de")
    parser.add_argument("--preset", help="model preset (base, big, a Table 3 row)")
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--threads", type=int, help="torch intra-op threads")
    parser.add_argument("--set", metavar="FIELD=JSON", action="append", default=[],
                        help="override any TrainConfig field, e.g. --set warmup_steps=800 "
                             "--set 'model_overrides={\"n_layers\": 2}'")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    cfg = TrainConfig.from_file(args.config) if args.config else get_profile(args.profile)
    changes: dict[str, Any] = {}
    for name in ("out_dir", "data_dir", "dataset", "preset", "max_steps", "device", "threads"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE")
        try:
            changes[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            changes[key.strip()] = raw  # a bare string
    return cfg.replace(**changes) if changes else cfg


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
    from repro.train.loop import train

    summary = train(cfg)
    print(json.dumps({
        "steps": summary.steps, "final_loss": summary.final_loss, "out_dir": str(summary.out_dir),
        "resumed_from": summary.resumed_from, "tokens_per_s": round(summary.tokens_per_s, 1),
        "elapsed_s": round(summary.elapsed_s, 1), "checkpoints": [str(p) for p in summary.checkpoints],
        **summary.extra,
    }, indent=2))
    return 0
