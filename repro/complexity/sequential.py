"""Table 1, "Sequential operations": the depth of a layer's dependency chain.

Section 4 measures "the amount of computation that can be parallelized ... by the minimum number
of sequential operations required". Measured here as the critical path of the operations one
forward pass dispatches: every ATen operation is a node that can start once the operations
producing its inputs are done, and may itself be arbitrarily parallel (a matrix product over
all n positions is one operation). The depth of an operation is 1 + the largest depth of its
inputs (inputs and parameters have depth 0); the layer's sequential operations are the largest
depth of any result. Operations that only re-view memory (``view``, ``transpose``, ``select``,
``unfold``...) take no time and add no depth; a copy (``clone``, e.g. inside a ``reshape`` of
non-contiguous memory) is an operation. In-place operations deepen the tensor they write.

A recurrent layer's chain grows with n (one step per position); a layer whose operations all
act on the whole sequence has a depth that does not depend on n.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from repro.complexity.flops import LogLogFit, fit_exponents


# Re-interpretations of memory whose schema does not say so.
_METADATA_ONLY = {"aten::_unsafe_view", "aten::lift_fresh"}


def _aliases_input(func) -> bool:
    """Whether the op's result is a view of an input (no computation)."""
    if func._schema.name in _METADATA_ONLY:
        return True
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _writes_input(func) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


class DependencyDepth(TorchDispatchMode):
    """Records, for every tensor an operation produces, the length of its dependency chain."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: dict[int, int] = {}
        self._alive: list[torch.Tensor] = []  # keeps ids from being reused while tracing
        self.operations = 0
        self.max_depth = 0

    def _of(self, t: torch.Tensor) -> int:
        return self.depth.get(id(t), 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        before = max((self._of(t) for t in inputs), default=0)
        free = _aliases_input(func)
        depth = before if free else before + 1
        if not free:
            self.operations += 1
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if _writes_input(func):
            outputs += [a for a, s in zip(args, func._schema.arguments) if s.alias_info is not None and s.alias_info.is_write]
        for t in outputs:
            self.depth[id(t)] = depth
            self._alive.append(t)
        self.max_depth = max(self.max_depth, depth)
        return out


def sequential_operations(layer: nn.Module, x: torch.Tensor) -> int:
    """The critical-path depth (in dependent operations) of ``layer(x)``."""
    with torch.no_grad(), DependencyDepth() as trace:
        layer(x)
    return trace.max_depth


@dataclass
class SequentialMeasurement:
    points: list[dict[str, int]]  # n, d, depth (critical path), operations (all dispatched)
    fit: LogLogFit  # exponent of n in the depth


def measure_sequential(build: Callable[[], nn.Module], lengths: Sequence[int], d: int, seed: int = 0) -> SequentialMeasurement:
    """Depth of ``build()`` on (1, n, d) inputs for each n in ``lengths``; log-log exponent in n."""
    torch.manual_seed(seed)
    layer = build()
    points = []
    for n in lengths:
        x = torch.randn(1, n, d)
        with torch.no_grad(), DependencyDepth() as trace:
            layer(x)
        points.append({"n": n, "d": d, "depth": trace.max_depth, "operations": trace.operations})
    return SequentialMeasurement(points, fit_exponents(points, ["n"], "depth"))
