"""The learned parameters of a layer's norm, wherever it keeps them.

The checks that set a norm's gain and bias to random values (so that two norms at their initial
1 and 0 can be told apart: :mod:`repro.checks.layers`, :mod:`repro.checks.stacks`) and the trace
that finds what each norm receives (:mod:`repro.checks.placement`) need the norm's parameters. A
norm given as a torch module holds them. A functional implementation (a flax/haiku port: every
weight in one flat dict, the model functions of (params, x)) gives its norms as functions, e.g.
``functools.partial(norm, params, "encoder/layer_0/mlp_norm")``: the parameters are then found
among the tensors the function can reach (a partial's arguments, a closure's cells, a bound
method's object, the modules and dicts among them) and kept where one call of the norm reads them.
What a call reads is recorded below autograd, at the dispatcher, so that ops TorchScript runs
(a ``torch.jit.script``'ed layer, invisible to Python-level ``__torch_function__`` modes) are seen too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

DEPTH = 4


def _reachable(obj: object, depth: int, out: dict[int, Tensor], seen: set[int]) -> None:
    """The learnable tensors reachable from ``obj`` into ``out`` (by id)."""
    if depth < 0 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Tensor):
        if obj.requires_grad or isinstance(obj, nn.Parameter):
            out.setdefault(id(obj), obj)
        return
    if isinstance(obj, nn.Module):
        for p in obj.parameters():
            out.setdefault(id(p), p)
        return
    children: list[object] = []
    if isinstance(obj, functools.partial):
        children = [obj.func, *obj.args, *obj.keywords.values()]
    elif isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    elif hasattr(obj, "__self__") and hasattr(obj, "__func__"):   # a bound method
        children = [obj.__self__, obj.__func__]
    elif callable(obj) and getattr(obj, "__closure__", None):
        children = [cell.cell_contents for cell in obj.__closure__ if _filled(cell)]
    for child in children:
        _reachable(child, depth - 1, out, seen)


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:   # an empty cell
        return False
    return True


class ReadTensors(TorchDispatchMode):
    """Records the ids of the tensors each operator call reads, and what it returns (a copy of each
    result ``width`` features wide, where ``width`` is given). At the dispatcher, a parameter is
    still the tensor object the module holds, in Python code and inside TorchScript alike."""

    def __init__(self, width: int | None = None) -> None:
        super().__init__()
        self.width = width
        self.calls: list[tuple[set[int], list[Tensor]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        read = {id(t) for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, Tensor)}
        self.calls.append((read, [self._kept(t) for t in tree_flatten(result)[0] if isinstance(t, Tensor)]))
        return result

    def _kept(self, t: Tensor) -> Tensor:
        """Results ``width`` wide are copied as they are now (a later in-place op would change them)."""
        return t.detach().clone() if self.width is not None and t.dim() and t.shape[-1] == self.width else t


def norm_parameters(norm: Callable[[Tensor], Tensor], d_model: int) -> list[Tensor]:
    """The learned tensors ``norm`` applies: a module's parameters; for any other callable, the
    learnable tensors it reaches that one call on a (2, 3, d_model) input reads (none found: [])."""
    if isinstance(norm, nn.Module):
        return list(norm.parameters())
    reachable: dict[int, Tensor] = {}
    _reachable(norm, DEPTH, reachable, set())
    if not reachable:
        return []
    probe = torch.randn(2, 3, d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), ReadTensors() as mode:
        norm(probe)
    read = set().union(*(ids for ids, _ in mode.calls)) if mode.calls else set()
    return [t for key, t in reachable.items() if key in read]
