"""Perplexity per wordpiece (Table 3's PPL column, on the development set).

PPL = exp( sum over target wordpieces of -log p(y_t | y_<t, x) / number of wordpieces ),
with no label smoothing; every target wordpiece and the closing EOS count as one prediction
each (PAD does not). Computed with the same fused projection as training, in eval mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from repro.data.batching import TokenBatcher
from repro.model import Transformer
from repro.model.precision import Precision
from repro.runtime import Runtime, runtime_for
from repro.train.loss import projection_loss


@dataclass
class Perplexity:
    ppl: float
    nll: float       # summed negative log-likelihood (nats)
    tokens: int      # predicted wordpieces, EOS included

    @property
    def nll_per_token(self) -> float:
        return self.nll / max(self.tokens, 1)


@torch.inference_mode()
def perplexity(model: Transformer, examples: list[tuple[list[int], list[int]]], *, max_tokens: int = 4000,
               device: torch.device | str | None = None, precision: Precision | None = None,
               runtime: Runtime | None = None) -> Perplexity:
    """Per-wordpiece perplexity of ``model`` on encoded (source, target) pairs, on ``runtime``
    (default: where the model is, in ``precision``; the fused loss keeps its log-sum-exp in fp32)."""
    runtime = runtime_for(model, runtime, device=device, precision=precision)
    was_training = model.training
    model.eval()
    try:
        nll, tokens = torch.zeros((), dtype=torch.float64, device=runtime.device), 0   # read once, at the end
        longest = max(max(len(s), len(t) + 1) for s, t in examples)
        for batch in TokenBatcher(examples, max(max_tokens, longest), shuffle=False):
            batch = batch.to(runtime.device)
            with runtime.autocast():
                memory, src_mask = model.encode(batch.src)
                hidden = model.decode(batch.tgt_in, memory, src_mask)
                out = projection_loss(hidden, model.output_projection.weight, batch.tgt_out,
                                      epsilon=0.0, pad_id=model.cfg.pad_id)
            nll += out.nll_sum.double()
            tokens += out.tokens
    finally:
        model.train(was_training)
    total = float(nll)
    return Perplexity(math.exp(total / max(tokens, 1)), total, tokens)
