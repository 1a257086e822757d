"""Training speed in fp32 against bf16 mixed precision, side by side in one process.

repro's Transformer (the ``base`` recipe's model or the ``local`` main job's), its fused
label-smoothed loss and the training loop's own update (repro.train.update_step: Eq. 3's rate, the
gradients, Adam), once with fp32 and once under bf16 autocast, from the same initial weights on
the same batch of ``--sentences`` x ``--length`` tokens per side. The steps alternate (fp32, bf16,
fp32, ...) so both see the same machine load; the report gives each precision's median step time
and the median and spread of the per-round speed-up, with what ``--precision auto`` picks on this
machine and why (the probe's figures), the CPU model and its flags.

    python -m repro.benchmarks.precision_speed [--model base|local] [--steps 3] [--warmup 1]
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

import torch

from repro.argtypes import OneLineParser, non_negative_int, positive_int
from repro.benchmarks.machine import (
    alternate,
    environment,
    parse_benchmark_args,
    publish,
    ratio_spread,
    spread,
)
from repro.benchmarks.train_speed import make_batch
from repro.model import Transformer, count_parameters
from repro.model.precision import Precision, matmul_probe, resolve_precision
from repro.recipes import get_recipe
from repro.train.loss import TranslationLoss
from repro.train.optimizer import build_optimizer
from repro.train.update_step import update

TARGET_SPEEDUP, GOAL_SPEEDUP = 3.0, 5.0


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("base", "local"), default="base",
                        help="the base recipe's model (37000 vocabulary) or the local main job's (8000)")
    parser.add_argument("--steps", type=positive_int, default=3, help="measured steps per precision")
    parser.add_argument("--warmup", type=non_negative_int, default=1, help="unmeasured steps per precision first")
    parser.add_argument("--sentences", type=positive_int, default=128)
    parser.add_argument("--length", type=positive_int, default=32)
    parser.add_argument("--layers", type=positive_int, default=None, help="override N (quick runs)")
    args = parse_benchmark_args(parser, argv)
    recipe = get_recipe("paper" if args.model == "base" else "local")
    vocab = recipe.train.vocab_size
    cfg = recipe.train.model_config(vocab).replace(**({"n_layers": args.layers} if args.layers else {}))
    torch.manual_seed(0)
    fp32_model = Transformer(cfg)
    bf16_model = copy.deepcopy(fp32_model)
    batch = make_batch(args.sentences, args.length, vocab)
    tokens = batch.src_tokens + batch.tgt_tokens
    device = torch.device("cpu")
    losses: dict[str, list[float]] = {"fp32": [], "bf16": []}

    def stepper(model: Transformer, precision: Precision):
        objective = TranslationLoss(model, recipe.train.label_smoothing)
        optimizer, steps = build_optimizer(model), iter(range(1, 10**9))

        def step() -> None:
            stats = update(objective, optimizer, [batch], device, step=next(steps), d_model=cfg.d_model,
                           warmup_steps=recipe.train.warmup_steps, precision=precision)
            losses[precision.name].append(round(stats.loss_per_token, 4))
        return step

    seconds = alternate({"fp32": stepper(fp32_model, Precision("fp32", "benchmark")),
                         "bf16": stepper(bf16_model, Precision("bf16", "benchmark"))}, args.steps, args.warmup)
    fp32_rate, bf16_rate = matmul_probe("cpu")
    auto = resolve_precision("auto", "cpu", probe=lambda _device: (fp32_rate, bf16_rate))
    speedup = ratio_spread(seconds["fp32"], seconds["bf16"])
    out: dict[str, Any] = {
        "benchmark": "precision_speed", **environment(args.note), "model": args.model,
        "layers": cfg.n_layers, "d_model": cfg.d_model, "vocab": vocab, "parameters": count_parameters(fp32_model),
        "batch": f"{args.sentences} x {args.length} source + target tokens", "tokens_per_step": tokens,
        "precisions": {name: {"s_per_step": spread(values), "tokens_per_s": round(tokens / spread(values)["median"], 1),
                              "losses": losses[name]}
                       for name, values in seconds.items()},
        "bf16_speedup_tokens_per_s": speedup,
        "auto_picks": auto.name, "auto_reason": auto.reason,
        "target_speedup": TARGET_SPEEDUP, "goal_speedup": GOAL_SPEEDUP,
        "native_bf16": bf16_rate > fp32_rate,
    }
    return publish(out, args.out)


if __name__ == "__main__":
    main()
