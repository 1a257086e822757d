"""``repro bench NAME [ARGS...]``: the benchmarks of ``repro.benchmarks`` as one verb.

``python -m repro.benchmarks.NAME`` still works; both run the same ``main``. Every benchmark
alternates its cases round by round and writes its figures as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import importlib

from repro.cli_flags import add_pass_through

#: name -> what it measures
BENCHMARKS = {
    "train_speed": "training step: repro against torch.nn.Transformer (CPU)",
    "decode_speed": "beam and greedy search with the key/value cache against recomputation",
    "matmul_peak": "the sustained matrix-product rate: the yardstick of utilisation",
    "precision_speed": "bf16 against fp32 training steps",
    "check_time": "how long `repro check` takes",
    "gpu": "the paper's update on one device, base and big, eager and compiled, MFU and the peer",
    "mutation": "mutation testing by cosmic-ray: the mutants the claims (paper-level code) and the tests (machinery) "
                "kill (pip install -e .[mutation]; reports/mutation/)",
    "loss_pass": "the dense loss's passes over the logits: repro's one-pass backward against autograd's formula",
    "jobpath": "the training job's own path (batcher, accumulation, compiled objective, prefetch) against the "
               "fixed-shape update at the same tokens per update",
    "attention": "Eq. 1 per call kind of the model (encoder self, decoder causal self, cross), forward and backward: "
                 "the model's call against each SDPA backend forced, the math form and compiled",
    "fused_bytes": "the bytes a compiled update's fused kernels and matrix products move, counted by inductor "
                   "on the CPU (bf16 autocast)",
}

#: a benchmark whose module is named otherwise than the benchmark
MODULES = {"jobpath": "job_path", "attention": "attention_kernels"}


def register(sub: argparse._SubParsersAction) -> None:
    add_pass_through(sub, "bench", "run a benchmark (python -m repro.benchmarks.NAME)", BENCHMARKS,
                     lambda name, rest: importlib.import_module(f"repro.benchmarks.{MODULES.get(name, name)}").main(rest)
                     and 0)
