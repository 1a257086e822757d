"""TransformerConfig.parameter_estimate (the size guard that refuses a typo before any allocation):
it must count exactly the weight matrices the built model has, whatever the config's options."""

import pytest

from repro.model import Transformer
from repro.model.transformer_config import TransformerConfig

SMALL = dict(n_layers=2, d_model=32, n_heads=4, d_ff=48, src_vocab_size=50, tgt_vocab_size=50, max_positions=64,
             dropout=0.0)


def weight_matrices(model: Transformer) -> int:
    """Parameters of two or more dimensions (biases and norms left out), each shared tensor once."""
    seen = {id(p): p for p in model.parameters() if p.dim() > 1}
    return sum(p.numel() for p in seen.values())


@pytest.mark.parametrize("changes", [
    {}, {"share_embeddings": False, "tie_output": False, "tgt_vocab_size": 70}, {"tie_output": False},
    {"positional": "learned"},
    {"d_k": 5, "d_v": 7}, {"n_heads": 1, "n_layers": 3},
], ids=["shared", "untied", "output-untied", "learned-positions", "d_k-d_v", "one-head"])
def test_the_estimate_counts_the_built_models_weight_matrices(changes):
    cfg = TransformerConfig(**{**SMALL, **changes})
    assert cfg.parameter_estimate() == weight_matrices(Transformer(cfg))
