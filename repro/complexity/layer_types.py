"""Section 4, Table 1: minimal honest versions of the four layer types the paper compares.

Each maps a sequence (batch, n, d) to a sequence (batch, n, d), as Section 4 requires ("mapping
one variable-length sequence of symbol representations to another sequence of equal length").

* :class:`SelfAttentionLayer`: single-head self-attention over all n positions, built on
  :class:`repro.model.attention.MultiHeadAttention` (Eq. 1 with its four projections).
* :class:`RecurrentLayer`: an Elman (tanh) RNN, h_t = tanh(W x_t + U h_{t-1} + b), stepping
  through the positions in an explicit Python loop, so its sequential steps are real.
* :class:`ConvolutionalLayer`: a causal 1-D convolution with d input and d output channels,
  kernel width k and dilation (1 = contiguous kernels; k^l at depth l = dilated, as ByteNet [18]).
* :class:`RestrictedSelfAttentionLayer`: self-attention restricted to a neighbourhood of r
  positions centred on the output position. Only the band is computed: the r neighbours of each
  position are gathered (``unfold``), so scores are an n x r matrix, never n x n.

``positionwise`` names the sub-modules applied to each position independently (the attention
projections). Table 1 books them with the point-wise feed-forward layer, not with the layer
(Section 4: a separable convolution's O(k n d + n d^2) "is equal to the combination of a
self-attention layer and a point-wise feed-forward layer"), so :mod:`repro.complexity.flops`
leaves them out of a layer's count.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.model.attention import MultiHeadAttention


class SelfAttentionLayer(nn.Module):
    """Self-attention: every output position attends to all n input positions."""

    positionwise = ("w_q", "w_k", "w_v", "w_o")
    causal = False

    def __init__(self, d: int) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d, n_heads=1, d_k=d, d_v=d)

    def forward(self, x: Tensor) -> Tensor:
        return self.attention(x, x, x)


class RecurrentLayer(nn.Module):
    """Elman RNN: h_t = tanh(W x_t + U h_{t-1} + b), h_0 = 0, output h_1..h_n.

    The input term W x_t does not depend on earlier steps, so it is computed for all positions at
    once; only the recurrence U h_{t-1} is stepped, one position at a time, which is the minimum
    number of sequential operations a recurrent layer needs. ``cut`` (a probe for
    :mod:`repro.complexity.path`) detaches the state after that step before it is fed on, so no
    signal can travel through it.
    """

    positionwise = ()
    causal = True

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w_input = nn.Linear(d, d)
        self.w_state = nn.Linear(d, d, bias=False)

    def forward(self, x: Tensor, cut: int | None = None) -> Tensor:
        inputs = self.w_input(x)
        h = x.new_zeros(x.size(0), x.size(2))
        states = []
        for t in range(x.size(1)):
            h = torch.tanh(inputs[:, t] + self.w_state(h))
            states.append(h)
            if t == cut:
                h = h.detach()
        return torch.stack(states, dim=1)


class ConvolutionalLayer(nn.Module):
    """Causal 1-D convolution, d -> d channels: y_i = sum_{a<k} W_a x_{i - a*dilation} + b.

    Left padding of (k-1)*dilation keeps n outputs and lets position i see only positions <= i
    (the autoregressive convolutions of ByteNet [18] and WaveNet that the paper cites)."""

    positionwise = ()
    causal = True

    def __init__(self, d: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        self.left = (kernel - 1) * dilation
        self.conv = nn.Conv1d(d, d, kernel, dilation=dilation)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(F.pad(x.transpose(1, 2), (self.left, 0))).transpose(1, 2)


def banded_attention(query: Tensor, key: Tensor, value: Tensor, r: int) -> Tensor:
    """Eq. 1 restricted to the r positions centred on each query (r odd): positions i - (r-1)/2
    .. i + (r-1)/2 that exist. Shapes (batch, n, d); cost 4 n r d multiply-adds, no n x n matrix."""
    if r < 1 or r % 2 == 0:
        raise ValueError(f"neighbourhood size r must be odd and positive (got {r})")
    half = (r - 1) // 2
    n = query.size(1)
    # (batch, n, d) -> (batch, n, d, r): the r neighbours of every position, zero-padded at the ends.
    keys = F.pad(key.transpose(1, 2), (half, half)).unfold(2, r, 1).permute(0, 2, 1, 3)
    values = F.pad(value.transpose(1, 2), (half, half)).unfold(2, r, 1).permute(0, 2, 1, 3)
    scores = torch.einsum("bnd,bndr->bnr", query, keys) / math.sqrt(query.size(-1))
    offsets = torch.arange(n, device=query.device).unsqueeze(1) + torch.arange(-half, half + 1, device=query.device)
    exists = (offsets >= 0) & (offsets < n)
    weights = scores.masked_fill(~exists, float("-inf")).softmax(dim=-1)
    return torch.einsum("bnr,bndr->bnd", weights, values)


class RestrictedSelfAttentionLayer(nn.Module):
    """Self-attention restricted to a neighbourhood of r positions centred on each output."""

    positionwise = ("w_q", "w_k", "w_v", "w_o")
    causal = False

    def __init__(self, d: int, r: int) -> None:
        super().__init__()
        self.r = r
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: Tensor) -> Tensor:
        return self.w_o(banded_attention(self.w_q(x), self.w_k(x), self.w_v(x), self.r))


def convolution_stack(d: int, kernel: int, depth: int, dilated: bool) -> nn.Sequential:
    """``depth`` causal convolutions; dilation k^l at depth l when ``dilated``, else 1."""
    return nn.Sequential(*(ConvolutionalLayer(d, kernel, kernel**level if dilated else 1) for level in range(depth)))


class SeparableConvolutionalLayer(nn.Module):
    """Section 4's separable convolution [6]: a depthwise convolution of width k (each of the d
    channels on its own, k n d multiply-adds) followed by a point-wise d x d projection (n d^2):
    O(k n d + n d^2)."""

    positionwise = ()
    causal = True

    def __init__(self, d: int, kernel: int) -> None:
        super().__init__()
        self.left = kernel - 1
        self.depthwise = nn.Conv1d(d, d, kernel, groups=d)
        self.pointwise = nn.Linear(d, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.pointwise(self.depthwise(F.pad(x.transpose(1, 2), (self.left, 0))).transpose(1, 2))


class FeedForwardLayer(nn.Module):
    """The position-wise feed-forward network of Eq. 2 with inner width ``d_ff`` (Section 3.3)."""

    positionwise = ()
    causal = False

    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.w_1(x)))
