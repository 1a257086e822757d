"""Section 3 of the paper: the Transformer, one module per concept.

- ``attention``   Eq. 1 and multi-head attention (3.2)
- ``feedforward`` Eq. 2 (3.3)
- ``embedding``   scaled, shared embeddings (3.4)
- ``positional``  sinusoids and learned positions (3.5, Table 3 E)
- ``layers``      post-norm encoder and decoder layers (3.1, 5.4)
- ``transformer`` the whole encoder-decoder
- ``transformer_config``, ``presets``  the hyperparameters of Table 3
"""

from repro.model.transformer_config import TransformerConfig
from repro.model.presets import PRESETS, TABLE3_ROWS, Preset, get_preset
from repro.model.transformer import DecoderCache, Transformer, count_parameters

__all__ = [
    "PRESETS", "TABLE3_ROWS", "DecoderCache", "Preset", "Transformer", "TransformerConfig",
    "count_parameters", "get_preset",
]
