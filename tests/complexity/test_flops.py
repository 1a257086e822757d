"""Complexity per layer: the log-log fit and the FLOP counts behind Table 1's first column."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from repro.checks import table1
from repro.claims import load_claims
from repro.complexity.flops import count_flops, fit_exponents, measure_complexity
from repro.complexity.layer_types import RestrictedSelfAttentionLayer, SelfAttentionLayer, banded_attention

from .wrong_layers import BandMaskedFullAttention

CLAIMS = {c.id: c for c in load_claims()}


def test_fit_recovers_known_exponents() -> None:
    points = [{"n": n, "d": d, "y": 3.0 * n**2.5 * d**0.7} for n, d in itertools.product([8, 16, 64], [4, 32, 50])]
    fit = fit_exponents(points, ["n", "d"], "y")
    assert fit.exponents["n"] == pytest.approx(2.5, abs=1e-9)
    assert fit.exponents["d"] == pytest.approx(0.7, abs=1e-9)
    assert math.exp(fit.log_coefficient) == pytest.approx(3.0, rel=1e-9)
    assert fit.max_residual < 1e-9


def test_fit_under_noise_and_mixed_terms() -> None:
    gen = torch.Generator().manual_seed(0)
    grid = list(itertools.product([64, 128, 256, 512], [4, 8]))
    noisy = [{"n": n, "d": d, "y": n * d**2 * math.exp(0.02 * torch.randn(1, generator=gen).item())} for n, d in grid]
    fit = fit_exponents(noisy, ["n", "d"], "y")
    assert fit.exponents == pytest.approx({"n": 1.0, "d": 2.0}, abs=0.05)
    # n^2 d + n d^2 with n >> d: the leading term dominates, and the residual shows the mixture.
    mixed = [{"n": n, "d": d, "y": n * n * d + n * d * d} for n, d in grid]
    fit = fit_exponents(mixed, ["n", "d"], "y")
    assert fit.exponents["n"] == pytest.approx(2.0, abs=0.1)
    assert fit.max_residual > 1e-3


def test_fit_needs_more_points_than_unknowns() -> None:
    with pytest.raises(ValueError, match="cannot determine"):
        fit_exponents([{"n": 2, "y": 4}, {"n": 4, "y": 16}], ["n", "x"], "y")


def test_attention_count_leaves_out_the_projections() -> None:
    n, d = 24, 8
    flops, projections = count_flops(SelfAttentionLayer(d), torch.randn(1, n, d))
    assert flops == 4 * n * n * d  # QK^T and weights @ V, 2 FLOPs per multiply-add
    assert projections == 4 * 2 * n * d * d


def test_banded_attention_equals_masked_full_attention() -> None:
    """The cheap band computes the same function as the full matrix with a band mask."""
    torch.manual_seed(0)
    wrong = BandMaskedFullAttention(6, 5).double()
    right = RestrictedSelfAttentionLayer(6, 5).double()
    right.load_state_dict(wrong.state_dict())
    x = torch.randn(2, 11, 6, dtype=torch.float64)
    torch.testing.assert_close(right(x), wrong(x))
    with pytest.raises(ValueError, match="odd"):
        banded_attention(x, x, x, 4)


def test_restricted_flops_grow_as_r_n_d() -> None:
    result = measure_complexity(lambda d, r: RestrictedSelfAttentionLayer(d, r), {"n": [32, 64], "d": [4, 8], "r": [3, 5]})
    assert result.fit.exponents == pytest.approx({"n": 1.0, "d": 1.0, "r": 1.0}, abs=1e-6)
    assert {"n", "d", "r", "flops"} <= set(result.points[0])  # plottable from the record


def test_band_masked_full_attention_fails_the_restricted_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = CLAIMS["table1.restricted.complexity"]
    small = dataclasses.replace(claim, params={**claim.params, "grid": {"n": [32, 64, 128], "d": [8, 16], "r": [3, 5]}})
    assert table1.complexity(small, table1_context()).passed  # control
    monkeypatch.setitem(table1.LAYERS, "restricted", lambda d, r: BandMaskedFullAttention(d, r))
    measurement = table1.complexity(small, table1_context())
    assert measurement.passed is False
    assert measurement.value["n"] == pytest.approx(2.0, abs=0.01)
    assert measurement.value["r"] == pytest.approx(0.0, abs=0.01)


def table1_context():
    from repro.claims.outcome import CheckContext

    return CheckContext(target=None)  # the Table 1 checkers never touch the target
