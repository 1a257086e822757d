"""Synthetic results of Table 3 at a scale: per-seed records as a job of ``repro submit table3 --scale``
stores them (:mod:`repro.cluster.job_evaluation`), written without training anything."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from repro.results import Provenance, Result, ResultStore


def write_row(results: Path, row: str, metric: str, values: Sequence[float], *, half_width: float = 0.0,
              scale: str = "small", signature: str = "sig1", date: str = "2026-01-01T00:00:00+00:00",
              parameters: int = 2_400_000) -> None:
    """One record per seed (seeds 1, 2, ...) of ``metric`` for ``row``, each with a bootstrap of ``half_width``."""
    store = ResultStore(results)
    for seed, value in enumerate(values, 1):
        prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="multi30k-en-de dev", date=date,
                          scale=f"{scale}: Table 3 row {row}, seed {seed}; not the paper's scale")
        store.write(Result(f"table3-{scale}.{metric}.{row}", value, prov, unit=metric,
                           ci95=(value - half_width, value + half_width)
                           if half_width and math.isfinite(value) else None,
                           extra={"scale": scale, "signature": signature, "row": row, "seed": seed,
                                  "parameters": parameters}), f"seed-{seed}-{signature}")


@pytest.fixture
def scaled_results(tmp_path: Path) -> Callable[[Mapping[str, Mapping[str, Sequence[float]]]], Path]:
    """``scaled_results({"base": {"bleu": [20, 20.2, 19.9], "ppl": [...]}, ...}, half_width=0.3)`` -> the folder."""
    def make(rows: Mapping[str, Mapping[str, Sequence[float]]], half_width: float = 0.0, **kw) -> Path:
        root = tmp_path / "results"
        for row, metrics in rows.items():
            for metric, values in metrics.items():
                write_row(root, row, metric, values, half_width=half_width, **kw)
        return root
    return make
