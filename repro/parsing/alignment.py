"""Where the parser's decoder looks when it writes a leaf: the alignment of leaves to source words.

The i-th ``XX`` of a linearised tree stands for the i-th source word (:mod:`repro.parsing.linearize`).
To write the right symbol around it, the decoder has to find that word through its
encoder-decoder attention (Section 3.2.3): nothing in the target says which word comes next.
With the reference prefix fed in (teacher forcing), for every decoder layer and head, this
counts the leaf positions whose most attended source position is the leaf's own word; per layer
the best head is reported, beside what a head that picks a source position at random would get
(the mean of 1 / source length). A parser that has learned the alignment has a head far above
chance; one at chance writes leaves without knowing which word they belong to (issue 18).

Defined where the source has one token per word (a word-level vocabulary); pairs whose leaf
count differs from their source length (a BPE source) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from repro.data.batching import TokenBatcher
from repro.data.vocab import SharedVocab
from repro.model import Transformer
from repro.parsing.symbol_accuracy import symbol_kind
from repro.runtime import Runtime, runtime_for


def aligned_leaves(weights: Tensor, leaf_positions: Sequence[int]) -> Tensor:
    """Per head, how many of the leaves put their most attention on their own source word.

    ``weights`` (heads, target length, source length) are one example's encoder-decoder attention
    weights; query ``p`` predicts target symbol ``p`` (the decoder input is BOS + target), so the
    k-th leaf, at target position ``leaf_positions[k]``, should look at source position k.
    """
    if not leaf_positions:
        return torch.zeros(weights.size(0), dtype=torch.long)
    queries = torch.as_tensor(list(leaf_positions))
    looked_at = weights[:, queries].argmax(-1)  # (heads, leaves)
    return (looked_at == torch.arange(len(queries))).sum(-1)


@torch.inference_mode()
def leaf_attention(model: Transformer, vocab: SharedVocab, examples: Sequence[tuple[list[int], list[int]]],
                   *, max_tokens: int = 4000, runtime: Runtime | None = None) -> dict[str, float]:
    """Percent of leaves whose best head per decoder layer attends to their own word
    (``layer_1`` ... ``layer_N``) and the chance level (``chance``), on ``runtime`` (default: where
    the model is); ``{}`` when no pair has one source token per leaf."""
    runtime = runtime_for(model, runtime)
    is_leaf = {i: symbol_kind(vocab.decode([i])) == "leaf" for i in {t for _, tgt in examples for t in tgt}}
    usable = [(s, t) for s, t in examples if sum(is_leaf[i] for i in t) == len(s) > 0]
    if not usable:
        return {}
    layers = [layer.cross_attn for layer in model.decoder_layers]
    hits = torch.zeros(len(layers), layers[0].n_heads, dtype=torch.long)
    leaves, chance = 0, 0.0
    was_training = model.training
    model.eval()
    for attention in layers:
        attention.record_weights = True
    try:
        longest = max(max(len(s), len(t) + 1) for s, t in usable)
        for batch in TokenBatcher(list(usable), max(max_tokens, longest), shuffle=False):
            with runtime.autocast():
                model(batch.src.to(runtime.device), batch.tgt_in.to(runtime.device))
            weights = [attention.last_weights.float().cpu() for attention in layers]
            for row, index in enumerate(batch.indices):
                src, tgt = usable[index]
                positions = [p for p, i in enumerate(tgt) if is_leaf[i]]
                for layer, recorded in enumerate(weights):
                    hits[layer] += aligned_leaves(recorded[row, :, :len(tgt), :len(src)], positions)
                leaves += len(positions)
                chance += len(positions) / len(src)
    finally:
        for attention in layers:
            attention.record_weights = False
            attention.last_weights = None
        model.train(was_training)
    shares = {f"layer_{n + 1}": round(100.0 * int(best) / leaves, 2) for n, best in enumerate(hits.max(-1).values)}
    return {**shares, "chance": round(100.0 * chance / leaves, 2)}
