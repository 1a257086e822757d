"""The paper's update on one device: seconds per step and model-FLOPs utilisation (MFU), base and big.

What a reproduction at paper scale costs is set by one number: how fast the device trains one update
of ~25000 source + ~25000 target tokens (Section 5.1; 780 sentences x 32 tokens per side here), with
the 37000-token shared vocabulary, label smoothing 0.1 and Adam. For the base and the big model this
measures, on ``--device`` (auto: CUDA when present):

- the device's sustained matrix-product rate in bf16 and in fp32 (TF32 on CUDA): the yardstick;
- repro's training step (the loop's own ``update()``: its objective, loss path and fused Adam) in the
  recipe's precision (``auto``: bf16 on a GPU that computes it), eager and under ``torch.compile``;
- ``torch.nn.Transformer`` of the same size, same tokens and precision, eager: the peer;

in alternating rounds (every case once per round, so all see the same load), each round ``--block``
updates back to back as the training loop launches them (the host reads an update's figures once the
next is launched), median of ``--steps`` rounds after ``--warmup``. MFU = model FLOPs of the update / seconds / the measured peak of the
compute dtype, with model FLOPs = 6 x (the matrix products' weights x the tokens that pass through
them), attention scores excluded (:func:`repro.benchmarks.train_speed.training_flops`). The paper's
own runs reached about 31 % (base) and 42 % (big) of 8 P100s by the same count.

    python -m repro.benchmarks.gpu [--device cuda] [--models base big] [--steps 10] [--out reports/benchmarks/gpu-<device>.json]

On a CPU the default batch is 64 x 32 tokens per side (a paper update takes minutes there) and the
compiled case is skipped unless ``--compile`` is given; the figures that matter come from a GPU.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.argtypes import OneLineParser, non_negative_int, positive_float, positive_int
from repro.benchmarks.machine import (
    environment, parse_benchmark_args, peak_memory_gib, publish, ratio_spread, spread, synchronize,
)
from repro.benchmarks.kernel_profile import profile_kernels
from repro.benchmarks.train_speed import ReferenceObjective, ReferenceTransformer, make_batch, training_flops
from repro.cli_flags import device_name
from repro.data.batching import Batch
from repro.model import Transformer, count_parameters, get_preset
from repro.model.attention import train_with_shape_free_kernels
from repro.train.allocator import grow_segments_for_varying_shapes
from repro.model.precision import PRECISIONS
from repro.runtime import Runtime
from repro.train.compile_cache import use_compile_cache
from repro.train.compiled import CompiledObjective, CompileWatch
from repro.train.loss import TranslationLoss, loss_impl_for
from repro.train.optimizer import build_optimizer
from repro.train.schedule import PAPER_WARMUP_STEPS
from repro.train.update_step import InFlight, ReadLate, launch_update


def sustained_rate(device: torch.device, dtype: torch.dtype, n: int, seconds: float) -> float:
    """Median TFLOP/s of back-to-back n^3 products in ``dtype`` on ``device`` for about ``seconds``."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    a @ b
    synchronize(device)
    rates, began = [], time.perf_counter()
    while len(rates) < 3 or time.perf_counter() - began < seconds:
        start = time.perf_counter()
        a @ b
        synchronize(device)
        rates.append(2 * n**3 / (time.perf_counter() - start) / 1e12)
    return float(statistics.median(rates))


def _stepper(objective: nn.Module, model: nn.Module, batch: Batch, runtime: Runtime, d_model: int):
    """One update per call, launched as the training loop launches it (:func:`launch_update`: on one GPU
    with fused Adam the host does not wait for the device); the caller reads the last one's figures."""
    optimizer, steps = build_optimizer(model), iter(range(1, 10**9))
    on_device = batch.to(runtime.device)

    def step() -> InFlight:
        return launch_update(objective, optimizer, [on_device], runtime.device, step=next(steps), d_model=d_model,
                             warmup_steps=PAPER_WARMUP_STEPS, precision=runtime.precision)
    return step


def _timed_block(step, block: int, device: torch.device) -> float:
    """Wall seconds of ``block`` updates back to back, the device drained at the end; each update's
    figures read one update late, as the loop reads them."""
    synchronize(device)
    start, late = time.perf_counter(), ReadLate()
    for _ in range(block):
        late.push(step())
    late.drain()   # raises on a non-finite loss: a diverged case is no figure
    synchronize(device)
    return time.perf_counter() - start


def measure_model(size: str, runtime: Runtime, batch: Batch, args: argparse.Namespace, peak_tflops: float) -> dict:
    """One model size: repro eager, repro compiled (if asked), the peer; alternating rounds."""
    torch.manual_seed(0)
    cfg = get_preset(size).model.replace(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, attention="fused")
    ours = Transformer(cfg).to(runtime.device)
    ref = ReferenceTransformer(args.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff, cfg.dropout)
    ref = ref.to(runtime.device)
    cases = {"repro eager": _stepper(TranslationLoss(ours, 0.1, impl=loss_impl_for(runtime.device, False)), ours,
                                     batch, runtime, cfg.d_model)}
    if args.compile:   # the job's own compiled objective (one graph for every shape, the job's cache)
        use_compile_cache()
        compiled = CompiledObjective(TranslationLoss(ours, 0.1, impl="dense"))
        cases["repro compiled"] = _stepper(compiled, ours, batch, runtime, cfg.d_model)
    cases["torch.nn.Transformer"] = _stepper(ReferenceObjective(ref, 0.1), ref, batch, runtime, cfg.d_model)
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    warming: dict[str, list[float]] = {name: [] for name in cases}
    watch = CompileWatch()
    for i in range(args.warmup + args.steps):
        for name, fn in cases.items():
            block = args.block if i >= args.warmup else 1
            (seconds if i >= args.warmup else warming)[name].append(_timed_block(fn, block, runtime.device) / block)
    flops = training_flops(ours, batch.src_tokens, batch.tgt_tokens)
    tokens = batch.src_tokens + batch.tgt_tokens
    out: dict[str, Any] = {"parameters": count_parameters(ours), "model_flops_per_update": flops, "cases": {}}
    for name, values in seconds.items():
        s = statistics.median(values)
        out["cases"][name] = {"s_per_step": round(s, 4), "tokens_per_s": round(tokens / s, 1),
                              "mfu": round(flops / s / (peak_tflops * 1e12), 4), "s_per_step_spread": spread(values, 4)}
    best = min((n for n in out["cases"] if n.startswith("repro")), key=lambda n: out["cases"][n]["s_per_step"])
    out["best_repro_case"] = best
    out["mfu"] = out["cases"][best]["mfu"]
    out["peer_ratio"] = ratio_spread(seconds["torch.nn.Transformer"], seconds[best])["median"]
    out["peak_memory_gib"] = round(peak_memory_gib(runtime.device), 2)
    out["compilations"], out["recompile_reasons"] = watch.graphs, watch.reasons()
    # the first warm-up round of a compiled case holds its compilation
    out["seconds"] = {"compile": round(warming["repro compiled"][0], 2) if "repro compiled" in warming and warming[
        "repro compiled"] else 0.0, "warmup": round(sum(map(sum, warming.values())), 2),
        "measured": round(sum(map(sum, seconds.values())), 2)}
    if args.kernels:
        out["kernels"] = profile_kernels(cases[best], runtime.device, steps=2)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=device_name, default="auto")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--models", nargs="+", default=["base", "big"], choices=["base", "big"])
    parser.add_argument("--sentences", type=positive_int, default=None, help="per update (default: 780 on a GPU, 64 on a CPU)")
    parser.add_argument("--length", type=positive_int, default=32, help="tokens per sentence, each side")
    parser.add_argument("--vocab", type=positive_int, default=37000)
    parser.add_argument("--steps", type=positive_int, default=10, help="measured rounds (median reported)")
    parser.add_argument("--warmup", type=non_negative_int, default=3, help="unmeasured rounds first (compilation happens here)")
    parser.add_argument("--block", type=positive_int, default=None,
                        help="updates per measured round, back to back (default: 5 on a GPU, 1 on a CPU)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="also time the step under torch.compile (default: on a GPU only)")
    parser.add_argument("--peak-n", type=positive_int, default=None, help="matrix size of the peak (default 8192 GPU, 2048 CPU)")
    parser.add_argument("--peak-seconds", type=positive_float, default=5.0)
    parser.add_argument("--kernels", action=argparse.BooleanOptionalAction, default=None,
                        help="profile the fastest repro case: its top 20 kernels by device time (default: on a GPU)")
    args = parse_benchmark_args(parser, argv)   # --threads, --note, --out (default reports/benchmarks/gpu-<device>.json)
    runtime = Runtime.resolve(args.device, args.precision, dims=(512, 2048))
    gpu = runtime.on_gpu
    args.compile = gpu if args.compile is None else args.compile
    args.kernels = gpu if args.kernels is None else args.kernels
    sentences = args.sentences or (780 if gpu else 64)
    args.block = args.block or (5 if gpu else 1)
    batch = make_batch(sentences, args.length, args.vocab)
    n = args.peak_n or (8192 if gpu else 2048)
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
        train_with_shape_free_kernels()   # the job's kernels and allocator (repro.train.loop.build)
        grow_segments_for_varying_shapes()
    peaks = {"bf16": sustained_rate(runtime.device, torch.bfloat16, n if gpu else 512, args.peak_seconds),
             "fp32": sustained_rate(runtime.device, torch.float32, n, args.peak_seconds)}
    compute = "bf16" if runtime.precision.mixed else "fp32"
    name = torch.cuda.get_device_name(runtime.device) if gpu else "cpu"
    out: dict[str, Any] = {
        "benchmark": "gpu", **environment(args.note), "device": str(runtime.device), "device_name": name,
        "cuda": torch.version.cuda, "precision": runtime.precision.name, "precision_reason": runtime.precision.reason,
        "allocator": grow_segments_for_varying_shapes() if gpu else "not CUDA: left as it is",
        "update": f"{sentences} x {args.length} source + target tokens, vocabulary {args.vocab} (shared, tied)",
        "peak_tflops": {k: round(v, 3) for k, v in peaks.items()},
        "peak": f"median of back-to-back {n}^3 products over {args.peak_seconds:g} s (bf16; fp32 with TF32 on CUDA)",
        "mfu_formula": "6 x matmul weights x tokens through them per update (attention scores excluded) / s / "
                       f"the {compute} peak",
        "models": {},
    }
    for size in args.models:
        if gpu:
            torch.cuda.reset_peak_memory_stats(runtime.device)
        out["models"][size] = measure_model(size, runtime, batch, args, peaks[compute])
        out[f"mfu_{size}"] = out["models"][size]["mfu"]
        out[f"peer_ratio_{size}"] = out["models"][size]["peer_ratio"]
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    path = args.out or Path("reports") / "benchmarks" / f"gpu-{slug}.json"
    return publish(out, path)


if __name__ == "__main__":
    main()
