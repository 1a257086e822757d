"""``repro bench NAME [ARGS...]``: the benchmarks of ``repro.benchmarks`` as one verb.

``python -m repro.benchmarks.NAME`` still works; both run the same ``main``. Every benchmark
alternates its cases round by round and writes its figures as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import importlib

#: name -> what it measures
BENCHMARKS = {
    "train_speed": "training step: repro against torch.nn.Transformer (CPU)",
    "decode_speed": "beam and greedy search with the key/value cache against recomputation",
    "matmul_peak": "the sustained matrix-product rate: the yardstick of utilisation",
    "precision_speed": "bf16 against fp32 training steps",
    "check_time": "how long `repro check` takes",
    "gpu": "the paper's update on one device, base and big, eager and compiled, MFU and the peer",
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="run a benchmark (python -m repro.benchmarks.NAME)",
                            description="\n".join(f"{k:16s} {v}" for k, v in BENCHMARKS.items()),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME", help=", ".join(sorted(BENCHMARKS)))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own flags (NAME --help)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    importlib.import_module(f"repro.benchmarks.{args.name}").main(args.args)
    return 0
