"""Section 3.2, Eq. 1 per call of the model: which scaled dot-product attention kernel is fastest.

The base model's update (780 sentences x 32 tokens per side) calls Eq. 1 18 times: 6 encoder
self-attentions and 6 encoder-decoder (cross) attentions, whose source padding reaches the fused
kernel as an additive bias (:func:`repro.model.attention.aligned_bias`), and 6 decoder
self-attentions, causal, passed as a flag (flash-eligible). On an H200 these took 7.5 ms of a 38 ms
update; at length 32 the bytes they must move take far less. This times one call of each kind,
forward and backward (q, k and v require grad, a random upstream gradient), in several variants:

- as the model runs it (:func:`repro.model.attention.fused_attention`, as
  :class:`~repro.model.attention.MultiHeadAttention` calls it for that kind, cuDNN left out as a
  training process does: :func:`~repro.model.attention.train_with_shape_free_kernels`);
- the same call with each SDPA backend forced (flash, memory-efficient, cuDNN, math);
- for the causal kind, the memory-efficient kernel with the causal mask as an aligned bias;
- Eq. 1's math form, softmax(QK^T / sqrt(d_k) + bias) V, under ``torch.compile`` (optional);
- as the model's compiled graph runs it: the model's call under ``torch.compile`` (optional; on a GPU
  that is the math form, :data:`repro.model.attention.INDUCTOR_FORM_DEVICES`).

A variant the backend refuses (not eligible at these inputs) records its error, not a time. Each
variant's output and dq are compared with Eq. 1 in fp32 (IEEE, float64 on a CPU) on the same
inputs: a NaN or an error past the precision's tolerance makes it ``wrong``, untimed and never the
fastest. Times are per call, a block of ``--calls`` calls per variant and round (CUDA events on a
GPU, where a sleep kernel first lets the host queue the whole block, so the figure is device time),
the variants alternating within each round; the median over ``--rounds`` rounds, after a warm-up
round. Beside each kind: the bytes a call must move at the least (forward: q, k, v read and o
written once; backward: q, k, v, o and dO read, dq, dk and dv written), for the reader to divide by
a bandwidth.

    repro bench attention [--device cuda] [--model base|big] [--batch 780] [--length 32] [--heads 8] [--rounds 7] [--calls 20] [--precision auto] [--no-compile]

Defaults on a CPU: 8 sentences, 3 rounds, 2 calls per block, no compilation (seconds in all).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from repro.argtypes import OneLineParser, positive_int
from repro.benchmarks.machine import environment, parse_benchmark_args, publish, ratio_spread, spread
from repro.cli_flags import device_name
from repro.model.arithmetic import ieee_fp32
from repro.model.attention import fused_attention, scaled_dot_product_attention, train_with_shape_free_kernels
from repro.model.precision import PRECISIONS
from repro.model.presets import get_preset
from repro.runtime import Runtime

#: (q, k, v) -> Eq. 1's output, for one kind's mask
Attend = Callable[[Tensor, Tensor, Tensor], Tensor]
#: the variant the others are compared with
MODEL = "as the model runs it"
#: relative error of the output or dq past which a variant is ``wrong``, by the inputs' dtype
#: (fp32 on a GPU may run TF32 products or the fused kernels' tensor-core paths: ~1e-3)
TOLERANCE = {torch.bfloat16: 3e-2, torch.float32: 5e-3}
#: how long the device sleeps before each timed block on CUDA while the host queues it
LEAD_S = 0.02


@dataclass(frozen=True)
class CallKind:
    """One of the model's calls of Eq. 1 (Section 3.2.3), with the mask the model passes."""

    name: str
    mask: Tensor | None   # key padding, (batch, 1, 1, keys), True where a key may be attended
    causal: bool
    device: torch.device

    def boolean_mask(self, queries: int, keys: int) -> Tensor:
        """The whole mask (padding and the causal triangle), for the math forms and the reference."""
        if not self.causal:
            return self.mask
        tril = torch.ones(queries, keys, dtype=torch.bool, device=self.device).tril(keys - queries)[None, None]
        return tril if self.mask is None else self.mask & tril


def call_kinds(batch: int, length: int, device: torch.device, gen: torch.Generator) -> list[CallKind]:
    """The three kinds at ``batch`` sentences of ``length`` tokens: each padded kind with its own key
    lengths, drawn in [3/4 length, length] (a length bucket's spread)."""
    def padding() -> Tensor:
        keys = torch.randint(max(1, length * 3 // 4), length + 1, (batch,), generator=gen)
        return (torch.arange(length)[None, :] < keys[:, None])[:, None, None, :].to(device)

    return [CallKind("encoder self (padding bias)", padding(), False, device),
            CallKind("decoder self (causal)", None, True, device),
            CallKind("cross (padding bias)", padding(), False, device)]


def as_the_model(kind: CallKind) -> Attend:
    return lambda q, k, v: fused_attention(q, k, v, kind.mask, kind.causal)


def forced(backend: SDPBackend) -> Callable[[CallKind], Attend]:
    """The model's call with only ``backend`` allowed (it raises where that kernel is not eligible)."""
    def build(kind: CallKind) -> Attend:
        def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            with sdpa_kernel([backend]):
                return fused_attention(q, k, v, kind.mask, kind.causal)
        return attend
    return build


def efficient_causal_bias(kind: CallKind) -> Attend | None:
    """The causal mask as an aligned bias to the memory-efficient kernel (causal kind only)."""
    if not kind.causal:
        return None

    def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            return fused_attention(q, k, v, kind.boolean_mask(q.size(-2), k.size(-2)))
    return attend


def math_compiled(kind: CallKind) -> Attend:
    """Eq. 1's math form (the model's reference attention, the mask as a -inf bias) under torch.compile."""
    def eq1(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return scaled_dot_product_attention(q, k, v, kind.boolean_mask(q.size(-2), k.size(-2)))[0]
    return torch.compile(eq1, dynamic=False)


def as_the_compiled_model(kind: CallKind) -> Attend:
    """The model's call as its compiled training graph holds it (Eq. 1's math form on a GPU)."""
    return torch.compile(lambda q, k, v: fused_attention(q, k, v, kind.mask, kind.causal), dynamic=False)


#: name -> builder (kind -> the call, or None where the variant does not apply to the kind)
VARIANTS: dict[str, Callable[[CallKind], Attend | None]] = {
    MODEL: as_the_model,
    "flash (forced)": forced(SDPBackend.FLASH_ATTENTION),
    "efficient (forced)": forced(SDPBackend.EFFICIENT_ATTENTION),
    "cudnn (forced)": forced(SDPBackend.CUDNN_ATTENTION),
    "math (forced)": forced(SDPBackend.MATH),
    "efficient, explicit causal bias": efficient_causal_bias,
    "math, compiled": math_compiled,
    "as the compiled model runs it": as_the_compiled_model,
}
#: variants that need --compile
COMPILED = {"math, compiled", "as the compiled model runs it"}


@dataclass
class Inputs:
    """q, k, v as the model's projections leave them, (batch, heads, length, d_k) views of
    (batch, length, heads, d_k) leaves that require grad, and an upstream gradient."""

    q: Tensor
    k: Tensor
    v: Tensor
    grad: Tensor

    @classmethod
    def draw(cls, batch: int, heads: int, queries: int, keys: int, d_k: int, dtype: torch.dtype,
             device: torch.device, gen: torch.Generator) -> "Inputs":
        def leaf(length: int) -> Tensor:
            return torch.randn(batch, length, heads, d_k, generator=gen).to(device, dtype).requires_grad_()
        return cls(leaf(queries), leaf(keys), leaf(keys),
                   torch.randn(batch, heads, queries, d_k, generator=gen).to(device, dtype))

    def cast(self, dtype: torch.dtype) -> "Inputs":
        return Inputs(*(t.detach().to(dtype).requires_grad_() for t in (self.q, self.k, self.v)), self.grad.to(dtype))

    def pass_through(self, attend: Attend) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor]]:
        """Forward and backward of one call: the output and (dq, dk, dv)."""
        out = attend(*(t.transpose(1, 2) for t in (self.q, self.k, self.v)))
        return out, torch.autograd.grad(out, (self.q, self.k, self.v), self.grad)

    def floor_bytes(self) -> dict[str, int]:
        """The least a call moves: each operand read or written once."""
        q, kv, size = self.q.numel(), self.k.numel(), self.q.element_size()
        return {"forward": (2 * q + 2 * kv) * size, "backward": (3 * q + 2 * kv + q + 2 * kv) * size}


def key_lengths(kind: CallKind) -> dict[str, float] | None:
    """The spread of the sentences' key lengths of a padded kind."""
    if kind.mask is None:
        return None
    lengths = kind.mask.sum(-1).flatten().float()
    return {"min": int(lengths.min()), "max": int(lengths.max()), "mean": round(float(lengths.mean()), 2)}


def relative_error(found: Tensor, ref: Tensor) -> float:
    found, ref = found.detach().double(), ref.detach().double()
    return float((found - ref).norm() / ref.norm())


def one_line(error: BaseException, caught: list[warnings.WarningMessage]) -> str:
    """An exception and the reasons SDPA warned about, on one line."""
    reasons = dict.fromkeys(str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip())
    text = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    return "; ".join([text, *reasons])[:600]


def trial(attend: Attend, inputs: Inputs, ref: tuple[Tensor, Tensor], tolerance: float) -> dict[str, Any]:
    """Run ``attend`` once: its eligibility and its errors against the reference (out, dq)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out, grads = inputs.pass_through(attend)
        except Exception as error:   # a kernel not eligible here, or a compilation that failed
            return {"status": "error", "error": one_line(error, caught)}
    finite = all(bool(torch.isfinite(t).all()) for t in (out, *grads))
    result: dict[str, Any] = {"rel_err_out": relative_error(out, ref[0]) if finite else math.nan,
                              "rel_err_dq": relative_error(grads[0], ref[1]) if finite else math.nan}
    if not finite:
        result.update(status="wrong", error="NaN or inf in the output or the gradients")
    elif max(result["rel_err_out"], result["rel_err_dq"]) > tolerance:
        result.update(status="wrong", error=f"relative error past the tolerance {tolerance}")
    else:
        result["status"] = "ok"
    return result


def reference(kind: CallKind, inputs: Inputs, device: torch.device) -> tuple[Tensor, Tensor]:
    """Eq. 1 in IEEE fp32 (float64 on a CPU) on the same inputs: (out, dq)."""
    exact = inputs.cast(torch.float64 if device.type == "cpu" else torch.float32)
    with ieee_fp32():
        out, grads = exact.pass_through(
            lambda q, k, v: scaled_dot_product_attention(q, k, v, kind.boolean_mask(q.size(-2), k.size(-2)))[0])
    return out.detach(), grads[0]


@lru_cache(maxsize=None)
def sleep_cycles_per_s() -> float:
    """The rate of ``torch.cuda._sleep``'s cycles on this GPU, timed once with events."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    torch.cuda._sleep(cycles)   # the first launch
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (begin.elapsed_time(end) / 1e3)


def timed_block(run: Callable[[], Any], calls: int, device: torch.device) -> tuple[float, bool]:
    """Seconds per call over ``calls`` back-to-back calls, and whether the device may have waited for
    the host (on CUDA: the lead sleep ended before the block was queued)."""
    if device.type != "cuda":
        start = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - start) / calls, False
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(LEAD_S * sleep_cycles_per_s()))
    begin.record()
    for _ in range(calls):
        run()
    end.record()
    starved = begin.query()
    end.synchronize()
    return begin.elapsed_time(end) / 1e3 / calls, starved


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=device_name, default="auto")
    parser.add_argument("--model", choices=("base", "big"), default="base", help="heads and d_k of Table 3's model")
    parser.add_argument("--batch", type=positive_int, default=None, help="sentences (default 780 on a GPU, 8 on a CPU)")
    parser.add_argument("--length", type=positive_int, default=32, help="tokens per sentence, each side")
    parser.add_argument("--heads", type=positive_int, default=None, help="default: the model's (8 base, 16 big)")
    parser.add_argument("--rounds", type=positive_int, default=None, help="timed rounds (default 7 on a GPU, 3 on a CPU)")
    parser.add_argument("--calls", type=positive_int, default=None, help="calls per timed block (default 20 GPU, 2 CPU)")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help="auto: bf16 on a GPU that computes it")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="also time Eq. 1's math form under torch.compile (default: on a GPU only)")
    args = parse_benchmark_args(parser, argv)
    cfg = get_preset(args.model).model
    runtime = Runtime.resolve(args.device, args.precision, dims=(cfg.d_model, cfg.d_ff))
    device, gpu = runtime.device, runtime.on_gpu
    train_with_shape_free_kernels()   # the training process's kernels
    batch, heads = args.batch or (780 if gpu else 8), args.heads or cfg.n_heads
    rounds, calls = args.rounds or (7 if gpu else 3), args.calls or (20 if gpu else 2)
    compile_ = gpu if args.compile is None else args.compile
    dtype = runtime.precision.dtype   # what q, k and v are under the model's autocast
    gen = torch.Generator().manual_seed(0)
    kinds: dict[str, Any] = {}
    cases: dict[tuple[str, str], Callable[[], Any]] = {}
    for kind in call_kinds(batch, args.length, device, gen):
        inputs = Inputs.draw(batch, heads, args.length, args.length, cfg.d_k, dtype, device, gen)
        ref = reference(kind, inputs, device)
        variants: dict[str, Any] = {}
        for name, build in VARIANTS.items():
            if name in COMPILED and not compile_:
                variants[name] = {"status": "skipped", "error": "not run: --no-compile (the default on a CPU)"}
                continue
            attend = build(kind)
            if attend is None:
                continue
            with runtime.autocast():
                variants[name] = trial(attend, inputs, ref, TOLERANCE[dtype])
            if variants[name]["status"] == "ok":
                cases[kind.name, name] = lambda attend=attend, inputs=inputs: inputs.pass_through(attend)
        kinds[kind.name] = {"causal": kind.causal, "floor_bytes": inputs.floor_bytes(),
                            "key_lengths": key_lengths(kind),
                            "variants": variants}
    seconds: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    starved: dict[tuple[str, str], int] = {case: 0 for case in cases}
    with runtime.autocast():
        for i in range(1 + rounds):   # the first round warms up (and compiles): not kept
            for case, run in cases.items():
                s, late = timed_block(run, calls, device)
                if i:
                    seconds[case].append(s)
                    starved[case] += late
    for (kind_name, name), values in seconds.items():
        kinds[kind_name]["variants"][name].update(
            s_per_call=statistics.median(values), spread=spread(values, 9),
            **({"rounds_host_bound": starved[kind_name, name]} if gpu else {}))
    for kind_name, kind in kinds.items():
        timed = {name: v for name, v in kind["variants"].items() if v["status"] == "ok"}
        fastest = min(timed, key=lambda name: timed[name]["s_per_call"], default=None)
        kind["fastest"] = fastest
        if fastest is not None and MODEL in timed:
            kind["speedup_over_model"] = ratio_spread(seconds[kind_name, MODEL], seconds[kind_name, fastest])
    name = torch.cuda.get_device_name(device) if gpu else "cpu"
    out: dict[str, Any] = {
        "benchmark": "attention", **environment(args.note), "device": str(device), "device_name": name,
        "precision": runtime.precision.name, "precision_reason": runtime.precision.reason,
        "shape": {"batch": batch, "length": args.length, "heads": heads, "d_k": cfg.d_k, "dtype": str(dtype),
                  "model": args.model},
        "rounds": rounds, "calls_per_block": calls, "compile": compile_,
        "timing": "CUDA events around a block queued behind a sleep kernel (device time)" if gpu
                  else "perf_counter around a block (wall time)",
        "tolerance": TOLERANCE[dtype], "kinds": kinds,
    }
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    published = publish(out, args.out or Path("reports") / "benchmarks" / f"attention-{slug}.json")
    print(f"{name}, {runtime.precision.name}, {batch} x {args.length} tokens, {heads} heads of {cfg.d_k}; "
          f"median of {rounds} rounds of {calls} calls")
    print(table(kinds))
    return published


def table(kinds: dict[str, Any]) -> str:
    """The per-kind summary: each variant's microseconds per call (or why none) and the fastest."""
    lines = [f"{'kind':<28} {'variant':<32} {'us/call':>9} {'err out':>9} {'err dq':>9}  note"]
    for kind_name, kind in kinds.items():
        for name, v in kind["variants"].items():
            us = f"{v['s_per_call'] * 1e6:9.1f}" if "s_per_call" in v else f"{'-':>9}"
            errs = "".join(f" {v[key]:9.1e}" if key in v else f" {'-':>9}" for key in ("rel_err_out", "rel_err_dq"))
            note = v["status"] if v["status"] == "ok" else f"{v['status']}: {v.get('error', '')[:90]}"
            lines.append(f"{kind_name:<28} {name:<32} {us}{errs}  {note}")
        speedup = kind.get("speedup_over_model", {}).get("median")
        lines.append(f"{kind_name:<28} fastest: {kind['fastest']} ({speedup}x the model's call; "
                     f"floor {sum(kind['floor_bytes'].values()) / 1e6:.2f} MB fwd+bwd)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
