"""Issue 38: the five audit findings, each a probe adapter (repro's own model with one change in
what the adapter shows) on which the audit used to give the wrong verdict."""

from __future__ import annotations

import dataclasses

import torch

from repro.audit.adapter import Adapter
from repro.audit.audit import audit_claim
from repro.audit.repro_adapter import ReproAdapter
from repro.claims import load_claims
from repro.model.positional import sinusoidal_encoding

CLAIMS = {c.id: c for c in load_claims()}


def audit(claim_id: str, adapter: Adapter):
    return audit_claim(CLAIMS[claim_id], adapter)


# -- 1. positional tables not exposed: not applicable, never compared with the paper's -------------

class NoTableShown(ReproAdapter):
    """repro's model (which does add the paper's sinusoids) behind an adapter that shows no table."""

    def positional_encoding(self, length, d_model):
        raise self._missing("positional_encoding")


def test_positions_not_exposed_read_not_applicable_for_both_stacks() -> None:
    record = audit("sec3.pe.both-stacks", NoTableShown())
    assert record.status == "not applicable", (record.status, record.why)
    assert "exposes no positional table" in record.why
    assert audit("sec3.pe.equations", NoTableShown()).status == "not applicable"
    # teeth: the same model with its table shown is measured (and passes)
    assert audit("sec3.pe.both-stacks", ReproAdapter()).status == "pass"


# -- 2. every per-stack table is compared, not only the general one --------------------------------

def _sines_then_cosines(length: int, d_model: int) -> torch.Tensor:
    pe = sinusoidal_encoding(length, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


class OwnDecoderTableDeparts(ReproAdapter):
    """The adapter's general table is the paper's, but the built model declares its own decoder
    table, laid out sines-then-cosines (as a model whose decoder builds its own positions)."""

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        parts = super().model(vocab_size, d_model, n_heads, d_ff, n_layers)
        return dataclasses.replace(parts, decoder_positions=lambda n: _sines_then_cosines(n, d_model))


class OwnTablesRight(ReproAdapter):
    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        parts = super().model(vocab_size, d_model, n_heads, d_ff, n_layers)
        return dataclasses.replace(parts, encoder_positions=lambda n: sinusoidal_encoding(n, d_model),
                                   decoder_positions=lambda n: sinusoidal_encoding(n, d_model))


def test_each_per_stack_table_is_compared() -> None:
    equations = audit("sec3.pe.equations", OwnDecoderTableDeparts())
    assert equations.status == "fail", equations.why
    assert "the model's own decoder table" in equations.check.detail
    layout = audit("sec3.pe.layout", OwnDecoderTableDeparts())
    assert layout.status == "fail" and layout.check.measured == "sines-then-cosines", layout.check.detail
    for claim in ("sec3.pe.equations", "sec3.pe.layout"):  # both tables right: both pass
        assert audit(claim, OwnTablesRight()).status == "pass", claim
