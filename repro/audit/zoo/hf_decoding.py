"""Decoding a Hugging Face encoder-decoder as its users do: ``generate()`` for the beam search,
the model's own key/value cache for incremental decoding (shared by the BART and T5 adapters).

* ``beam_search``: ``model.generate(input_ids, attention_mask, num_beams=beam_size,
  length_penalty=alpha, max_new_tokens=source length + offset)``, the call a user maps the
  paper's settings to. Two differences from the paper that the call keeps: ``length_penalty``
  divides the log-probability by length^alpha (not GNMT's ((5 + |Y|) / 6)^alpha), and
  ``generate()`` runs the model in whatever mode it is in (it never calls ``eval()``), so a
  model left in train mode decodes with dropout on. The best sequence of each row is returned
  without the decoder's start token, end-of-sentence and padding.
* ``incremental``: the encoder once, then ``model(encoder_outputs=..., decoder_input_ids=chunk,
  cache=..., use_cache=True)`` chunk after chunk, the cache an ``EncoderDecoderCache`` the
  model fills in place (what ``generate()`` does step by step).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from transformers import GenerationConfig
from transformers.cache_utils import DynamicCache, EncoderDecoderCache


def beam_search(model: nn.Module, src: Tensor, pad_id: int, *, beam_size: int, alpha: float,
                max_len_offset: int) -> list[list[int]]:
    """The best output of ``model.generate`` per row of ``src``, without special tokens."""
    config = model.generation_config
    with torch.no_grad():
        out = model.generate(input_ids=src, attention_mask=(src != pad_id).long(), num_beams=beam_size,
                             length_penalty=alpha, max_new_tokens=src.size(1) + max_len_offset, do_sample=False)
    eos = config.eos_token_id if isinstance(config.eos_token_id, int) else None
    rows = []
    for row in out[:, 1:].tolist():  # the first is the decoder's start token
        tokens = row[: row.index(eos)] if eos is not None and eos in row else row
        rows.append([t for t in tokens if t != pad_id])
    return rows


def incremental(model: nn.Module, src: Tensor, tgt_in: Tensor, chunks: Sequence[int], pad_id: int) -> Tensor:
    """The logits of ``model(src, tgt_in)`` computed through the model's cache, ``chunks`` positions
    at a time."""
    mask = (src != pad_id).long()
    encoded = model.get_encoder()(input_ids=src, attention_mask=mask)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    logits, start = [], 0
    for size in chunks:
        out = model(encoder_outputs=encoded, attention_mask=mask, decoder_input_ids=tgt_in[:, start:start + size],
                    cache=cache, use_cache=True)
        logits.append(out.logits)
        start += size
    return torch.cat(logits, dim=1)


def generation_defaults() -> dict[str, tuple[float, str]]:
    """The beam size and length penalty ``generate()`` uses when neither the model's config nor the
    call sets them (BART's and T5's configs set none): greedy search, length penalty 1.0. Read off
    transformers' table of fallbacks; left out where this version has none."""
    table = getattr(GenerationConfig, "_get_default_generation_params", None)
    fallbacks = table() if callable(table) else {}
    where = "generate()'s fallback when the config sets none (GenerationConfig._get_default_generation_params)"
    return {key: (fallbacks[name], where) for key, name in (("beam_size", "num_beams"), ("length_penalty", "length_penalty"))
            if isinstance(fallbacks.get(name), (int, float))}
