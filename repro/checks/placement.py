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

What it assumes about the layout, and checks: the norms are per-position (each row of d_model
features normalised on its own), and the layer's own positions are rows of what each norm
receives. The norms may see *more* rows than the layer takes and gives: a decoder that runs
several streams in one tensor (a main stream and n-gram predict streams stacked along the
sequence or the batch) normalises all of them at once. The layer's own rows are then found among
the norm's rows by value (:func:`own_rows`), wherever they lie, and the residual stream is
followed on those rows. Anything else (the layer's rows found in neither place, or in both) is
reported as "other" with what was seen, and the checks that need the stream say they cannot find it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repro.checks.norm_parameters import ReadTensors, norm_parameters
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


def trace_layer(call: Callable[[], Tensor], x: Tensor, norms: Sequence[Callable[[Tensor], Tensor]]) -> LayerTrace:
    """Run ``call()`` (the layer applied to ``x``) once, recording the first input of each norm:
    through forward hooks where the norms are torch modules that take hooks and the layer calls,
    else (functions, ``torch.jit.script``'ed modules, which refuse hooks, modules wrapping the one
    the layer calls) by :func:`_trace_functions`."""
    if not all(isinstance(n, nn.Module) and not isinstance(n, torch.jit.ScriptModule) for n in norms):
        return _trace_functions(call, x, norms)
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
    if any(i not in seen for i in range(len(norms))):
        # a norm given wrapped (a channels-first LayerNorm as the checks call it, batch-first): the layer
        # calls the module inside, never the wrapper; found, as a function's, by the parameters it reads
        return _trace_functions(call, x, norms)
    return LayerTrace(x, output.detach(), [seen[i] for i in range(len(norms))])


def _trace_functions(call: Callable[[], Tensor], x: Tensor, norms: Sequence[Callable[[Tensor], Tensor]]) -> LayerTrace:
    """The first input of each norm given as a function (a functional model's
    ``partial(norm, params, name)``) or as a scripted module, which no hook can see: the layer's
    call is recorded op by op (at the dispatcher, inside TorchScript too),
    and norm k's input is the earliest tensor of the call (or ``x``) that the norm maps to the
    result of an op reading the norm's own parameters
    (:func:`~repro.checks.norm_parameters.norm_parameters`). The earliest: the norm's own
    intermediates (the input centred, or standardised) come after its input and map to the same
    output, a norm being blind to each row's shift and scale."""
    width = x.shape[-1]
    owned = [{id(p) for p in norm_parameters(norm, width)} for norm in norms]
    if not all(owned):
        raise NotApplicable("the layer norms are functions whose parameters could not be found (neither torch modules "
                            "nor functions over parameters they hold): their inputs cannot be observed")
    with ReadTensors(width) as mode:
        output = call()
    produced = [x.detach()]
    inputs: dict[int, Tensor] = {}
    with torch.no_grad():
        for read, results in mode.calls:
            for k, norm in enumerate(norms):
                if k not in inputs and read & owned[k]:
                    found = _norm_input(norm, produced, results)
                    if found is not None:
                        inputs[k] = found
            produced.extend(t for t in results if t.dim() and t.shape[-1] == width)
    missing = [k for k in range(len(norms)) if k not in inputs]
    if missing:
        raise NotApplicable(f"the layer never called its norm(s) {missing} as given in its parts: the residual "
                            "stream cannot be followed")
    return LayerTrace(x, output.detach(), [inputs[k] for k in range(len(norms))])


def _norm_input(norm: Callable[[Tensor], Tensor], produced: list[Tensor], results: list[Tensor]) -> Tensor | None:
    """The earliest of ``produced`` that ``norm`` maps to one of ``results``, or ``None``."""
    for out in results:
        for t in produced:
            if t.shape == out.shape:
                got = norm(t)
                if (got - out).abs().max().item() <= SAME * max(out.abs().max().item(), 1.0):
                    return t
    return None


def own_rows(big: Tensor, small: Tensor) -> Tensor | None:
    """Where ``small``'s rows (its last dimension the features) lie among ``big``'s, as indices
    into ``big.reshape(-1, d)``, or ``None`` when some row of ``small`` is not a row of ``big``
    (to :data:`SAME`, relative to its scale) or two of its rows would be the same row of ``big``.
    The same layout gives ``arange``; a tensor that stacks several streams gives the main stream's rows."""
    if big.dim() < 1 or small.dim() < 1 or big.shape[-1] != small.shape[-1] or big.numel() < small.numel():
        return None
    b = big.detach().reshape(-1, big.shape[-1]).double()
    s = small.detach().reshape(-1, small.shape[-1]).double()
    if s.numel() == 0:
        return None
    tolerance = SAME * max(s.abs().max().item(), 1.0)
    if b.shape == s.shape and (b - s).abs().max().item() <= tolerance:
        return torch.arange(s.size(0), device=big.device)
    distance, rows = torch.cdist(s, b, p=float("inf")).min(dim=1)
    if distance.max().item() > tolerance or rows.unique().numel() != rows.numel():
        return None
    return rows


def _shape(t: Tensor) -> str:
    return "x".join(map(str, t.shape))


@dataclass
class Placement:
    """Where a traced layer's norms sit: ``kind`` (post-norm, pre-norm or other); ``rows``, the
    layer's own rows among the rows each norm receives (:func:`own_rows`; ``None`` for other);
    ``seen``, what the trace showed, for a reason; ``streams``, a note where the norms see more
    rows than the layer's own ('' where they see those alone)."""

    kind: str
    rows: Tensor | None
    seen: str
    streams: str = ""


def norm_placement(trace: LayerTrace, norms: Sequence[Callable[[Tensor], Tensor]]) -> Placement:
    """The placement read off one traced call (see the module docstring). Valid in train mode too:
    it compares tensors of the one call, never two calls."""
    pre = own_rows(trace.norm_inputs[0], trace.x)
    with torch.no_grad():
        last = norms[-1](trace.norm_inputs[-1])
    post = own_rows(last, trace.output)
    shapes = {_shape(t) for t in trace.norm_inputs}
    seen = (f"layer input {_shape(trace.x)}, output {_shape(trace.output)}, norm inputs {', '.join(sorted(shapes))}; "
            f"the layer's input {'is' if pre is not None else 'is not'} among the first norm's rows, its output "
            f"{'is' if post is not None else 'is not'} among the last norm's output rows")
    rows = pre if pre is not None else post
    if (pre is None) == (post is None) or len(shapes) != 1:
        if len(shapes) != 1:
            seen += "; the norms receive tensors of different shapes"
        return Placement(OTHER, None, seen)
    extra = trace.norm_inputs[0].numel() // trace.norm_inputs[0].shape[-1] - rows.numel()
    streams = (f"the norms see {extra} rows besides the layer's {rows.numel()} (several streams in one tensor), "
               "followed on the layer's own rows") if extra else ""
    return Placement(PRE_NORM if pre is not None else POST_NORM, rows, seen, streams)


def _own(t: Tensor, rows: Tensor, like: Tensor) -> Tensor:
    """The layer's own rows of ``t`` (a norm's input or output), in the layer's shape ``like``."""
    return t.reshape(-1, t.shape[-1])[rows].reshape(like.shape)


def residual_stream(trace: LayerTrace, norms: Sequence[Callable[[Tensor], Tensor]], placement: Placement) -> list[tuple[Tensor, Tensor, Tensor]]:
    """For each sub-layer k, in order: (what it added to the residual stream, the stream it was
    added to, the sub-layer's input), on the layer's own rows, from a traced call whose placement
    is known.

    post-norm: stream_0 = x, the sub-layer reads stream_k, and norm k receives stream_k + added_k;
    stream_k+1 = norm_k(that). pre-norm: norm k receives stream_k (stream_0 = x), the sub-layer
    reads norm_k(stream_k), and the next norm (or the output) receives stream_k + added_k."""
    if placement.kind == OTHER or placement.rows is None:
        raise ValueError(f"no residual stream for placement {placement.kind!r}")
    rows, x = placement.rows, trace.x
    inputs = [_own(t, rows, x) for t in trace.norm_inputs]
    out = []
    with torch.no_grad():
        normed = [_own(norms[k](t), rows, x) for k, t in enumerate(trace.norm_inputs)]
        if placement.kind == POST_NORM:
            stream = x
            for k, received in enumerate(inputs):
                out.append((received - stream, stream, stream))
                stream = normed[k]
        else:
            following = [*inputs[1:], trace.output]
            for k, stream in enumerate(inputs):
                out.append((following[k] - stream, stream, normed[k]))
    return out
