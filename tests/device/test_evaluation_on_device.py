"""Evaluation on the device the model is on: the same code on the CPU, the fake accelerator and a real GPU.

A cluster job trained on ``cuda:0`` and then crashed in its evaluation: the beam search was fed source
ids built on the CPU. Every evaluation entry point (BLEU's translation, perplexity, the parser's decode
and probes, the benchmark's reference model) runs here with the model on each device of the ``device``
fixture, and gives the CPU's answer.
"""

from __future__ import annotations

import pytest
import torch

from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import translate, translate_ids
from repro.eval.perplexity import perplexity
from repro.model import Transformer, TransformerConfig
from repro.parsing.alignment import leaf_attention
from repro.parsing.symbol_accuracy import symbol_accuracy
from repro.pipeline.parsing import decode_parses
from repro.runtime import Runtime
from tests.fake_accelerator import on_accelerator

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the man saw a dog", "a cat saw the man",
         "die katze sass auf der matte", "ein hund lief im park", "der mann sah einen hund"] * 20
PARSE_SRC = ["the cat sat", "a dog ran fast", "the man saw a dog"]
PARSE_TGT = ["(S (NP XX XX )NP (VP XX )VP )S", "(S (NP XX XX )NP (VP XX (ADVP XX )ADVP )VP )S",
             "(S (NP XX XX )NP (VP XX (NP XX XX )NP )VP )S"]
SEARCH = DecodeSettings(beam_size=3, alpha=0.6, max_len_offset=6)


@pytest.fixture(scope="module")
def vocab() -> SharedVocab:
    return SharedVocab.train(TEXTS, 300)


@pytest.fixture(scope="module")
def parse_vocab() -> SharedVocab:
    return SharedVocab.train(PARSE_SRC + PARSE_TGT, 60, split="word-level")


def tiny_model(vocab_size: int, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, n_layers=2, d_model=32,
                                         d_ff=64, n_heads=4, attention="fused", max_positions=512)).eval()


def on(model: Transformer, device) -> Transformer:
    model = model.to(device.name)
    if device.fake is not None:
        assert on_accelerator(next(model.parameters()))
    return model


def test_translate_decodes_where_the_model_is(device, vocab):
    sentences = TEXTS[:4]
    expected = translate(tiny_model(len(vocab)), vocab, sentences, SEARCH)
    assert translate(on(tiny_model(len(vocab)), device), vocab, sentences, SEARCH) == expected
    assert translate(on(tiny_model(len(vocab)), device), vocab, sentences, SEARCH, greedy=True) == \
        translate(tiny_model(len(vocab)), vocab, sentences, SEARCH, greedy=True)


def test_translate_ids_takes_a_runtime(device, vocab):
    model = on(tiny_model(len(vocab)), device)
    sources = vocab.encode_batch(TEXTS[:3])
    runtime = Runtime.of(model)
    assert translate_ids(model, sources, SEARCH, runtime=runtime) == translate_ids(tiny_model(len(vocab)), sources, SEARCH)


def test_perplexity_where_the_model_is(device, vocab):
    examples = [(vocab.encode(s), vocab.encode(t)) for s, t in zip(TEXTS[:4], TEXTS[4:8])]
    expected = perplexity(tiny_model(len(vocab)), examples)
    measured = perplexity(on(tiny_model(len(vocab)), device), examples)
    assert measured.tokens == expected.tokens
    assert measured.ppl == pytest.approx(expected.ppl, rel=1e-4)


def test_parser_decode_and_probes_where_the_model_is(device, parse_vocab):
    examples = [(parse_vocab.encode(s), parse_vocab.encode(t)) for s, t in zip(PARSE_SRC, PARSE_TGT)]
    cpu, moved = tiny_model(len(parse_vocab)), on(tiny_model(len(parse_vocab)), device)
    settings = DecodeSettings(beam_size=4, alpha=0.3, max_len_offset=10)
    assert decode_parses(moved, parse_vocab, PARSE_SRC, settings) == decode_parses(cpu, parse_vocab, PARSE_SRC, settings)
    assert symbol_accuracy(moved, parse_vocab, examples) == symbol_accuracy(cpu, parse_vocab, examples)
    assert leaf_attention(moved, parse_vocab, examples) == leaf_attention(cpu, parse_vocab, examples)


def test_benchmark_reference_model_runs_where_it_is(device):
    from repro.benchmarks.train_speed import ReferenceTransformer, make_batch

    torch.manual_seed(0)
    reference = ReferenceTransformer(50, 32, 4, 1, 64, 0.0).to(device.name)
    batch = make_batch(4, 8, 50)
    logits = reference(batch.src.to(device.name), batch.tgt_in.to(device.name))
    assert tuple(logits.shape)[:2] == tuple(batch.tgt_in.shape)
