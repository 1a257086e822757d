"""A stand-in for repro's Transformer whose next-token distribution is a given function of the
prefix: it drives repro's own beam search (Section 6.1) through cases whose answer is known.

The search calls ``encode``, then, each step, ``decode`` on the whole prefix of every live
hypothesis (the search runs without its key/value cache here: the cache's correctness is a claim
of its own) and ``project`` on the last position; this model answers with ``next_log_probs`` of
each row's prefix.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import Tensor, nn

from repro.audit.adapter import NextLogProbs
from repro.data.vocab import PAD


class ScriptedModel(nn.Module):
    """What :func:`repro.decode.beam.beam_search` needs of a model, scripted."""

    def __init__(self, next_log_probs: NextLogProbs) -> None:
        super().__init__()
        self.next_log_probs = next_log_probs
        self.cfg = SimpleNamespace(pad_id=PAD)
        self._prefix: Tensor | None = None

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return torch.zeros(*src.shape, 1), (src != PAD)[:, None, None, :]

    def new_cache(self) -> None:
        return None

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: None = None) -> Tensor:
        self._prefix = tgt_in
        return torch.zeros(*tgt_in.shape, 1)

    def project(self, hidden: Tensor) -> Tensor:
        assert self._prefix is not None
        rows = [tuple(int(t) for t in row[1:]) for row in self._prefix]  # without BOS
        return torch.stack([self.next_log_probs(prefix).float() for prefix in rows])
