"""The alignment of leaves to source words through the decoder's encoder-decoder attention (issue 18)."""

from __future__ import annotations

import torch

from repro.data.vocab import SharedVocab
from repro.model import Transformer
from repro.model.transformer_config import TransformerConfig
from repro.parsing.alignment import aligned_leaves, leaf_attention

# "(S (NP XX XX )NP (VP XX )VP )S": leaves at target positions 2, 3 and 6, for words 0, 1 and 2.
LEAVES = [2, 3, 6]
PAIRS = [("the cat sleeps", "(S (NP XX XX )NP (VP XX )VP )S"), ("it rains", "(S (NP XX )NP (VP XX )VP )S")]


def _weights(target_of_query: dict[int, int], heads: int = 2, n_tgt: int = 9, n_src: int = 4) -> torch.Tensor:
    """Queries not in ``target_of_query`` look at source position 3, which no leaf belongs to."""
    w = torch.full((heads, n_tgt, n_src), 0.1)
    w[:, :, 3] = 0.5
    for query, key in target_of_query.items():
        w[:, query, key] = 1.0
    return w


def test_a_head_on_each_leafs_own_word_counts_every_leaf():
    assert aligned_leaves(_weights({2: 0, 3: 1, 6: 2}), LEAVES).tolist() == [3, 3]


def test_a_head_one_word_behind_or_read_from_the_leafs_input_position_counts_nothing():
    # looking at the previous word, or reading the query one position late (the leaf's own
    # decoder input instead of the position that predicts it): both are misalignments
    assert aligned_leaves(_weights({2: 2, 3: 0, 6: 1}), LEAVES).tolist() == [0, 0]
    assert aligned_leaves(_weights({3: 0, 4: 1, 7: 2}), LEAVES).tolist() == [0, 0]


def test_heads_are_counted_apart():
    w = _weights({2: 0, 3: 1, 6: 2})
    w[1] = 0.1
    w[1, :, 2] = 1.0  # head 2 always on the last word: right once
    assert aligned_leaves(w, LEAVES).tolist() == [3, 1]


def _model(n_layers: int = 2):
    vocab = SharedVocab.train([s for p in PAIRS for s in p] * 2, 64, split="word-level")
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), d_model=16, d_ff=32,
                                          n_heads=2, n_layers=n_layers, dropout=0.0, max_positions=64,
                                          attention="fused"))
    return vocab, model


def test_a_real_decoder_reports_each_layer_and_chance_and_is_left_as_it_was():
    vocab, model = _model()
    examples = [(vocab.encode(s), vocab.encode(t)) for s, t in PAIRS]
    share = leaf_attention(model, vocab, examples)
    assert set(share) == {"layer_1", "layer_2", "chance"}
    assert share["chance"] == round(100 * (3 / 3 + 2 / 2) / 5, 2)
    assert all(0.0 <= v <= 100.0 for v in share.values())
    assert model.training and all(not l.cross_attn.record_weights for l in model.decoder_layers)


def test_a_decoder_that_attends_by_position_is_aligned():
    """Queries and keys that carry only their position, and a target whose leaves sit at the
    positions of their words: every head of every layer lands on the leaf's word."""
    vocab, model = _model(n_layers=1)
    attention = model.decoder_layers[0].cross_attn
    examples = [(vocab.encode("the cat sleeps"), vocab.encode("XX XX XX"))]

    def positional(query, key, value, mask=None, cache=None, static_kv=False):
        n, m = query.size(1), key.size(1)
        scores = -(torch.arange(n)[:, None] - torch.arange(m)[None, :]).abs().float()
        attention.last_weights = scores.softmax(-1).expand(query.size(0), attention.n_heads, n, m)
        return torch.zeros_like(query)

    attention.forward = positional
    assert leaf_attention(model, vocab, examples)["layer_1"] == 100.0
    # per-word targets: the i-th token holds the i-th word, so the same decoder is aligned
    per_word = SharedVocab.train(["the cat sleeps", "(S_(NP_XX XX )NP_(VP_XX )VP_)S"] * 2, 64, split="word-level")
    examples = [(per_word.encode("the cat sleeps"), per_word.encode("(S_(NP_XX XX )NP_(VP_XX )VP_)S"))]
    assert leaf_attention(model, per_word, examples)["layer_1"] == 100.0


def test_pairs_without_one_source_token_per_leaf_are_left_out():
    vocab, model = _model()
    examples = [(vocab.encode("the cat"), vocab.encode("(S (NP XX XX )NP (VP XX )VP )S"))]
    assert leaf_attention(model, vocab, examples) == {}
