"""``repro bench loss_pass`` runs end to end on the CPU and tells the two forms of the loss apart."""

from __future__ import annotations

import json
from pathlib import Path

from repro.benchmarks import loss_pass


def test_the_benchmark_runs_and_names_the_passes_it_cannot_fuse(tmp_path: Path) -> None:
    out = tmp_path / "loss.json"
    loss_pass.main(["--device", "cpu", "--tokens", "40", "--vocab", "30", "--rounds", "1", "--no-compile",
                    "--precision", "fp32", "--out", str(out)])
    found = json.loads(out.read_text())
    assert set(found["cases"]) == {"repro (one-pass backward), eager", "autograd's formula, eager"}
    assert found["not_element_wise_backward_ops"]["repro (one-pass backward)"] == []
    assert "aten.scatter_add.default" in found["not_element_wise_backward_ops"]["autograd's formula"]
    assert found["speedup_eager"]["n"] == 1
    assert found["agreement"]["loss_relative"] < 1e-6 and found["agreement"]["gradient_max_abs_over_largest"] < 1e-6
