"""Issue 43, the third round of unseen encoder-decoder families (LED, LongT5 local and
transient-global, BigBirdPegasus, SwitchTransformers, NLLB-MoE and option variants of the covered
ones): each wrong verdict reproduced on a layout of the tests' own (:mod:`tests.audit.layouts`)."""

from __future__ import annotations

import dataclasses

from repro.audit.audit import audit_claim
from repro.claims import load_claims
from repro.claims.outcome import Outcome
from tests.audit.layouts import Layout, LayoutAdapter

CLAIMS = {c.id: c for c in load_claims()}


def reach(adapter):
    return audit_claim(CLAIMS["sec3.encoder.all-positions"], adapter, 0)


# -- a local attention is read on each layer, not through the stack's depth (LongT5, LED) -----------

def test_a_sliding_window_the_stack_hides_is_found_on_one_layer() -> None:
    # window 4, two layers, sentences of 8: the stack reaches every token (it used to pass, 0 blind pairs)
    record = reach(LayoutAdapter(Layout(window=4)))
    assert record.status == Outcome.FAIL, record.why
    assert "stack 0" in record.why and "layer 0" in record.why and "n=8: 12" in record.why, record.why


def test_a_window_wider_than_a_short_sentence_is_found_at_the_long_length() -> None:
    # a window of 127 on either side (LongT5's default radius) covers 8 tokens, not 640
    record = reach(LayoutAdapter(Layout(window=127)))
    assert record.status == Outcome.FAIL and "n=8: 0, n=640: " in record.why, record.why
    assert record.check.measured == 2 * 2 * (640 - 128), record.why   # two ends x two layers x the positions beyond


def test_full_attention_passes_on_the_stack_and_every_layer() -> None:
    record = reach(LayoutAdapter(Layout()))
    assert record.status == Outcome.PASS and record.check.measured == 0, record.why
    assert "layer 1 0 (n=8: 0, n=640: 0)" in record.why, record.why


class StackOnly(LayoutAdapter):
    """Exposes the encoder stack but not its layers."""

    def _parts(self, net, vocab):
        return dataclasses.replace(super()._parts(net, vocab), encoder_layers=None)


def test_without_its_layers_the_stack_is_measured_and_the_reason_says_so() -> None:
    record = reach(StackOnly(Layout(window=4)))
    assert record.status == Outcome.PASS and "layers not exposed" in record.why, record.why
    assert reach(StackOnly(Layout(window=1))).status == Outcome.FAIL   # a reach of 2 in two layers: the stack shows it
