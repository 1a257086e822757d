"""The paper's training recipe as the round-six families' training scripts write it (Section 5):
Adam (0.9, 0.98, 1e-9), Eq. 3's schedule through ``LambdaLR`` stepped *before* each update (so
update k runs at rate(k), as the Annotated Transformer's ``NoamOpt`` does), label smoothing 0.1
with the smoothing mass spread over the V - 1 wrong classes, summed over the non-padding tokens."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def rate(step: int, d_model: int, warmup: int) -> float:
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def smoothed_nll(logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
    logp = F.log_softmax(logits.float(), dim=-1)
    true = torch.full_like(logp, smoothing / (logp.size(-1) - 1))
    true.scatter_(1, target.unsqueeze(1), 1.0 - smoothing)
    keep = target.ne(pad_id)
    return -(true * logp).sum(-1)[keep].sum()


class PaperRecipe:
    """Mixed into an adapter: the optimizer, schedule, loss and settings of Section 5."""

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return rate(step, d_model, warmup_steps)

    def loss(self, logits, target, pad_id, smoothing):
        return smoothed_nll(logits, target, pad_id, smoothing)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "train.py --label-smoothing 0.1"), "warmup_steps": (4000, "train.py --warmup 4000"),
                "dropout_base": (0.1, "train.py --dropout 0.1"), "beam_size": (4, "translate.py --beam 4"),
                "length_penalty": (0.6, "translate.py --alpha 0.6")}
