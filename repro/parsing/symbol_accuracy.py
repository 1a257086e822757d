"""How often the parser's next symbol is right, by kind of symbol, with the reference prefix given.

A linearised tree (:mod:`repro.parsing.linearize`) has three kinds of symbol: openers ``(NP``,
closers ``)NP`` and leaves ``XX`` (one per source word), then EOS. In per-word targets every token
but the last closers holds one word's ``XX`` and counts as a leaf. With the reference prefix fed
in (teacher forcing, as in training), the share of positions whose most probable symbol is the
reference, per kind, tells where a parser that decodes badly goes wrong: a leaf or a closer is
only predictable when the decoder knows which source word comes next, so low accuracy on them
says the alignment of leaves to words is what has not been learned (issue 18).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from repro.data.batching import TokenBatcher
from repro.data.vocab import EOS, SharedVocab
from repro.model import Transformer
from repro.parsing.linearize import JOIN, LEAF, is_closer, is_opener
from repro.runtime import Runtime, runtime_for

KINDS = ("leaf", "open", "close", "eos")


def symbol_kind(symbol: str) -> str:
    """``open``, ``close`` or ``leaf``; a per-word token (``)NP_(VP_XX``) is a leaf, the closers
    after the last word (``)VP_)S``) a closer."""
    if JOIN in symbol:
        parts = symbol.split(JOIN)
        return "leaf" if LEAF in parts else "close" if all(is_closer(p) for p in parts) else "open"
    if is_opener(symbol):
        return "open"
    if is_closer(symbol):
        return "close"
    return "leaf"


@torch.inference_mode()
def symbol_accuracy(model: Transformer, vocab: SharedVocab, examples: Sequence[tuple[list[int], list[int]]],
                    *, max_tokens: int = 4000, runtime: Runtime | None = None) -> dict[str, float]:
    """Teacher-forced next-symbol accuracy per kind (:data:`KINDS`), in percent, over ``examples``
    (encoded source, target pairs), on ``runtime`` (default: where the model is); a kind with no
    position is left out."""
    runtime = runtime_for(model, runtime)
    kind_of = {i: symbol_kind(vocab.decode([i])) for i in {t for _, tgt in examples for t in tgt}}
    kind_of[EOS] = "eos"
    right = {k: 0 for k in KINDS}
    total = {k: 0 for k in KINDS}
    was_training = model.training
    model.eval()
    try:
        longest = max(max(len(s), len(t) + 1) for s, t in examples)
        for batch in TokenBatcher(list(examples), max(max_tokens, longest), shuffle=False):
            on_device = batch.to(runtime.device)
            with runtime.autocast():
                memory, src_mask = model.encode(on_device.src)
                hidden = model.decode(on_device.tgt_in, memory, src_mask)
                predicted = (hidden @ model.output_projection.weight.T).argmax(-1).cpu()
            keep = batch.tgt_out != model.cfg.pad_id
            for gold, guess in zip(batch.tgt_out[keep].tolist(), predicted[keep].tolist()):
                kind = kind_of.get(gold, "leaf")
                total[kind] += 1
                right[kind] += gold == guess
    finally:
        model.train(was_training)
    return {k: round(100.0 * right[k] / total[k], 2) for k in KINDS if total[k]}
