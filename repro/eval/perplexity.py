"""Perplexity per wordpiece (Table 3's PPL column, on the development set).

PPL = exp( sum over target wordpieces of -log p(y_t | y_<t, x) / number of wordpieces ),
with no label smoothing; every target wordpiece and the closing EOS count as one prediction
each (PAD does not). The same pass counts the predictions whose most likely token is the
reference (token accuracy: Section 5.4's "label smoothing ... improves accuracy"). Computed with the same fused projection as training, in eval mode.
With ``per_sentence`` it also keeps each sentence's NLL and count (the same projection, one
sentence at a time), which the bootstrap over sentences resamples
(:func:`repro.eval.bootstrap.perplexity_interval`).
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
    correct: int = 0  # of them, those the model's most likely token is (token accuracy)
    #: (NLL, wordpieces) of each sentence, in no particular order, when asked for (``per_sentence``)
    sentences: list[tuple[float, int]] | None = None

    @property
    def nll_per_token(self) -> float:
        return self.nll / max(self.tokens, 1)

    @property
    def accuracy(self) -> float:
        """The share of predicted wordpieces whose most likely token is the reference."""
        return self.correct / max(self.tokens, 1)


@torch.inference_mode()
def perplexity(model: Transformer, examples: list[tuple[list[int], list[int]]], *, max_tokens: int = 4000,
               device: torch.device | str | None = None, precision: Precision | None = None,
               runtime: Runtime | None = None, per_sentence: bool = False) -> Perplexity:
    """Per-wordpiece perplexity of ``model`` on encoded (source, target) pairs, on ``runtime``
    (default: where the model is, in ``precision``; the fused loss keeps its log-sum-exp in fp32);
    with ``per_sentence``, each sentence's NLL and wordpieces too."""
    runtime = runtime_for(model, runtime, device=device, precision=precision)
    was_training = model.training
    model.eval()
    try:
        nll, tokens = torch.zeros((), dtype=torch.float64, device=runtime.device), 0   # read once, at the end
        correct = torch.zeros((), dtype=torch.int64, device=runtime.device)
        rows: list[torch.Tensor] = []
        longest = max(max(len(s), len(t) + 1) for s, t in examples)
        for batch in TokenBatcher(examples, max(max_tokens, longest), shuffle=False):
            batch = batch.to(runtime.device)
            with runtime.autocast():
                memory, src_mask = model.encode(batch.src)
                hidden = model.decode(batch.tgt_in, memory, src_mask)
                out = projection_loss(hidden, model.output_projection.weight, batch.tgt_out,
                                      epsilon=0.0, pad_id=model.cfg.pad_id, accuracy=True)
            nll += out.nll_sum.double()
            correct += out.correct
            tokens += out.tokens
            if per_sentence:
                rows += [_sentence_nll(model, hidden[i], batch.tgt_out[i], runtime) for i in range(hidden.size(0))]
    finally:
        model.train(was_training)
    total = float(nll)
    result = Perplexity(math.exp(total / max(tokens, 1)), total, tokens)
    result.correct = int(correct)
    if per_sentence:
        pairs = torch.stack(rows).double().cpu().tolist() if rows else []
        result.sentences = [(float(n), int(t)) for n, t in pairs]
    return result


def _sentence_nll(model: Transformer, hidden: torch.Tensor, target: torch.Tensor, runtime: Runtime) -> torch.Tensor:
    """(NLL, wordpieces) of one sentence of a batch: the same projection, on its positions alone."""
    with runtime.autocast():
        out = projection_loss(hidden, model.output_projection.weight, target, epsilon=0.0, pad_id=model.cfg.pad_id)
    return torch.stack([out.nll_sum.double(), torch.tensor(float(out.tokens), dtype=torch.float64,
                                                            device=out.nll_sum.device)])
