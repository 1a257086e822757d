"""Section 3.4's embedding as a stack receives it, read off the model's own forward pass.

``ModelParts.embed_source`` / ``embed_target`` are the adapter's word for "the scaled
embedding". Where an implementation scales in the stack rather than in its embedding module
(Pegasus multiplies ``embed_tokens(ids)`` by ``embed_scale`` in the stack's forward, BART and
M2M100 inside their embedding modules), an adapter that gives the module reads the wrong
factor. What the first layer receives settles it: for two sentences of the same length, the
positions (whatever they are: sinusoids, learned, none) are the same, so the difference of what
the stack receives is factor x the difference of the raw embedding rows, when nothing but a
scale stands between the embedding and the first layer. Where something else does (a LayerNorm
on the sum of embedding and positions, as BART's ``layernorm_embedding``), the difference is not
a multiple and the stack's factor is "not read".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from repro.claims.compare import finite

#: The difference of the stack's inputs is a multiple of the raw rows' when the residual of the
#: least-squares fit is below this fraction of the difference's largest element: float32 rounding
#: leaves ~1e-7 of it; a LayerNorm on the sum leaves a residual of the order of the difference.
MULTIPLE_TOLERANCE = 1e-4


@dataclass
class StackFactor:
    """What a stack's first layer receives as a function of its tokens' embedding rows:
    ``factor`` (``None``: not a multiple of them) and what was seen."""

    factor: float | None
    seen: str


def stack_factor(received: Tensor, other: Tensor, raw: Tensor, raw_other: Tensor, stack: str) -> StackFactor:
    """The factor f with received - other = f (raw - raw_other), where ``received`` / ``other`` are
    what the stack's first layer receives (eval mode) for two sentences of the same length and
    ``raw`` / ``raw_other`` their rows of the embedding matrix; ``None`` where the difference is
    not such a multiple (the residual is named)."""
    d = finite((received - other).double(), f"the {stack}'s input")
    r = raw.double() - raw_other.double()
    factor = ((d * r).sum() / (r * r).sum()).item()
    residual = (d - factor * r).abs().max().item()
    scale = d.abs().max().item()
    if scale == 0.0 or residual > MULTIPLE_TOLERANCE * scale:
        return StackFactor(None, f"the {stack}'s first layer receives no multiple of the embedding rows "
                                 f"(residual {residual:.1e} of {scale:.1e}: something other than a scale stands "
                                 "between embedding and layer, e.g. a norm on the sum with the positions)")
    return StackFactor(factor, f"the {stack}'s first layer receives {factor:.4f} x the embedding rows "
                               f"(residual {residual:.1e}, read off two sentences at the same positions)")


def received_factor(parts, stack: str, tokens: Tensor, gen: torch.Generator) -> StackFactor | None:
    """:func:`stack_factor` for ``stack`` ("encoder" or "decoder") of a built model in eval mode, on
    ``tokens`` and another draw of the same shape; ``None`` where the model does not expose what
    the stack receives or its raw embedding matrix (``ModelParts.encoder_input`` /
    ``decoder_input``, ``source_embedding`` / ``target_embedding``)."""
    receive = parts.encoder_input if stack == "encoder" else parts.decoder_input
    weight = parts.source_embedding if stack == "encoder" else parts.target_embedding
    if receive is None or weight is None:
        return None
    other = torch.randint(4, parts.vocab_size, tokens.shape, generator=gen)
    raw = weight.detach().cpu()
    with torch.no_grad():
        return stack_factor(receive(tokens), receive(other), raw[tokens], raw[other], stack)
