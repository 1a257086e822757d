"""The whole model: configs, presets, incremental decoding, post-norm, embeddings."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.errors import ConfigError
from repro.model import PRESETS, TABLE3_ROWS, Transformer, TransformerConfig, count_parameters, get_preset


def tiny(**kw) -> TransformerConfig:
    base = dict(src_vocab_size=30, tgt_vocab_size=30, n_layers=2, d_model=16, d_ff=32, n_heads=4, dropout=0.0)
    return TransformerConfig(**{**base, **kw})


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(d_model=30, n_heads=8), "divisible"),
        (dict(dropout=-0.1), "dropout"),
        (dict(dropout=1.0), "dropout"),
        (dict(positional="rotary"), "positional"),
        (dict(n_layers=0), "n_layers"),
        (dict(src_vocab_size=10, tgt_vocab_size=12), "joint source-target vocabulary"),
    ],
)
def test_bad_configs_raise_a_clear_error(fields, message):
    with pytest.raises(ConfigError, match=message):
        TransformerConfig(**fields)


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown preset 'huge'.*base"):
        get_preset("huge")


def test_table3_has_twenty_rows_and_every_row_builds():
    assert len(TABLE3_ROWS) == 20 and TABLE3_ROWS[0] == "base" and TABLE3_ROWS[-1] == "big"
    for name in PRESETS:
        with torch.device("meta"):
            assert count_parameters(Transformer(get_preset(name).model)) > 0


def test_base_parameter_count_matches_an_independent_count():
    """63.08M at a 37000 vocabulary: embeddings + 6 encoder + 6 decoder layers, counted by hand."""
    d, f, v = 512, 2048, 37000
    attn = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    enc = attn + ffn + 2 * 2 * d
    dec = 2 * attn + ffn + 3 * 2 * d
    with torch.device("meta"):
        assert count_parameters(Transformer(get_preset("base").model)) == v * d + 6 * enc + 6 * dec


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 8), st.integers(1, 8), st.booleans(), st.integers(0, 1000))
def test_incremental_decoding_equals_full_recompute(batch, n, m, fused, seed):
    torch.manual_seed(seed)
    model = Transformer(tiny(attention="fused" if fused else "reference")).eval()
    src = torch.randint(1, 30, (batch, n))
    src[0, n - 1 :] = 0 if n > 1 else src[0, n - 1 :]  # some padding
    tgt = torch.randint(1, 30, (batch, m))
    with torch.no_grad():
        full = model(src, tgt)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.project(model.decode(tgt[:, t : t + 1], memory, src_mask, cache)) for t in range(m)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_fused_and_reference_models_agree():
    torch.manual_seed(1)
    ref = Transformer(tiny()).eval()
    fused = Transformer(tiny(attention="fused")).eval()
    fused.load_state_dict(ref.state_dict())
    src, tgt = torch.randint(1, 30, (3, 6)), torch.randint(1, 30, (3, 5))
    torch.testing.assert_close(fused(src, tgt), ref(src, tgt), atol=1e-5, rtol=1e-5)


def test_one_matrix_for_both_embeddings_and_the_projection():
    model = Transformer(tiny())
    assert model.src_embed.weight is model.tgt_embed.weight is model.output_projection.weight
    untied = Transformer(tiny(share_embeddings=False, tie_output=False, tgt_vocab_size=40))
    assert untied.src_embed.weight is not untied.tgt_embed.weight
    assert untied.output_projection.weight is not untied.tgt_embed.weight


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = Transformer(tiny())
    tokens = torch.tensor([[3, 4]])
    torch.testing.assert_close(model.src_embed(tokens), model.src_embed.weight[tokens] * math.sqrt(16))


def test_post_norm_stack_output_is_layer_normalised_and_pre_norm_is_not():
    """Post-norm: every layer ends in LayerNorm(x + Sublayer(x)); with the initial gain 1 and
    bias 0 each position of the output has mean 0 and variance 1. Pre-norm breaks this."""
    x = torch.randint(1, 30, (2, 7))
    for norm_first, normalised in ((False, True), (True, False)):
        torch.manual_seed(0)
        model = Transformer(tiny(norm_first=norm_first)).eval()
        layer_out = model.encoder_layers[0](model.src_embed(x) * 3, None)
        mean, var = layer_out.mean(-1), layer_out.var(-1, unbiased=False)
        is_normalised = bool(mean.abs().max() < 1e-4 and (var - 1).abs().max() < 1e-3)
        assert is_normalised is normalised


def test_embedding_dropout_applies_to_the_sum_with_positions():
    """Section 5.4: dropout on the sums of embeddings and positional encodings."""
    torch.manual_seed(0)
    model = Transformer(tiny(dropout=0.5)).train()
    hidden = model._embed(torch.randint(1, 30, (4, 50)), model.src_embed, model.src_pos)
    zero_fraction = (hidden == 0).float().mean().item()
    assert 0.4 < zero_fraction < 0.6
