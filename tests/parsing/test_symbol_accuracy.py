"""Teacher-forced accuracy by kind of tree symbol (the parser probe's alignment diagnosis)."""

from __future__ import annotations

import torch

from repro.data.vocab import SharedVocab
from repro.model import Transformer
from repro.model.transformer_config import TransformerConfig
from repro.parsing.symbol_accuracy import symbol_accuracy, symbol_kind

PAIRS = [("the cat sleeps", "(S (NP XX XX )NP (VP XX )VP )S"), ("it rains", "(S (NP XX )NP (VP XX )VP )S")]


def _setup():
    vocab = SharedVocab.train([s for p in PAIRS for s in p] * 2, 64, split="word-level")
    examples = [(vocab.encode(s), vocab.encode(t)) for s, t in PAIRS]
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), d_model=16, d_ff=32,
                                          n_heads=2, n_layers=1, dropout=0.0, max_positions=64))
    return vocab, examples, model


def test_symbol_kinds():
    assert [symbol_kind(s) for s in ("(NP", ")NP", ")", "XX", "NN", ",")] == ["open", "close", "close", "leaf",
                                                                             "leaf", "leaf"]


def test_a_decoder_that_always_says_xx_is_right_on_leaves_only(monkeypatch):
    vocab, examples, model = _setup()
    xx = vocab.encode("XX")[0]
    h = torch.randn(16)
    with torch.no_grad():
        model.output_projection.weight.zero_()
        model.output_projection.weight[xx] = h  # logit of XX = |h|^2 > 0, every other logit 0
    monkeypatch.setattr(model, "decode", lambda tgt_in, memory, mask: h.expand(*tgt_in.shape, 16))
    acc = symbol_accuracy(model, vocab, examples)
    assert acc == {"leaf": 100.0, "open": 0.0, "close": 0.0, "eos": 0.0}
    assert model.training  # the caller's mode is given back


def test_accuracy_counts_every_kind_of_a_real_decoder():
    vocab, examples, model = _setup()
    model.eval()
    acc = symbol_accuracy(model, vocab, examples)
    assert set(acc) == {"leaf", "open", "close", "eos"} and all(0.0 <= v <= 100.0 for v in acc.values())
    assert not model.training
