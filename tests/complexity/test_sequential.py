"""Sequential operations: the depth of the dependency chain of a forward pass."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from repro.checks import table1
from repro.claims.outcome import CheckContext
from repro.claims import load_claims
from repro.complexity.layer_types import RecurrentLayer
from repro.complexity.sequential import measure_sequential, sequential_operations

from .wrong_layers import VectorisedRecurrent

CLAIMS = {c.id: c for c in load_claims()}


class Chain(nn.Module):
    """`steps` dependent tanh's, then views (free), then two independent ops on the result."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = torch.tanh(x)
        x = x.reshape(x.size(0), -1).unsqueeze(0).transpose(0, 1)  # views only
        return torch.stack([x.exp(), x.sin()])


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_depth_of_a_hand_built_chain(steps: int) -> None:
    # steps tanh's, the views add nothing, exp/sin run side by side (+1), stack (+1).
    assert sequential_operations(Chain(steps), torch.randn(1, 4, 3)) == steps + 2


def test_a_copy_is_an_operation() -> None:
    class Copy(nn.Module):
        def forward(self, x):
            return x.transpose(1, 2).reshape(x.size(0), -1)  # non-contiguous: clone, then a view

    assert sequential_operations(Copy(), torch.randn(1, 4, 3)) == 1


def test_parallel_branches_do_not_add() -> None:
    class Wide(nn.Module):
        def forward(self, x):
            return sum(torch.tanh(x * i) for i in range(6))  # 6 branches of depth 2, summed in a chain

    # each branch: mul, tanh (depth 2); the sum is a chain of 6 adds (0 + b0 is a python int add)
    assert sequential_operations(Wide(), torch.randn(2, 3)) == 2 + 6


def test_in_place_ops_deepen_their_target() -> None:
    class InPlace(nn.Module):
        def forward(self, x):
            y = x.clone()
            y.mul_(2).add_(1)
            return y * 3

    assert sequential_operations(InPlace(), torch.randn(3)) == 4


def test_recurrent_depth_is_three_ops_per_position() -> None:
    points = measure_sequential(lambda: RecurrentLayer(4), [5, 10], 4).points
    assert points[1]["depth"] - points[0]["depth"] == 3 * 5  # U h, + W x_t, tanh per step


def test_vectorised_rnn_fails_the_recurrent_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = CLAIMS["table1.recurrent.sequential-ops"]
    ctx = CheckContext(target=None)
    right = table1.sequential(claim, ctx)
    assert claim.within(right.value)  # control
    monkeypatch.setitem(table1.LAYERS, "recurrent", lambda d: VectorisedRecurrent(d))
    wrong = table1.sequential(claim, ctx)
    assert wrong.value == pytest.approx(0.0, abs=1e-6)
    assert not claim.within(wrong.value)
    assert wrong.extra["points"][-1]["depth"] < right.extra["points"][-1]["depth"]
