"""One decoding step: next-token log-probabilities, incrementally (cache) or by full recompute."""

from __future__ import annotations

from torch import Tensor

from repro.data.vocab import BOS, EOS
from repro.model import DecoderCache, Transformer

__all__ = ["BOS", "EOS", "Stepper", "source_lengths"]


class Stepper:
    """Feeds a growing prefix to the decoder.

    With ``use_cache`` only the newest token goes through the decoder and the keys and values
    of earlier positions come from the cache (buffers of ``capacity`` positions: the search's
    output limit); without it the whole prefix is recomputed each step. Both give the same
    log-probabilities (up to float rounding).
    """

    def __init__(self, model: Transformer, memory: Tensor, src_mask: Tensor, use_cache: bool = True,
                 capacity: int = 0) -> None:
        self.model, self.memory, self.src_mask = model, memory, src_mask
        self.cache: DecoderCache | None = model.new_cache(capacity) if use_cache else None

    def log_probs(self, prefix: Tensor) -> Tensor:
        """log p(. | prefix) for each row of ``prefix`` (rows, t), as float32 (rows, V)."""
        tokens = prefix[:, -1:] if self.cache is not None else prefix
        hidden = self.model.decode(tokens, self.memory, self.src_mask, self.cache)
        logits = self.model.project(hidden[:, -1]).float()
        logp = logits.log_softmax(-1)
        pad = self.model.cfg.pad_id
        logp[:, pad] = float("-inf")   # never generate padding or a second BOS
        logp[:, BOS] = float("-inf")
        return logp

    def select(self, index: Tensor) -> None:
        """Keep rows ``index`` (surviving beams, or sentences still being decoded)."""
        self.memory = self.memory.index_select(0, index)
        self.src_mask = self.src_mask.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index)


def source_lengths(src: Tensor, pad_id: int) -> Tensor:
    return (src != pad_id).sum(1)
