"""The bytes a compiled update's kernels move, counted by inductor itself: no GPU needed.

On a GPU the element-wise and reduction kernels that inductor fuses around each sub-layer (residual
add, dropout, layer normalisation, their backward) are bound by memory traffic, not arithmetic
(issue 42: 14.1 of the base update's 38.3 ms on an H200, for ~1 ms of matrix-product-free floor per
sub-layer pass). Inductor's scheduler knows what each kernel reads and writes; this compiles the
training objective (forward and backward, bf16 autocast, dynamic shapes as the loop compiles it) on
the CPU and sums those bytes per graph, apart for the matrix products (extern kernels, the same on any
device) and for the fused kernels (where a change of dtype or fusion shows).

``--stream fp32`` keeps the stream between sub-layers in fp32 (forward hooks widening each sub-layer
connection's output, as autocast's fp32 layer norm left it before it was kept in the sub-layer's
dtype); the default measures the model as it is.

    repro bench fused_bytes [--layers 2] [--sentences 256] [--length 32] [--vocab 1000] [--stream model|fp32]

The counts are inductor's estimates on the CPU's fused graph (``GraphLowering.count_bytes``, a
graph's nodes after fusion); a GPU's Triton fusion differs in detail. They compare two variants of one
model, measured the same way, not a device's time.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch._inductor.graph import GraphLowering
from torch._inductor.scheduler import ExternKernelSchedulerNode

from repro.argtypes import OneLineParser, integer
from repro.benchmarks.machine import environment, parse_benchmark_args, publish
from repro.benchmarks.train_speed import make_batch
from repro.model.layers import SublayerConnection
from repro.model.transformer import Transformer
from repro.model.transformer_config import TransformerConfig
from repro.train.compiled import CompiledObjective
from repro.train.loss import TranslationLoss

__all__ = ["measure", "main"]

STREAMS = ("model", "fp32")


def _widen(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
    return output.float()


def measure(*, layers: int = 2, sentences: int = 256, length: int = 32, vocab: int = 1000,
            stream: str = "model") -> dict[str, Any]:
    """Compile the objective of a base-width model of ``layers`` layers per stack and run one update's
    forward and backward on ``sentences x length`` tokens per side; inductor's byte counts per graph."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, got {stream!r}")
    graphs: list[dict[str, int]] = []
    count_bytes = GraphLowering.count_bytes

    def counted(graph: GraphLowering) -> Any:
        found = count_bytes(graph)
        nodes = graph.scheduler.nodes
        extern = sum(n.get_read_write_buffers_sizes() for n in nodes if isinstance(n, ExternKernelSchedulerNode))
        graphs.append({"matrix_products_bytes": extern, "fused_bytes": found[0] - extern,
                       "kernels": sum(not isinstance(n, ExternKernelSchedulerNode) for n in nodes)})
        return found

    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, n_layers=layers, attention="fused")
    model = Transformer(cfg)
    if stream == "fp32":
        for module in model.modules():
            if isinstance(module, SublayerConnection):
                module.register_forward_hook(_widen)
    objective = CompiledObjective(TranslationLoss(model, 0.1, impl="dense"))
    batch = make_batch(sentences, length, vocab)
    began = time.perf_counter()
    GraphLowering.count_bytes = counted   # type: ignore[method-assign]
    try:
        with torch._inductor.config.patch(force_disable_caches=True), _metrics_logged():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss, _, _ = objective(batch.src, batch.tgt_in, batch.tgt_out, torch.tensor(1.0 / batch.tgt_tokens))
            loss.backward()
    finally:
        GraphLowering.count_bytes = count_bytes   # type: ignore[method-assign]
    if len(graphs) != 2:
        raise RuntimeError(f"fused_bytes: expected a forward and a backward graph, inductor counted {len(graphs)}")
    named = dict(zip(("forward", "backward"), graphs))
    return {"benchmark": "fused_bytes", **environment(""), "stream": stream, "layers": layers,
            "tokens_per_side": sentences * length, "shape": f"{sentences} x {length} tokens per side",
            "vocab": vocab, "precision": "bf16 autocast", "compile_s": round(time.perf_counter() - began, 1),
            "graphs": named, "fused_bytes": sum(g["fused_bytes"] for g in graphs),
            "matrix_products_bytes": sum(g["matrix_products_bytes"] for g in graphs),
            "counted_by": "inductor's GraphLowering.count_bytes on the CPU (fused graph, sizes as traced)"}


@contextmanager
def _metrics_logged() -> Iterator[None]:
    """Inductor counts a graph's bytes only while its metrics log is on; its lines are dropped here."""
    logger = logging.getLogger("torch._inductor.compile_fx")
    handlers, propagate = logger.handlers[:], logger.propagate
    torch._logging.set_logs(inductor_metrics=True)
    logger.handlers[:], logger.propagate = [logging.NullHandler()], False
    try:
        yield
    finally:
        torch._logging.set_logs()
        logger.handlers[:], logger.propagate = handlers, propagate


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=integer, default=2)
    parser.add_argument("--sentences", type=integer, default=256)
    parser.add_argument("--length", type=integer, default=32)
    parser.add_argument("--vocab", type=integer, default=1000)
    parser.add_argument("--stream", choices=STREAMS, default="model")
    args = parse_benchmark_args(parser, argv)
    for flag in ("layers", "sentences", "length", "vocab"):
        if getattr(args, flag) < 2:
            parser.error(f"--{flag} must be at least 2")
    result = measure(layers=args.layers, sentences=args.sentences, length=args.length, vocab=args.vocab,
                     stream=args.stream)
    return publish(result, args.out or Path("reports") / "benchmarks" / f"fused-bytes-{args.stream}.json")


if __name__ == "__main__":
    main()
