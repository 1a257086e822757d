"""Where a layer's norms sit, measured on the layer itself.

Section 3.1 puts each norm after the residual sum, LayerNorm(x + Sublayer(x)) ("post-norm");
many implementations (T5, torch's ``norm_first=True``, x-transformers' default) put it before
the sub-layer, x + Sublayer(LayerNorm(x)) ("pre-norm"). Whether the paper's placement holds is
``sec3.sublayer.post-norm``'s claim. The checks that follow the residual stream through a layer
(Section 5.4's residual dropout) must not assume either: they trace one call of the layer,
recording what each norm receives, and read the placement off it:

* pre-norm: the first norm receives the layer's input unchanged (the residual stream enters
  the sub-layer through the norm);
* post-norm: the first norm receives something else (the input plus the first sub-layer's
  output), and the layer's output is the last norm's output.

Anything else is reported as such, and the checks that need the stream say they cannot find it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repro.claims.outcome import NotApplicable

POST_NORM, PRE_NORM, OTHER = "post-norm", "pre-norm", "other"

#: Two tensors closer than this (relative to their scale) are the same tensor.
SAME = 1e-6


@dataclass
class LayerTrace:
    """One call of a layer: its input, its output, and the input of each of its norms, in order."""

    x: Tensor
    output: Tensor
    norm_inputs: list[Tensor]


def norm_modules(norms: Sequence[Callable[[Tensor], Tensor]]) -> list[nn.Module]:
    """The norms as torch modules (their inputs are read with forward hooks), else NotApplicable."""
    if not all(isinstance(n, nn.Module) for n in norms):
        raise NotApplicable("the layer norms are not torch modules: their inputs cannot be observed")
    return list(norms)


def trace_layer(call: Callable[[], Tensor], x: Tensor, norms: Sequence[nn.Module]) -> LayerTrace:
    """Run ``call()`` (the layer applied to ``x``) once, recording the first input of each norm."""
    seen: dict[int, Tensor] = {}

    def hook(i: int):
        def record(module: nn.Module, args: tuple) -> None:
            seen.setdefault(i, args[0].detach())
        return record

    handles = [m.register_forward_pre_hook(hook(i)) for i, m in enumerate(norms)]
    try:
        output = call()
    finally:
        for h in handles:
            h.remove()
    missing = [i for i in range(len(norms)) if i not in seen]
    if missing:
        raise NotApplicable(f"the layer never called its norm(s) {missing} as given in its parts: the residual "
                            "stream cannot be followed")
    return LayerTrace(x, output.detach(), [seen[i] for i in range(len(norms))])


def _same(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and (a - b).abs().max().item() <= SAME * max(b.abs().max().item(), 1.0)


def norm_placement(trace: LayerTrace, norms: Sequence[nn.Module]) -> str:
    """``post-norm``, ``pre-norm`` or ``other``, read off one traced call (see the module docstring).
    Valid in train mode too: it compares tensors of the one call, never two calls."""
    first_sees_input = _same(trace.norm_inputs[0], trace.x)
    with torch.no_grad():
        ends_with_norm = _same(trace.output, norms[-1](trace.norm_inputs[-1]))
    if first_sees_input and not ends_with_norm:
        return PRE_NORM
    if ends_with_norm and not first_sees_input:
        return POST_NORM
    return OTHER


def residual_stream(trace: LayerTrace, norms: Sequence[nn.Module], placement: str) -> list[tuple[Tensor, Tensor, Tensor]]:
    """For each sub-layer k, in order: (what it added to the residual stream, the stream it was
    added to, the sub-layer's input), from a traced call whose placement is known.

    post-norm: stream_0 = x, the sub-layer reads stream_k, and norm k receives stream_k + added_k;
    stream_k+1 = norm_k(that). pre-norm: norm k receives stream_k (stream_0 = x), the sub-layer
    reads norm_k(stream_k), and the next norm (or the output) receives stream_k + added_k."""
    inputs = trace.norm_inputs
    out = []
    with torch.no_grad():
        if placement == POST_NORM:
            stream = trace.x
            for k, received in enumerate(inputs):
                out.append((received - stream, stream, stream))
                stream = norms[k](received)
        elif placement == PRE_NORM:
            following = [*inputs[1:], trace.output]
            for k, stream in enumerate(inputs):
                out.append((following[k] - stream, stream, norms[k](stream)))
        else:
            raise ValueError(f"no residual stream for placement {placement!r}")
    return out
