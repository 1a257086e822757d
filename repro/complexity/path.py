"""Table 1, "Maximum path length": how many hops a signal needs between two positions.

Section 4: "the length of the paths forward and backward signals have to traverse in the
network ... the maximum path length between any two input and output positions in networks
composed of the different layer types". Measured with autograd, never read off the layer's code:

* A stack of layers (self-attention, convolutions, restricted self-attention): the path from
  input position j to output position i is the smallest depth l such that the output of the
  first l layers at i depends on the input at j, i.e. d y^(l)_i / d x_j != 0, measured by a
  backward pass through those l layers.
* A recurrent layer, whose one layer already connects every pair: the signal from x_j to h_i
  must pass the recurrent states h_j, ..., h_{i-1}. Each state is cut in turn (detached before
  it is fed on) and the pairs whose dependency the cut removes are the pairs that pass it; the
  path length of a pair is 1 + the number of states every one of its paths passes.

Which pairs must be connected: all of them, or for a causal layer (RNN, causal convolution)
those with j <= i. A pair left unconnected gives the stack an infinite path length.

One backward pass gives the whole n x n dependency pattern: the sequence is replicated n times
along the batch, and batch row i back-propagates (random positive channel weights, so nothing
cancels by accident) from output position i only. The layers treat batch rows independently, so
row i's input gradient is exactly d y_i / d x.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn


@contextmanager
def one_thread() -> Iterator[None]:
    """Run on one intra-op thread: the probes' tensors are tiny, and on a busy 2-core machine
    float64 matrix products split over two threads were measured ~300x slower than on one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def replicate(x: Tensor) -> Tensor:
    """(1, n, d) -> (n, n, d) float64 leaf: one copy of the sequence per output position."""
    n = x.shape[1]
    return x.detach().double().expand(n, -1, -1).clone().requires_grad_(True)


def dependency(outputs: Tensor, inputs: Tensor, gen: torch.Generator) -> Tensor:
    """Boolean (n, n): whether output position i depends on input position j. ``outputs`` (n, n, d)
    must be computed from ``inputs`` = :func:`replicate` (x), batch row by batch row."""
    n, d = outputs.shape[0], outputs.shape[2]
    cotangents = torch.zeros_like(outputs)
    cotangents[torch.arange(n), torch.arange(n)] = torch.rand(n, d, generator=gen, dtype=outputs.dtype) + 0.5
    (grads,) = torch.autograd.grad(outputs, inputs, cotangents, retain_graph=True)
    return grads.abs().sum(-1) > 0


def required_pairs(n: int, causal: bool) -> Tensor:
    """The (output i, input j) pairs a layer of this kind should connect."""
    full = torch.ones(n, n, dtype=torch.bool)
    return full.tril() if causal else full


def stack_path_lengths(
    layers: Iterable[nn.Module], x: Tensor, *, causal: bool, max_depth: int, seed: int = 0
) -> Tensor:
    """(n, n) float: for each (i, j), the fewest leading layers of ``layers`` through which output
    i depends on input j (``inf`` when none of the first ``max_depth`` does). ``layers`` may be a
    generator: it is consumed only until every pair in :func:`required_pairs` is connected."""
    gen = torch.Generator().manual_seed(seed)
    inputs = replicate(x)
    n = inputs.shape[0]
    required = required_pairs(n, causal)
    lengths = torch.full((n, n), math.inf, dtype=torch.float64)
    h = inputs
    for depth, layer in zip(range(1, max_depth + 1), layers):
        h = layer.double()(h)
        lengths[dependency(h, inputs, gen) & torch.isinf(lengths)] = depth
        if not torch.isinf(lengths[required]).any():
            break
    return lengths


def recurrent_path_lengths(layer: nn.Module, x: Tensor, seed: int = 0) -> Tensor:
    """(n, n) float: 1 + the number of recurrent states every path from x_j to h_i passes (``inf``
    when h_i does not depend on x_j). ``layer(x, cut=t)`` must detach the state after step t."""
    gen = torch.Generator().manual_seed(seed)
    layer = layer.double()
    inputs = replicate(x)
    n = inputs.shape[0]
    connected = dependency(layer(inputs), inputs, gen)
    passes = torch.zeros(n, n, dtype=torch.float64)
    for t in range(n):
        passes += (connected & ~dependency(layer(inputs, cut=t), inputs, gen)).double()
    lengths = passes + 1
    lengths[~connected] = math.inf
    return lengths


def max_path_length(lengths: Tensor, causal: bool) -> float:
    """The longest of the shortest paths over the pairs the layer must connect."""
    return lengths[required_pairs(lengths.shape[0], causal)].max().item()


def closed_form(layer: str, n: int, *, k: int | None = None, r: int | None = None) -> int:
    """The maximum path length this module's constructions should have, derived by hand:

    * self-attention: 1 (one layer connects every pair);
    * recurrent: n (x_1 reaches h_n through the states h_1 .. h_n);
    * causal convolutions of width k, contiguous: a layer reaches k - 1 positions further back,
      so ceil((n - 1) / (k - 1)) layers; dilated (k^l at depth l): l layers reach back
      k^l - 1 positions, so ceil(log_k n) layers (the smallest l with k^l >= n);
    * restricted self-attention, r odd: a layer reaches (r - 1) / 2 positions either way, so
      ceil((n - 1) / ((r - 1) / 2)) layers.
    """
    if n < 2:
        return 1
    if layer == "self-attention":
        return 1
    if layer == "recurrent":
        return n
    if layer == "convolutional-contiguous":
        return math.ceil((n - 1) / (k - 1))
    if layer == "convolutional-dilated":
        depth = 0
        while k**depth < n:  # integer arithmetic: no rounding trouble at exact powers
            depth += 1
        return depth
    if layer == "restricted":
        return math.ceil((n - 1) / ((r - 1) // 2))
    raise ValueError(f"no closed form for layer type '{layer}'")
