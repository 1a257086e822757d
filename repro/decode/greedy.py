"""Greedy decoding: at each step the most probable next token, until EOS or the length limit."""

from __future__ import annotations

import torch
from torch import Tensor

from repro.decode.settings import TRANSLATION
from repro.decode.step import BOS, EOS, Stepper, source_lengths
from repro.model import Transformer


@torch.inference_mode()
def greedy_decode(
    model: Transformer, src: Tensor, *, max_len_offset: int = TRANSLATION.max_len_offset, use_cache: bool = True
) -> list[list[int]]:
    """Decode each row of ``src`` (batch, n); returns token ids without BOS/EOS.

    A sentence of n source tokens gets at most n + ``max_len_offset`` output tokens (then EOS
    is forced), as in Section 6.1.
    """
    was_training = model.training
    model.eval()
    try:
        batch = src.size(0)
        memory, src_mask = model.encode(src)
        stepper = Stepper(model, memory, src_mask, use_cache)
        limit = source_lengths(src, model.cfg.pad_id) + max_len_offset
        prefix = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)
        done = torch.zeros(batch, dtype=torch.bool, device=src.device)
        out: list[list[int]] = [[] for _ in range(batch)]
        rows = torch.arange(batch, device=src.device)  # original index of each live row
        step = 0
        while rows.numel():
            logp = stepper.log_probs(prefix)
            force = limit[rows] <= step  # length limit reached: end the sentence
            next_tok = torch.where(force, torch.full_like(rows, EOS), logp.argmax(-1))
            for r, tok in zip(rows.tolist(), next_tok.tolist()):
                if tok != EOS:
                    out[r].append(tok)
            step += 1
            alive = next_tok != EOS
            done[rows[~alive]] = True
            if not alive.all():
                keep = alive.nonzero().squeeze(1)
                stepper.select(keep)
                rows, prefix, next_tok = rows[keep], prefix[keep], next_tok[keep]
            prefix = torch.cat([prefix, next_tok[:, None]], 1)
        return out
    finally:
        model.train(was_training)
