"""Maximum path length: autograd finds the hops between positions through stacked layers."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from torch import nn

from repro.checks import table1
from repro.claims.outcome import CheckContext
from repro.claims import load_claims
from repro.complexity.layer_types import ConvolutionalLayer, RecurrentLayer
from repro.complexity.path import closed_form, max_path_length, recurrent_path_lengths, stack_path_lengths

from .wrong_layers import VectorisedRecurrent

CLAIMS = {c.id: c for c in load_claims()}
CTX = CheckContext(target=None)


class Shift(nn.Module):
    """y_i = x_i + sum of x_{i-o} for o in offsets (zero beyond the ends): a hand-wired layer."""

    def __init__(self, offsets: list[int]) -> None:
        super().__init__()
        self.offsets = offsets

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        n = x.size(1)
        for o in self.offsets:
            if o > 0:
                out[:, o:] = out[:, o:] + x[:, : n - o]
            else:
                out[:, : n + o] = out[:, : n + o] + x[:, -o:]
        return out


def test_probe_on_a_hand_built_neighbour_stack() -> None:
    n = 7
    lengths = stack_path_lengths(itertools.repeat(Shift([1, -1])), torch.randn(1, n, 2), causal=False, max_depth=20)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    assert torch.equal(lengths, (i - j).abs().clamp(min=1).double())
    assert max_path_length(lengths, causal=False) == n - 1


def test_probe_reports_pairs_a_stack_never_connects() -> None:
    # Offsets of 2 only: odd distances are never reached, however deep the stack.
    lengths = stack_path_lengths(itertools.repeat(Shift([2])), torch.randn(1, 6, 2), causal=True, max_depth=10)
    assert math.isinf(lengths[1, 0].item()) and lengths[2, 0].item() == 1 and lengths[4, 0].item() == 2
    assert math.isinf(max_path_length(lengths, causal=True))


def test_dilated_and_contiguous_convolutions() -> None:
    x = torch.randn(1, 16, 2)
    dilated = (ConvolutionalLayer(2, 2, 2**level) for level in itertools.count())
    contiguous = itertools.repeat(ConvolutionalLayer(2, 2))
    assert max_path_length(stack_path_lengths(dilated, x, causal=True, max_depth=32), causal=True) == 4
    assert max_path_length(stack_path_lengths(contiguous, x, causal=True, max_depth=32), causal=True) == 15


def test_recurrent_path_counts_the_states_passed() -> None:
    n = 6
    lengths = recurrent_path_lengths(RecurrentLayer(3), torch.randn(1, n, 3))
    for i, j in itertools.product(range(n), range(n)):
        assert lengths[i, j].item() == (i - j + 1 if j <= i else math.inf)


def test_closed_forms() -> None:
    assert [closed_form("convolutional-dilated", n, k=3) for n in (3, 9, 10, 27, 28)] == [1, 2, 3, 3, 4]
    assert closed_form("convolutional-contiguous", 32, k=3) == 16
    assert closed_form("restricted", 64, r=9) == 16
    assert closed_form("recurrent", 10) == 10


def test_contiguous_stack_fails_the_log_k_claim() -> None:
    claim = CLAIMS["table1.convolutional.path-length"]
    small = dataclasses.replace(claim, params={**claim.params, "grid": [{"k": 2, "n": [4, 8, 16]}, {"k": 3, "n": [9]}]})
    assert table1.path(small, CTX).passed  # control: the dilated stack
    wrong = dataclasses.replace(small, params={**small.params, "layer": "convolutional-contiguous"})
    measurement = table1.path(wrong, CTX)
    assert measurement.passed is False
    assert measurement.value["log_k(n)"] > 3


def test_vectorised_rnn_fails_the_recurrent_path_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = CLAIMS["table1.recurrent.path-length"]
    assert table1.path(claim, CTX).passed  # control
    monkeypatch.setattr(table1, "RecurrentLayer", VectorisedRecurrent)
    measurement = table1.path(claim, CTX)
    assert measurement.passed is False and "never connected" in measurement.detail


def test_restricted_path_grows_as_n_over_r() -> None:
    claim = CLAIMS["table1.restricted.path-length"]
    small = dataclasses.replace(claim, params={**claim.params, "n": [8, 16, 32], "r": 5, "r_sweep": {"n": 32, "r": [5, 9, 17]}})
    m = table1.path(small, CTX)
    assert m.passed, m.detail
    assert [q["max_path"] for q in m.extra["points"]] == [4, 8, 16, 8, 4]
    # The same layers, judged against the O(1) of full self-attention, fail.
    assert not table1.path(dataclasses.replace(small, expected={"n": 0}), CTX).passed
