"""Teeth of the claims the fifth round of fresh mistakes (mut5) added or strengthened: each fails on
the class of mistake that escaped every claim before it, and passes on repro's own code.

- ``sec5.batch.compiled-shapes``: the padding a compiled job's objective adds before its one graph
  (a filler row for a pass of one sentence, a PAD column for a one-position side) must weigh nothing;
- ``table2.bleu.protocol``: the compound split's character class is the script's ``\\S`` (a hyphen
  after ``U.S.`` is split too), not only word characters;
- ``sec5.batch-tokens.observed-one-gpu``: the tokens of an update as the loop's own batch source
  gives them (the CPU's, and the GPU's prefetcher), not as the batcher would;
- ``sec6.beam.trained-probabilities``: the search scores its output with the probabilities the
  training objective assigns it;
- ``sec6.max-output-length.observed``: every search the evaluation offers (beam, greedy) stops at
  input + 50.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

import repro.decode.translate as translate
import repro.eval.bleu as bleu
import repro.train.compiled as compiled
import repro.train.loop as loop
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.data.vocab import EOS, PAD
from repro.model import Transformer
from repro.train.prefetch import Sequential, prefetcher

CLAIMS = {c.id: c for c in select_claims()}


def outcome(claim_id: str) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def _padded(fill_target: int, source_first: int | None = EOS):
    """``at_least_two`` whose filler row's target, or PAD column's target, is ``fill_target`` and whose
    filler source starts with ``source_first`` (None: a filler source of PAD only)."""

    def wrong(src, tgt_in, tgt_out):
        if src.size(1) < 2:
            src = F.pad(src, (0, 2 - src.size(1)), value=PAD)
        if tgt_in.size(1) < 2:
            tgt_in = F.pad(tgt_in, (0, 2 - tgt_in.size(1)), value=PAD)
            tgt_out = F.pad(tgt_out, (0, 2 - tgt_out.size(1)), value=fill_target)
        if src.size(0) < 2:
            filler_src = torch.full((1, src.size(1)), PAD, dtype=src.dtype)
            if source_first is not None:
                filler_src[:, 0] = source_first
            filler_in = torch.full((1, tgt_in.size(1)), PAD, dtype=tgt_in.dtype)
            filler_in[:, 0] = 1
            src, tgt_in = torch.cat([src, filler_src]), torch.cat([tgt_in, filler_in])
            tgt_out = torch.cat([tgt_out, torch.full_like(filler_in, fill_target)])
        return src, tgt_in, tgt_out

    return wrong


def test_compiled_shapes_passes_on_repro():
    assert outcome("sec5.batch.compiled-shapes") == Outcome.PASS


@pytest.mark.parametrize("wrong", [_padded(EOS), _padded(PAD, source_first=None)],
                         ids=["padding-trained-as-eos", "filler-source-of-pad-only"])
def test_compiled_shapes_fails_when_the_padding_weighs_something(wrong):
    with mock.patch.object(compiled, "at_least_two", wrong):
        assert outcome("sec5.batch.compiled-shapes") == Outcome.FAIL


def test_compiled_shapes_fails_when_the_compiled_call_rescales_the_loss():
    original = compiled.CompiledObjective.forward

    def halved(self, src, tgt_in, tgt_out, scale=1.0):
        return original(self, src, tgt_in, tgt_out, scale * 0.5)

    with mock.patch.object(compiled.CompiledObjective, "forward", halved):
        assert outcome("sec5.batch.compiled-shapes") == Outcome.FAIL


def test_bleu_protocol_fails_when_the_compound_split_reads_word_characters_only():
    with mock.patch.object(bleu, "_COMPOUND", re.compile(r"(\w)-(\w)")):
        assert outcome("table2.bleu.protocol") == Outcome.FAIL


@pytest.mark.parametrize("claim_id", ["sec5.batch-tokens.observed-one-gpu", "sec6.beam.trained-probabilities",
                                      "sec6.max-output-length.observed"])
def test_strengthened_claims_pass_on_repro(claim_id):
    assert outcome(claim_id) == Outcome.PASS


@pytest.mark.parametrize("on_gpu", [False, True], ids=["cpu-source", "gpu-prefetcher"])
def test_tokens_per_update_fails_when_the_loop_s_source_takes_one_pass_per_update(on_gpu):
    """The one-GPU profile accumulates 2 passes per update; a source of either runtime that takes one fails."""
    original = loop.batches_for

    def one_pass(trainer):
        if trainer.runtime.on_gpu != on_gpu:
            return original(trainer)
        return prefetcher(trainer.batcher, 1, pin=False) if on_gpu else Sequential(trainer.batcher, 1)

    with mock.patch.object(loop, "batches_for", one_pass):
        assert outcome("sec5.batch-tokens.observed-one-gpu") == Outcome.FAIL


def test_trained_probabilities_fail_when_the_search_projects_otherwise():
    """Logits scaled by sqrt(d_model) where the model projects for the search (the loss reads the weight)."""
    original = Transformer.project
    with mock.patch.object(Transformer, "project", lambda self, hidden: original(self, hidden) * self.tgt_embed.scale):
        assert outcome("sec6.beam.trained-probabilities") == Outcome.FAIL


def test_max_output_length_fails_when_greedy_search_runs_one_token_past_the_limit():
    original = translate.greedy_decode

    def one_more(model, src, *, max_len_offset, use_cache=True):
        return original(model, src, max_len_offset=max_len_offset + 1, use_cache=use_cache)

    with mock.patch.object(translate, "greedy_decode", one_more):
        assert outcome("sec6.max-output-length.observed") == Outcome.FAIL
