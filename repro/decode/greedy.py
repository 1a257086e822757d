"""Greedy decoding: at each step the most probable next token, until EOS or the length limit."""

from __future__ import annotations

import torch
from torch import Tensor

from repro.decode.settings import TRANSLATION
from repro.decode.stepper import BOS, EOS, Stepper, source_lengths
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
        batch, device = src.size(0), src.device
        memory, src_mask = model.encode(src)
        longest = int(src.size(1)) + max_len_offset + 1
        stepper = Stepper(model, memory, src_mask, use_cache, longest)
        limit = source_lengths(src, model.cfg.pad_id) + max_len_offset
        prefix = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
        out = torch.zeros(batch, longest, dtype=torch.long, device=device)   # each sentence's tokens, on the device
        length = torch.zeros(batch, dtype=torch.long, device=device)
        rows = torch.arange(batch, device=device)  # original index of each live row
        step = 0
        while True:
            logp = stepper.log_probs(prefix)
            force = limit[rows] <= step  # length limit reached: end the sentence
            next_tok = torch.where(force, torch.full_like(rows, EOS), logp.argmax(-1))
            alive = next_tok != EOS
            out[rows, step] = next_tok
            length[rows] = length[rows].masked_fill(alive, step + 1)
            step += 1
            keep = alive.tolist()                      # the step's one host read
            if not any(keep):
                break
            if not all(keep):
                index = torch.tensor([i for i, a in enumerate(keep) if a], device=device)
                stepper.select(index)
                rows, prefix, next_tok = rows[index], prefix[index], next_tok[index]
            prefix = torch.cat([prefix, next_tok[:, None]], 1)
        tokens, lengths = out.tolist(), length.tolist()
        return [tokens[i][:lengths[i]] for i in range(batch)]
    finally:
        model.train(was_training)
