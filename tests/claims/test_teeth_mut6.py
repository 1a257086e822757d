"""Teeth of the claims the sixth round of fresh mistakes (mut6) added or strengthened: each fails on
the class of mistake that escaped every claim before it, and passes on repro's own code.

- ``sec6.decoding.special-ids``: the search (beam and greedy, as the evaluation runs them) never
  emits PAD or BOS, whatever probability the model gives them, and leaves EOS out of its output;
- ``sec3.parameters.all-used``: every trainable parameter takes part in the model's output (W^O
  bypassed kept every shape and every parameter count, and passed every claim);
- ``fig3-5.attention-drawn``: the report's Figures 3-5 draw the last encoder layer's attention with
  dropout off (without the run's checkpoint, ``fig3-5.attention-from-run`` reads "not run", so a
  figure of another layer, or drawn in train mode, passed every claim);
- ``sec5.bpe.shared-vocabulary``: the pairs the run trains on are encoded as the vocabulary was
  learned (a batch encoder without the space before the first word passed);
- ``sec5.data.direction``: the run's encoded pairs hold the source file's sentence as their source;
- ``table2.bleu.protocol``: a corpus with no 4-gram in common scores 0, as multi-bleu.perl (no
  smoothing) scores it (a geometric mean that leaves a zero precision out passed).
"""

from __future__ import annotations

from unittest import mock

import math

import pytest
import torch
from torch import nn

import repro.checks.attention_maps as attention_maps
import repro.decode.stepper as stepper
import repro.eval.bleu as bleu
import repro.decode.translate as translate
import repro.train.data as train_data
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.data.vocab import BOS, EOS, PAD, SharedVocab
from repro.model.attention import MultiHeadAttention

CLAIMS = {c.id: c for c in select_claims()}


def outcome(claim_id: str) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def test_special_ids_pass_on_repro():
    assert outcome("sec6.decoding.special-ids") == Outcome.PASS


def _log_probs_letting_through(*allowed: int):
    """Stepper.log_probs that masks only the special ids not in ``allowed`` (repro masks PAD and BOS)."""
    def log_probs(self, prefix):
        tokens = prefix[:, -1:] if self.cache is not None else prefix
        hidden = self.model.decode(tokens, self.memory, self.src_mask, self.cache)
        logp = self.model.project(hidden[:, -1]).float().log_softmax(-1)
        for special in {PAD, BOS} - set(allowed):
            logp[:, special] = float("-inf")
        return logp
    return log_probs


@pytest.mark.parametrize("allowed", [(BOS,), (PAD,)], ids=["bos-emitted", "pad-emitted"])
def test_special_ids_fail_when_the_search_may_emit_a_special_id(allowed):
    with mock.patch.object(stepper.Stepper, "log_probs", _log_probs_letting_through(*allowed)):
        assert outcome("sec6.decoding.special-ids") == Outcome.FAIL


def test_special_ids_fail_when_the_output_keeps_its_eos():
    original = translate.beam_search

    def with_eos(*args, **kwargs):
        return [hyp + [EOS] for hyp in original(*args, **kwargs)]

    with mock.patch.object(translate, "beam_search", with_eos):
        assert outcome("sec6.decoding.special-ids") == Outcome.FAIL


def test_parameters_all_used_passes_on_repro():
    assert outcome("sec3.parameters.all-used") == Outcome.PASS


def test_parameters_all_used_fails_when_multihead_bypasses_w_o():
    original = MultiHeadAttention.forward

    def without_w_o(self, *args, **kwargs):
        w_o, self._modules["w_o"] = self._modules["w_o"], nn.Identity()
        try:
            return original(self, *args, **kwargs)
        finally:
            self._modules["w_o"] = w_o

    with mock.patch.object(MultiHeadAttention, "forward", without_w_o):
        assert outcome("sec3.parameters.all-used") == Outcome.FAIL


def test_attention_drawn_passes_on_repro():
    assert outcome("fig3-5.attention-drawn") == Outcome.PASS


def _drawn_in_train_mode(model, ids, layer=-1):
    attn = model.encoder_layers[layer].self_attn
    attn.record_weights = True
    try:
        with torch.no_grad():
            model.encode(torch.tensor([list(ids)], dtype=torch.long))
        return attn.last_weights[0].double()
    finally:
        attn.record_weights, attn.last_weights = False, None


_DRAWN = attention_maps.encoder_attention


@pytest.mark.parametrize("wrong", [lambda model, ids, layer=-1: _DRAWN(model, ids, 0), _drawn_in_train_mode],
    ids=["first-layer", "dropout-on"])
def test_attention_drawn_fails_on_another_layer_or_with_dropout_on(wrong):
    with mock.patch.object(attention_maps, "encoder_attention", wrong):
        assert outcome("fig3-5.attention-drawn") == Outcome.FAIL


@pytest.mark.parametrize("claim_id", ["sec5.bpe.shared-vocabulary", "sec5.data.direction"])
def test_data_path_claims_pass_on_repro(claim_id):
    assert outcome(claim_id) == Outcome.PASS


def test_shared_vocabulary_fails_when_the_batch_encoder_drops_the_first_word_s_space():
    def encode_batch(self, texts):
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    with mock.patch.object(SharedVocab, "encode_batch", encode_batch):
        assert outcome("sec5.bpe.shared-vocabulary") == Outcome.FAIL


def test_direction_fails_when_the_pairs_are_encoded_the_other_way_round():
    original = train_data.encode_pairs

    def swapped(vocab, pairs, max_len=None):
        return original(vocab, [(t, s) for s, t in pairs], max_len)

    with mock.patch.object(train_data, "encode_pairs", swapped):
        assert outcome("sec5.data.direction") == Outcome.FAIL


def test_bleu_protocol_fails_when_a_zero_precision_is_left_out_of_the_mean():
    def multi_bleu(hyps, refs):
        s = bleu.multi_bleu_stats(hyps, refs)
        precisions = [c / t if t else 0.0 for c, t in zip(s.correct, s.total)]
        bp = math.exp(1 - s.ref_len / s.hyp_len) if s.hyp_len < s.ref_len else 1.0
        log_mean = sum(math.log(p) for p in precisions if p > 0) / len(precisions)
        return 100 * bp * math.exp(log_mean), [100 * p for p in precisions], bp

    with mock.patch.object(bleu, "multi_bleu", multi_bleu):
        assert outcome("table2.bleu.protocol") == Outcome.FAIL
