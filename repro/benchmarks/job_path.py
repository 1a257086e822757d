"""The job's own path, timed: does the training job run as fast as the benchmark's update?

``repro bench gpu`` times the loop's update (``launch_update``) on one fixed batch already on the device. A
training job does more around it: the batcher packs real sentence pairs by length (Section 5.1),
every pass has another shape and carries padding, passes may be accumulated, the compiled objective
meets those shapes, and on a GPU the prefetcher draws, collates and pins the next batches in a worker process while
the main thread launches kernels. This measures that path as the job runs it, from the loop's own
pieces (:func:`repro.train.loop.build`, :func:`repro.train.loop.batches_for`, ``Trainer.launch``) on
real text prepared as a job prepares it (:func:`repro.train.data.prepare_training_data`), with no
checkpoint writes and no evaluation, and beside it, in alternating rounds on the same model and
optimizer, the fixed-shape update at the job's own tokens per update (``sentences x 32`` tokens per
side, as ``repro bench gpu`` builds it, rounded to the job's mean real tokens per side).

Between the two, a third case splits the gap: ``shapes`` runs the job's own next updates, drawn
before the rounds and kept on the device, so that it has the job's shapes (its padding and ever new
sizes) without its data path (batcher, prefetch thread, pinned copies). ``ratio_shapes`` (shapes over
fixed) and ``ratio_data_path`` (job over shapes) say which half of the gap is which; per case, the host's
milliseconds per update waiting for the batch, launching the update and reading the last one's figures
(``host_ms_per_update``), and the driver allocations made while measured, say where the host's time went.

Each round runs ``--block`` updates of the job, then of ``shapes``, then fixed-shape updates, each block
timed between two device synchronisations; the figures are medians over ``--steps`` rounds after
``--warmup`` updates of each (default 10: the job's first updates meet new shapes). As in the loop, an
update's figures are read once the next update is launched (:class:`repro.train.update_step.ReadLate`;
on one GPU with fused Adam the host so never waits inside an update). Tokens per second count real
tokens (source + target, no padding). The first update of the job, which compiles the objective where
the loop compiles it, is timed apart (``compile_s``), as are the other warm-up updates (``warmup_s``);
``compilations`` is dynamo's count of graphs compiled (:data:`repro.train.compiled.COMPILATIONS` is the stated bound).
The prefetcher's queue carries over between rounds: up to its depth (2 updates) of the job's
collation runs during the fixed block before it.

    repro bench jobpath [--device cuda] [--steps 8] [--block 5] [--quick] [--out reports/benchmarks/jobpath-<device>.json]

Default: the job ``repro submit table2-base-ende --cluster h100-x1`` runs (base model, the paper's
~25000 + ~25000 tokens per update, one pass, a 37000-word shared vocabulary) on the 10k-pair WMT
EN-DE sample. ``--quick`` (and :func:`measure` with ``quick=True``): a one-layer d_model-64 model,
~600 tokens per update, a 2000-word vocabulary, 3 rounds: the path's mechanics in seconds on a CPU
(where the paper's update takes minutes: use ``--quick`` there).
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from repro.argtypes import OneLineParser, integer
from repro.benchmarks.machine import (
    environment, parse_benchmark_args, peak_memory_gib, publish, ratio_spread, spread, synchronize,
)
from repro.benchmarks.train_speed import make_batch
from repro.cli_flags import device_name
from repro.cluster.paper_jobs import job_config
from repro.cluster.profiles import load_profile
from repro.errors import UsageError
from repro.model.precision import PRECISIONS
from repro.benchmarks.kernel_profile import profile_kernels
from repro.train.compile_cache import compile_cache_dir, use_compile_cache
from repro.train.allocator import grow_segments_for_varying_shapes
from repro.train.compiled import COMPILATIONS, CompileWatch, compiles
from repro.train.config import COMPILE_MODES, TrainConfig
from repro.train.data import prepare_training_data
from repro.train.loop import Trainer, batches_for, build
from repro.train.update_step import ReadLate

__all__ = ["FIXED_LENGTH", "QUICK_MODEL", "job_config_for", "measure", "main"]

#: The cases of a round, in their order: the job's path; the job's own batches already on the device (its
#: shapes without its data path); the fixed-shape update.
CASES = ("job", "shapes", "fixed")
#: Unmeasured updates of each case before the rounds (the job's first is its compilation). The job's
#: first updates meet new shapes and the allocator's first sizes: on an H200 (2026-11-27, 3 updates of
#: warm-up) its rounds still fell from 66 to 52 ms per update over the first 40 measured updates.
WARMUP = 10
#: Tokens per sentence and side of the fixed-shape update (``repro bench gpu``'s 780 x 32).
FIXED_LENGTH = 32
#: The model of ``--quick``: the path's mechanics, not a figure about the paper's model.
QUICK_MODEL = {"n_layers": 1, "d_model": 64, "d_ff": 128, "n_heads": 2, "attention": "fused"}
DATASET = "opennmt-wmt-ende-sample"
#: Issue 42's targets on one H100/H200: the job at >= 0.85 of the fixed-shape update's tokens per second,
#: at most 8 % of a pass's tokens padding.
TARGET_RATIO, TARGET_PADDING = 0.85, 0.08


def job_config_for(device: str, quick: bool, out_dir: Path, *, experiment: str = "table2-base-ende",
                   profile: str = "h100-x1", dataset: str = DATASET, data_dir: str | None = None,
                   compile: str = "auto", precision: str = "auto") -> TrainConfig:
    """The training config measured: the job ``repro submit EXPERIMENT --cluster PROFILE`` runs (one
    process), on ``dataset``, writing nothing but its prepared data under ``out_dir``."""
    devices = load_profile(profile).world_size
    if devices != 1:
        raise UsageError(f"repro bench jobpath measures one process's path: profile '{profile}' has {devices} "
                         "devices (use a one-device profile such as h100-x1)")
    cfg = job_config(experiment, profile=profile)
    changes: dict[str, Any] = dict(dataset=dataset, data_dir=data_dir, out_dir=str(out_dir), device=device,
                                   compile=compile, precision=precision, max_steps=10**9, checkpoint_every_steps=0,
                                   checkpoint_every_minutes=0.0, log_every=10**9, tensorboard=False)
    if quick:
        changes.update(model_overrides=dict(QUICK_MODEL), vocab_size=2000, tokens_per_batch=600,
                       max_tokens_per_device=800, warmup_steps=50)
    return cfg.replace(**changes)


def measure(device: str = "auto", quick: bool = False, *, steps: int | None = None, block: int | None = None,
            warmup: int | None = None, experiment: str = "table2-base-ende", profile: str = "h100-x1",
            dataset: str = DATASET, data_dir: str | None = None, compile: str = "auto", precision: str = "auto",
            note: str = "", out: Path | None = None, work_dir: Path | None = None,
            kernels: bool | None = None) -> dict[str, Any]:
    """Time the job's path against the fixed-shape update (the module's docstring); the figures as a
    dict, also written to ``out`` (JSON) when given. ``quick``: seconds on a 2-core CPU. The data are
    prepared (BPE learned, the corpus encoded) in ``work_dir``, and reused from there by a later call
    with the same settings; by default in a temporary directory, removed after. ``kernels`` (default: on a
    GPU) adds the kernels that took each case's device time (:mod:`repro.benchmarks.kernel_profile`)."""
    steps = steps or (3 if quick else 8)
    block = block or (3 if quick else 5)
    warmup = (2 if quick else WARMUP) if warmup is None else warmup
    if min(steps, block) < 1 or warmup < 0:
        raise ValueError(f"jobpath: steps and block must be positive and warmup non-negative, got "
                         f"{steps}, {block}, {warmup}")
    with tempfile.TemporaryDirectory(prefix="repro-jobpath-") as temporary:
        work = Path(work_dir) if work_dir is not None else Path(temporary)
        cfg = job_config_for(device, quick, work, experiment=experiment, profile=profile, dataset=dataset,
                             data_dir=data_dir, compile=compile, precision=precision)
        began = time.perf_counter()
        data = prepare_training_data(cfg)
        prepare_s = time.perf_counter() - began
        if cfg.compile != "off":
            use_compile_cache()   # before anything compiles: the job's own cache (inductor keeps its first choice)
        watch = CompileWatch()
        trainer = build(cfg, data.examples, data.vocab_size)
        figures = _measure(trainer, steps, block, warmup, kernels=kernels)
        figures["compilations"] = watch.graphs
        figures["recompile_reasons"] = watch.reasons()
    compiled = compiles(cfg.compile, trainer.runtime.on_gpu, cfg.max_steps)
    gpu = trainer.device.type == "cuda"
    name = torch.cuda.get_device_name(trainer.device) if gpu else str(trainer.device)
    result: dict[str, Any] = {
        "benchmark": "jobpath", **environment(note), "device": str(trainer.device), "device_name": name,
        "cuda": torch.version.cuda, "precision": trainer.precision.name, "precision_reason": trainer.precision.reason,
        "quick": quick,
        "job": f"repro submit {experiment} --cluster {profile}" + (" (quick: a tiny model)" if quick else ""),
        "dataset": dataset, "train_pairs": len(data.examples), "vocab_size": data.vocab_size,
        "model": trainer.model_cfg.to_dict(), "update_plan": trainer.plan.to_dict(), "plan": trainer.plan.describe(),
        "compiled": compiled, "compile_cache": str(compile_cache_dir()) if compiled else None,
        "compilations_bound": COMPILATIONS if compiled else 0, "loss_impl": trainer.objective.impl,
        "allocator": grow_segments_for_varying_shapes(),   # what build() set (idempotent)
        "prefetch": trainer.runtime.on_gpu, "optimizer": type(trainer.optimizer).__name__
        + (" (fused)" if trainer.optimizer.defaults.get("fused") else ""),
        "rounds": steps, "block": block, "warmup_updates": warmup, "prepare_s": round(prepare_s, 2),
        "data": data.origin,
        **figures, "target_ratio": TARGET_RATIO, "target_padding": TARGET_PADDING,
    }
    return publish(result, out) if out is not None else result


def _measure(trainer: Trainer, steps: int, block: int, warmup: int, kernels: bool | None = None) -> dict[str, Any]:
    device = trainer.device
    trainer.model.train()
    batches = batches_for(trainer)
    step = iter(range(1, 10**9))
    job_tokens: list[int] = []
    padded: list[int] = []
    host = {name: {"batch": 0.0, "launch": 0.0, "read": 0.0} for name in CASES}   # host seconds, measured rounds
    measuring = [False]

    late = ReadLate()   # the loop's order: an update's figures read once the next is launched

    def launch(name: str, micro: list[Any]) -> None:
        began = time.perf_counter()
        launched = trainer.launch(micro, next(step))
        launched_at = time.perf_counter()
        late.push(launched)
        if measuring[0]:
            host[name]["launch"] += launched_at - began
            host[name]["read"] += time.perf_counter() - launched_at

    def job_update() -> int:
        began = time.perf_counter()
        micro, _ = next(batches)
        if measuring[0]:
            host["job"]["batch"] += time.perf_counter() - began
        launch("job", micro)
        padded.append(sum(b.src.numel() + b.tgt_out.numel() for b in micro))
        job_tokens.append(sum(b.src_tokens + b.tgt_tokens for b in micro))   # one process: the update's tokens
        return job_tokens[-1]

    try:
        watch = CompileWatch()
        compile_s = _timed(device, job_update, late)
        warmup_s = _timed(device, lambda: [job_update() for _ in range(max(warmup - 1, 0))], late)
        per_side = statistics.mean(job_tokens) / 2
        sentences = max(2, round(per_side / FIXED_LENGTH))
        fixed = make_batch(sentences, FIXED_LENGTH, trainer.model_cfg.src_vocab_size).to(device)
        fixed_tokens = fixed.src_tokens + fixed.tgt_tokens

        def fixed_update() -> int:
            launch("fixed", [fixed])
            return fixed_tokens

        # the job's own next updates, drawn now and kept on the device: its shapes without its data path
        ahead = [[b.to(device) for b in next(batches)[0]] for _ in range(steps * block)]
        shapes_at = iter(range(10**9))

        def shapes_update() -> int:
            micro = ahead[next(shapes_at) % len(ahead)]
            launch("shapes", micro)
            return sum(b.src_tokens + b.tgt_tokens for b in micro)

        updates = {"job": job_update, "shapes": shapes_update, "fixed": fixed_update}
        fixed_warmup_s = _timed(device, lambda: [fixed_update() for _ in range(max(warmup, 1))], late)
        warm_graphs = watch.graphs
        job_tokens.clear()
        padded.clear()
        seconds: dict[str, list[float]] = {name: [] for name in CASES}
        tokens: dict[str, list[int]] = {name: [] for name in CASES}
        discarded: list[float] = []   # seconds of rounds during which dynamo compiled: kept out of the figures
        allocations = _device_allocations(device)
        measuring[0] = True
        while len(seconds["job"]) < steps and len(discarded) <= steps:
            round_seconds, round_tokens = {}, {}
            graphs = watch.graphs
            for name in CASES:
                counted: list[int] = []
                fn = updates[name]
                round_seconds[name] = _timed(device, lambda: counted.extend(fn() for _ in range(block)), late)
                round_tokens[name] = sum(counted)
            if watch.graphs != graphs:
                discarded.append(round(sum(round_seconds.values()), 3))
                continue
            for name in seconds:
                seconds[name].append(round_seconds[name])
                tokens[name].append(round_tokens[name])
        measuring[0] = False
        after = _device_allocations(device)
        allocations = None if after is None or allocations is None else after - allocations
        profiles = ({name: profile_kernels(updates[name], device) for name in ("job", "fixed")}
                    if (device.type == "cuda" if kernels is None else kernels) else None)
        late.drain()
    finally:
        batches.close()
    if not seconds["job"]:
        raise RuntimeError(f"jobpath: dynamo compiled during every measured round ({len(discarded)} rounds): "
                           + "; ".join(watch.reasons()[:3]))
    rates = {name: [t / s for t, s in zip(tokens[name], seconds[name])] for name in seconds}
    updates_measured = len(seconds["job"]) + len(discarded)
    out: dict[str, Any] = {
        "compile_s": round(compile_s, 3), "warmup_s": round(warmup_s, 3), "fixed_warmup_s": round(fixed_warmup_s, 3),
        "compilations_in_warmup": warm_graphs,
        "compilations_while_measured": watch.graphs - warm_graphs,
        "rounds_discarded_for_compiling": discarded,
        "seconds": {"compile": round(compile_s, 3), "warmup": round(warmup_s + fixed_warmup_s, 3),
                    "measured": round(sum(sum(v) for v in seconds.values()), 3),
                    "discarded": round(sum(discarded), 3)},
        "fixed_batch": f"{sentences} x {FIXED_LENGTH} tokens per side (random ids), one pass, on the device",
        "shapes_batches": f"the job's own next {len(ahead)} updates, drawn before the rounds and kept on the device",
        "cases": {},
    }
    for name in seconds:
        per_update = [s / block for s in seconds[name]]
        out["cases"][name] = {
            "s_per_update": round(statistics.median(per_update), 4), "s_per_update_spread": spread(per_update, 4),
            "tokens_per_s": round(statistics.median(rates[name]), 1),
            "real_tokens_per_update": round(sum(tokens[name]) / (len(seconds[name]) * block), 1),
            # where the host's time went, per update: waiting for the batch, launching it, reading the last figures
            "host_ms_per_update": {part: round(1e3 * s / (updates_measured * block), 3)
                                   for part, s in host[name].items() if name == "job" or part != "batch"}}
    out["cases"]["job"]["padding_fraction"] = round(1 - sum(job_tokens) / max(sum(padded), 1), 4)
    out["padding_fraction"] = out["cases"]["job"]["padding_fraction"]
    out["ratio_spread"] = ratio_spread(rates["job"], rates["fixed"])   # job / fixed tokens per second, per round
    out["ratio"] = out["ratio_spread"]["median"]
    # the gap split in two: the job's shapes (padding, new sizes) and its data path (batcher, prefetch, copies)
    out["ratio_shapes"] = ratio_spread(rates["shapes"], rates["fixed"])["median"]
    out["ratio_data_path"] = ratio_spread(rates["job"], rates["shapes"])["median"]
    out["device_allocations_while_measured"] = allocations
    out["peak_memory_gib"] = round(peak_memory_gib(device), 2)
    if profiles is not None:
        out["kernels"] = profiles
    return out


def _device_allocations(device: torch.device) -> int | None:
    """How many times the caching allocator has asked the driver for memory (``cudaMalloc``, which
    waits for the device) on ``device``; 0 elsewhere; None where this torch does not count them."""
    if device.type != "cuda":
        return 0
    count = torch.cuda.memory_stats(device).get("num_device_alloc")
    return None if count is None else int(count)


def _timed(device: torch.device, fn: Callable[[], Any], late: ReadLate | None = None) -> float:
    """Wall seconds of ``fn``, between two synchronisations of ``device``; the figures of the last
    update ``late`` holds read before the second (a non-finite loss raises)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    if late is not None:
        late.drain()
    synchronize(device)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=device_name, default="auto")
    parser.add_argument("--quick", action="store_true", help="a tiny model and few updates (seconds on a CPU)")
    parser.add_argument("--steps", type=integer, default=None, help="measured rounds (default 8; quick 3)")
    parser.add_argument("--block", type=integer, default=None, help="updates of each case per round (default 5; quick 3)")
    parser.add_argument("--warmup", type=integer, default=None,
                        help=f"unmeasured updates of each case first (default {WARMUP}; quick 2)")
    parser.add_argument("--experiment", default="table2-base-ende")
    parser.add_argument("--profile", default="h100-x1", help="the one-device cluster profile whose job is measured")
    parser.add_argument("--dataset", default=DATASET)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--compile", choices=COMPILE_MODES, default="auto", help="as the job's config (auto: on a GPU)")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    args = parse_benchmark_args(parser, argv)   # --threads, --note, --out (default reports/benchmarks/jobpath-<device>.json)
    for flag in ("steps", "block"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")
    if args.warmup is not None and args.warmup < 0:
        parser.error("--warmup must not be negative")
    result = measure(args.device, args.quick, steps=args.steps, block=args.block, warmup=args.warmup,
                     experiment=args.experiment, profile=args.profile, dataset=args.dataset, data_dir=args.data_dir,
                     compile=args.compile, precision=args.precision, note=args.note)
    slug = re.sub(r"[^a-z0-9]+", "-", result["device_name"].lower()).strip("-")
    return publish(result, args.out or Path("reports") / "benchmarks" / f"jobpath-{slug}.json")


if __name__ == "__main__":
    main()
