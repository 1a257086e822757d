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


def audit(claim_id: str, adapter: Adapter, **params):
    claim = CLAIMS[claim_id]
    return audit_claim(dataclasses.replace(claim, params={**claim.params, **params}) if params else claim, adapter)


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
    equations = audit("sec3.pe.equations", OwnDecoderTableDeparts(), d_models=[16, 64])
    assert equations.status == "fail", equations.why
    assert "the model's own decoder table" in equations.check.detail
    layout = audit("sec3.pe.layout", OwnDecoderTableDeparts(), d_model=64, length=128)
    assert layout.status == "fail" and layout.check.measured == "sines-then-cosines", layout.check.detail
    for claim in ("sec3.pe.equations", "sec3.pe.layout"):  # both tables right: both pass
        assert audit(claim, OwnTablesRight(), d_models=[16, 64], d_model=64, length=128).status == "pass", claim


# -- 3. settings the adapter does not report: the mechanism is tested, never called "observed" ----

DECODING_KEYS = ("beam_size", "length_penalty", "max_len_offset")


def small_beam_search(next_log_probs, source_length, *, beam_size, alpha, max_len_offset, eos=2):
    """A plain beam search (GNMT's length penalty) of the probe implementation's own."""
    alive, done = [((), 0.0)], []
    for step in range(source_length + max_len_offset + 1):
        grown = []
        for prefix, logp in alive:
            dist = next_log_probs(prefix)
            for token in torch.topk(dist, beam_size).indices.tolist():
                grown.append((prefix + (token,), logp + float(dist[token])))
        grown.sort(key=lambda h: -h[1])
        alive = []
        for prefix, logp in grown[:2 * beam_size]:
            if prefix[-1] == eos or len(prefix) == source_length + max_len_offset:
                done.append((prefix, logp / ((5 + len(prefix)) / 6) ** alpha))
            elif len(alive) < beam_size:
                alive.append((prefix, logp))
        if not alive:
            break
    best = max(done, key=lambda h: h[1])[0]
    return [t for t in best if t != eos]


class OwnSearchNoSettings(ReproAdapter):
    """An implementation with a search of its own that reports no decoding settings."""

    def search(self, next_log_probs, source_length, vocab_size, *, beam_size, alpha, max_len_offset):
        return small_beam_search(next_log_probs, source_length, beam_size=beam_size, alpha=alpha,
                                 max_len_offset=max_len_offset)

    def hyperparameters(self):
        return {k: v for k, v in super().hyperparameters().items() if k not in DECODING_KEYS}


class OwnSearchWithSettings(OwnSearchNoSettings):
    def hyperparameters(self):
        return {**super().hyperparameters(), "beam_size": 4, "length_penalty": 0.6, "max_len_offset": 50}


class SearchIgnoresAlpha(OwnSearchNoSettings):
    """A search that ranks with alpha 0 whatever it is given."""

    def search(self, next_log_probs, source_length, vocab_size, *, beam_size, alpha, max_len_offset):
        return super().search(next_log_probs, source_length, vocab_size, beam_size=beam_size, alpha=0.0,
                              max_len_offset=max_len_offset)


def test_unreported_settings_test_the_mechanism_and_say_so() -> None:
    record = audit("sec6.length-penalty.observed", OwnSearchNoSettings(), rounds=4)
    assert record.status == "not applicable", (record.status, record.why)
    assert "not observed" in record.why and "mechanism" in record.why and "holds" in record.why
    for claim in ("sec6.beam-size.observed", "sec6.max-output-length.observed"):
        assert audit(claim, OwnSearchNoSettings()).status == "not applicable", claim
    # reported: observed, and passes
    assert audit("sec6.length-penalty.observed", OwnSearchWithSettings(), rounds=4).status == "pass"
    # a broken mechanism still fails, and the record says what was tested
    broken = audit("sec6.length-penalty.observed", SearchIgnoresAlpha(), rounds=4)
    assert broken.status == "fail", broken.why
    assert broken.check.extra.get("tested") == "mechanism" and "not observed" in broken.check.detail


# -- 4. the beam-over-cache check scores ties with the model's own special ids ---------------------

def test_tie_scoring_uses_the_models_start_and_end_ids() -> None:
    from repro.checks.invariants import _score

    fed = []
    parts = ReproAdapter().model(vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_layers=1)

    def forward(src, tgt_in):
        fed.append(tgt_in.clone())
        return parts.module(src, tgt_in)

    own = dataclasses.replace(parts, forward=forward, bos_id=4, eos_id=3)
    src = torch.tensor([[5, 6, 7]])
    score_own = _score(own, src, [8, 9], 0.6)
    assert fed[-1].tolist() == [[4, 8, 9]]            # starts from the model's start id
    default = dataclasses.replace(parts, forward=forward, bos_id=None, eos_id=None)
    score_default = _score(default, src, [8, 9], 0.6)
    assert fed[-1].tolist() == [[1, 8, 9]]            # the protocol's 1 only where the model reports none
    assert score_own != score_default                 # and the end id scored is the model's (3, not 2)
    assert parts.special_ids()[:2] == (1, 2)          # repro reports its own: BOS 1, EOS 2


# -- 5. "paper inconsistent" only within the documented size ----------------------------------------

def test_paper_inconsistent_only_within_the_documented_size() -> None:
    from repro.claims.runner import run_claim
    from repro.claims.outcome import Measurement

    claim = CLAIMS["table3.params-diff.big-vs-c1024"]   # 45 in the paper, 50.4 counted; size 6.4
    assert claim.inconsistency_bound == {"abs": 6.4}

    def measured(value):
        return run_claim(claim, lambda c, ctx: Measurement(value), ReproAdapter())

    assert measured(45.3).status == "pass"
    assert measured(50.36).status == "paper inconsistent"
    assert measured(38.7).status == "paper inconsistent"
    beyond = measured(63.0)       # e.g. untied embeddings or an extra layer: a failure, not the paper's
    assert beyond.status == "fail" and "beyond the paper's own inconsistency" in beyond.detail
    assert measured(float("nan")).status == "fail"
    # the real checker on repro: still within the paper's inconsistency
    assert audit("table3.params-diff.big-vs-c1024", ReproAdapter()).status == "paper inconsistent"


def test_every_numeric_inconsistency_documents_its_size() -> None:
    from repro.claims.outcome import Measurement
    from repro.claims.runner import run_claim

    for claim in CLAIMS.values():
        numeric = isinstance(claim.expected, (int, float)) and not isinstance(claim.expected, bool)
        if claim.inconsistency and numeric:
            assert claim.inconsistency_bound, claim.id
    # a claim file that gives no size still loads (older claim folders), but nothing explains a failure
    unsized = dataclasses.replace(CLAIMS["table3.params-diff.big-vs-c1024"], inconsistency_bound={})
    record = run_claim(unsized, lambda c, ctx: Measurement(50.36), ReproAdapter())
    assert record.status == "fail" and "no size documented" in record.detail
