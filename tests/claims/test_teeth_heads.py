"""Teeth of sec3.multihead.positions-kept: a head split or merge that exchanges the position axis
with the head axis (a transpose left out, a view in the wrong order) fails it, whatever the weights;
repro's module passes."""

from __future__ import annotations

import pytest
import torch

from repro.audit.adapter import Adapter
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.model.attention import MultiHeadAttention, scaled_dot_product_attention

CLAIM = next(c for c in select_claims(only=["sec3.multihead.positions-kept"]))


def outcome(adapter: Adapter) -> Outcome:
    return run_claim(CLAIM, CHECKERS[CLAIM.checker], adapter, {}).status


class SplitByView(MultiHeadAttention):
    """(batch, n, h d) viewed as (batch, h, n, d): no transpose."""

    def _split(self, x: torch.Tensor, d: int) -> torch.Tensor:
        return x.view(x.size(0), self.n_heads, x.size(1), d)


class MergeByReshape(MultiHeadAttention):
    """Concat(head_1..head_h) as a reshape of (batch, h, n, d_v) to (batch, n, h d_v): no transpose."""

    def forward(self, query, key, value, mask=None, **_):
        q, k, v = (self._split(w(x), d) for w, x, d in ((self.w_q, query, self.d_k), (self.w_k, key, self.d_k),
                                                         (self.w_v, value, self.d_v)))
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(out.reshape(query.size(0), query.size(1), self.n_heads * self.d_v))


def adapter_of(module_class: type[MultiHeadAttention]) -> Adapter:
    class Wrong(ReproAdapter):
        name = f"repro with {module_class.__name__}"

        def multi_head_attention(self, d_model: int, n_heads: int):
            return module_class(d_model, n_heads, d_model // n_heads, d_model // n_heads).eval()

        def multi_head_cross_attention(self, d_model: int, n_heads: int):
            return self.multi_head_attention(d_model, n_heads)

    return Wrong()


@pytest.mark.parametrize("module_class", [SplitByView, MergeByReshape],
                         ids=lambda c: c.__name__)
def test_fails_on_heads_that_move_positions(module_class) -> None:
    assert outcome(adapter_of(module_class)) == Outcome.FAIL


def test_passes_on_repro() -> None:
    assert outcome(ReproAdapter()) == Outcome.PASS


def test_not_applicable_without_a_multi_head_module() -> None:
    class OldStyle(Adapter):
        name = "an adapter without multi-head attention"

    assert outcome(OldStyle()) == Outcome.NOT_APPLICABLE
