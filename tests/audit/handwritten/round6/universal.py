"""Weights shared across depth, as the Universal Transformer (Dehghani et al., 2019) and ALBERT do,
written the way it is often written by accident too: ``nn.ModuleList([layer] * n)`` holds one
layer n times, so each stack applies the same parameters at every depth. Everything else is
:mod:`per_head`'s base model (issue 43, sixth round). Without the Universal Transformer's adaptive
halting and per-step timing signal: the one departure is the sharing, against "they use
different parameters from layer to layer" (Section 3.3) and N = 6 distinct layers, which also
leaves Table 3's absolute parameter counts short (the counts count unique parameters)."""

from __future__ import annotations

from torch import nn

from repro.audit.adapter import Adapter
from tests.audit.handwritten.round6.per_head import DecoderLayer, EncoderLayer, PerHeadAdapter, Transformer


class SharedDepthTransformer(Transformer):
    def stacks(self, d_model, h, d_ff, n, dropout):
        encoder_layer, decoder_layer = EncoderLayer(d_model, h, d_ff, dropout), DecoderLayer(d_model, h, d_ff, dropout)
        return nn.ModuleList([encoder_layer] * n), nn.ModuleList([decoder_layer] * n)


class UniversalAdapter(PerHeadAdapter):
    name = "weights shared across depth, Universal-Transformer style (hand-written)"
    net_class = SharedDepthTransformer


def adapter() -> Adapter:
    return UniversalAdapter()
