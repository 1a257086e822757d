"""``python -m repro.benchmarks.gpu`` runs on any device and writes the figures docs/cluster.md
and docs/benchmarks.md quote once a GPU has run it."""

from __future__ import annotations

import json
from pathlib import Path

from repro.benchmarks import gpu


def test_the_benchmark_runs_on_the_cpu_and_writes_its_fields(tmp_path: Path) -> None:
    out = tmp_path / "gpu-cpu.json"
    gpu.main(["--device", "cpu", "--models", "base", "--sentences", "2", "--length", "6", "--vocab", "200",
              "--steps", "1", "--warmup", "0", "--peak-seconds", "0.05", "--peak-n", "64", "--out", str(out)])
    data = json.loads(out.read_text())
    for field in ("mfu_base", "peer_ratio_base", "device_name", "torch", "cuda", "peak_tflops", "mfu_formula"):
        assert field in data
    base = data["models"]["base"]
    assert set(base["cases"]) == {"repro eager", "torch.nn.Transformer"}   # compiled only on a GPU by default
    assert data["mfu_base"] > 0 and data["peer_ratio_base"] > 0 and base["parameters"] > 40_000_000
