"""Section 5.4: label-smoothed cross-entropy (epsilon_ls = 0.1), padding ignored.

Convention (OpenNMT-py / the Annotated Transformer): the target distribution ``q`` puts
``1 - eps`` on the reference token, nothing on PAD, and spreads ``eps`` evenly over the other
``V - 2`` tokens. The loss of one position is the cross-entropy ``H(q, p) = -sum_k q_k log p_k``;
in closed form, with ``lse = logsumexp(z)``,

    H(q, p) = (1 - eps) * (lse - z_y) + eps / (V - 2) * sum_{k not in {y, PAD}} (lse - z_k)

(fairseq spreads eps over all V tokens, tensor2tensor over V - 1; both give PAD some mass).
Positions whose target is PAD contribute nothing.

Speed: a Transformer spends much of its time on the pre-softmax projection and its softmax
over a large vocabulary. :class:`FusedProjectionLoss` projects only the non-padding positions
and walks over them in row chunks; for each chunk it computes the logits, the loss and, when
a gradient is wanted, the gradient ``softmax(z) - q`` in place, folding it at once into the
gradients of the hidden states and the projection weight. No (tokens x V) tensor outlives its
chunk, so there are no large allocations and no extra copies of the logits (log-softmax, its
gradient) as with ``nn.CrossEntropyLoss`` on full logits.

Mixed precision (under ``torch.autocast`` with bf16, :mod:`repro.model.precision`): the three
matrix products of a chunk run in bf16; the chunk's logits are widened to fp32 for the
log-sum-exp, the loss and ``softmax(z) - q``, and the weight's gradient is accumulated in fp32.
The memory bound is unchanged: one (chunk x V) fp32 buffer, plus bf16 copies of the chunk's
gradient and of the two inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

DEFAULT_CHUNK_ROWS = 1024


def smoothed_target(target: Tensor, vocab_size: int, epsilon: float, pad_id: int,
                    dtype: torch.dtype = torch.float32) -> Tensor:
    """The dense target distribution q (n, V) of the convention above (for tests and reference)."""
    q = torch.full((target.numel(), vocab_size), epsilon / (vocab_size - 2), dtype=dtype)
    q[:, pad_id] = 0.0
    q.scatter_(1, target.view(-1, 1), 1.0 - epsilon)
    return q


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """Reference loss on full logits (n, V): returns (sum of H(q, p), sum of -log p_y) over non-PAD targets."""
    logits, target = logits.reshape(-1, logits.size(-1)), target.reshape(-1)
    keep = target != pad_id
    logits, target = logits[keep], target[keep]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    vocab = logits.size(-1)
    lse = logits.logsumexp(-1)
    z_y = logits.gather(1, target[:, None]).squeeze(1)
    nll = lse - z_y
    others = (vocab - 1) * lse - (logits.sum(-1) - logits[:, pad_id]) - nll  # sum over k not in {y, PAD}
    loss = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
    return loss.sum(), nll.sum()


class _FusedProjectionLoss(torch.autograd.Function):
    """sum_i H(q_i, softmax(h_i W^T)) * scale, with the gradient formed chunk by chunk in forward."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int,
                scale: float | Tensor, chunk_rows: int, nll_out: Tensor, compute_dtype: torch.dtype,
                correct_out: Tensor | None = None):  # type: ignore[override]
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        n, vocab = hidden.size(0), weight.size(0)
        off = epsilon / (vocab - 2)
        mixed = compute_dtype != torch.float32
        # under mixed precision the two matrices are cast once; the logits, log-sum-exp, loss
        # and the gradient softmax(z) - q are fp32, as are the gradients returned
        h_all = hidden.to(compute_dtype) if mixed else hidden
        w = weight.to(compute_dtype) if mixed else weight
        loss_sum = hidden.new_zeros((), dtype=torch.float32)
        nll_sum = hidden.new_zeros((), dtype=torch.float32)
        grad_hidden = torch.empty_like(hidden) if need_grad else None
        grad_weight = torch.zeros_like(weight) if need_grad else None
        for start in range(0, n, chunk_rows):
            h = h_all[start:start + chunk_rows]
            y = target[start:start + chunk_rows]
            z = h @ w.t()                                         # (rows, V), the only large tensor
            if mixed:
                z = z.float()
            lse = z.logsumexp(-1)
            z_y = z.gather(1, y[:, None]).squeeze(1)
            nll = lse - z_y
            others = (vocab - 1) * lse - (z.sum(-1) - z[:, pad_id]) - nll
            loss_sum += ((1.0 - epsilon) * nll + off * others).sum()
            nll_sum += nll.sum()
            if correct_out is not None:   # evaluation only: the positions whose most likely token is the target
                correct_out += (z.argmax(-1) == y).sum()
            if need_grad:
                # dH/dz = softmax(z) - q, computed in place in the logits buffer
                z.sub_(lse[:, None]).exp_()
                z.sub_(off)
                z[:, pad_id] += off
                z.scatter_add_(1, y[:, None], z.new_full((y.numel(), 1), -(1.0 - epsilon - off)))
                z.mul_(scale)
                if mixed:
                    g = z.to(compute_dtype)
                    grad_hidden[start:start + chunk_rows] = g @ w
                    grad_weight += g.t() @ h                        # accumulated in fp32
                else:
                    torch.mm(z, weight, out=grad_hidden[start:start + chunk_rows])
                    grad_weight.addmm_(z.t(), h)
        ctx.save_for_backward(grad_hidden, grad_weight) if need_grad else None
        nll_out.copy_(nll_sum)
        return loss_sum * scale

    @staticmethod
    def backward(ctx, grad_output: Tensor):  # type: ignore[override]
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_output, grad_weight * grad_output, None, None, None, None, None, None, None, None


@dataclass
class LossOutput:
    """``loss``: sum of H(q, p) over target tokens times ``scale`` (what is back-propagated);
    ``nll_sum``: sum of -log p(y) (unscaled, for perplexity), a tensor on the loss's device;
    ``tokens``: non-PAD targets; ``correct``: when asked for, the targets that are the projection's
    most likely token (token accuracy), a tensor on the loss's device. ``nll`` reads ``nll_sum`` on
    the host (a sync on a GPU)."""

    loss: Tensor
    nll_sum: Tensor
    tokens: int
    correct: Tensor | None = None

    @property
    def nll(self) -> float:
        return float(self.nll_sum)


def projection_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, *, epsilon: float, pad_id: int,
    scale: float | Tensor = 1.0, chunk_rows: int = DEFAULT_CHUNK_ROWS, accuracy: bool = False,
) -> LossOutput:
    """Label-smoothed loss of the projection ``hidden @ weight.T`` against ``target``, PAD ignored;
    ``scale`` (a number, or a 0-dim tensor on the device: no host sync) multiplies the loss; with
    ``accuracy`` (evaluation), also how many targets are the most likely token of their logits."""
    if weight.size(0) <= 2:
        raise ValueError("label smoothing needs a vocabulary of more than 2 tokens")
    hidden, target = hidden.reshape(-1, hidden.size(-1)), target.reshape(-1)
    keep = target != pad_id
    hidden, target = hidden[keep], target[keep]
    nll = torch.zeros((), dtype=torch.float32, device=hidden.device)
    correct = torch.zeros((), dtype=torch.int64, device=hidden.device) if accuracy else None
    device_type = hidden.device.type
    compute_dtype = (torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type)
                     else torch.float32)
    with torch.autocast(device_type, enabled=False):   # the function casts for itself (see forward)
        loss = _FusedProjectionLoss.apply(hidden, weight, target, float(epsilon), int(pad_id),
                                          scale if isinstance(scale, Tensor) else float(scale), int(chunk_rows),
                                          nll, compute_dtype, correct)
    return LossOutput(loss, nll, int(target.numel()), correct)


def _widened(logits: Tensor) -> Tensor:
    """bf16 or fp16 logits as fp32 (fp32 and fp64 as they are)."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per row of the logits ``z`` (n, V): H(q, softmax(z)) and -log p_y (not differentiated), in fp32.

    The backward pass is ``(exp(z - lse) - q) * g``. Compiled, it is one element-wise expression, ``q``
    written as index comparisons (``1 - eps`` where ``k == y``, 0 where ``k == PAD``, else
    ``eps / (V - 2)``): one kernel that reads the logits once and writes their gradient once. Eager,
    it is formed in place in one fp32 buffer. Autograd's own
    formula for the forward below (``gather``'s and ``select``'s backward) scatters into a zeroed
    fp32 (n, V) buffer first: two more passes over 25000 x 37000 values per update of the paper."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, epsilon: float, pad_id: int):  # type: ignore[override]
        vocab = logits.size(-1)
        z = _widened(logits)
        lse = z.logsumexp(-1)
        nll = lse - z.gather(1, target[:, None]).squeeze(1)
        others = (vocab - 1) * lse - (z.sum(-1) - z[:, pad_id]) - nll   # sum over k not in {y, PAD}
        loss = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
        # the class indices, made here beside the logits (a backward pass may run where no device is current)
        ctx.save_for_backward(logits, target, lse, torch.arange(vocab, device=logits.device))
        ctx.epsilon, ctx.pad_id = epsilon, pad_id
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor):  # type: ignore[override]
        logits, target, lse, classes = ctx.saved_tensors
        vocab, eps = logits.size(-1), ctx.epsilon
        off = eps / (vocab - 2)
        pad_rows = (target == ctx.pad_id)[:, None]
        if torch.compiler.is_compiling():
            # element-wise only: inductor makes it one kernel (read the logits, write their gradient)
            p = (_widened(logits) - lse[:, None]).exp()
            grad = torch.where(classes == target[:, None], p - (1.0 - eps),
                               torch.where(classes == ctx.pad_id, p, p - off))
            # a PAD row weighs 0, even where its logits are not finite (0 x NaN would be NaN)
            return (grad * grad_loss[:, None]).masked_fill(pad_rows, 0.0).to(logits.dtype), None, None, None
        # eager: in place in one fp32 buffer (index comparisons over (n, V) would allocate more)
        grad = _widened(logits).sub(lse[:, None]).exp_().sub_(off)
        grad[:, ctx.pad_id] += off
        grad.scatter_add_(1, target[:, None], grad.new_full((target.numel(), 1), -(1.0 - eps - off)))
        grad.mul_(grad_loss[:, None]).masked_fill_(pad_rows, 0.0)
        return grad.to(logits.dtype), None, None, None


def dense_projection_loss(hidden: Tensor, weight: Tensor, target: Tensor, *, epsilon: float, pad_id: int,
                          scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """The same loss as :func:`projection_loss`, every position projected: no data-dependent
    shape and no host sync, so that ``torch.compile`` traces it whole and a GPU never waits for the
    host; PAD positions weigh 0. Returns (loss sum x ``scale``, NLL sum, non-PAD targets), tensors.

    The logits are widened to fp32 for the log-sum-exp (under bf16 autocast the product is bf16);
    their gradient is formed in one element-wise pass (:class:`_SmoothedCrossEntropy`)."""
    if weight.size(0) <= 2:
        raise ValueError("label smoothing needs a vocabulary of more than 2 tokens")
    hidden = hidden.reshape(-1, hidden.size(-1))
    return smoothed_cross_entropy(hidden @ weight.t(), target, epsilon=epsilon, pad_id=pad_id, scale=scale)


def smoothed_cross_entropy(logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int,
                           scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """Section 5.4's loss on logits (n, V): (sum of H(q, p) over non-PAD targets x ``scale``, NLL sum,
    non-PAD targets), tensors; the logits' gradient in one element-wise pass."""
    target = target.reshape(-1)
    loss, nll = _SmoothedCrossEntropy.apply(logits.reshape(target.numel(), -1), target, float(epsilon), int(pad_id))
    pad = target == pad_id
    return loss.masked_fill(pad, 0.0).sum() * scale, nll.masked_fill(pad, 0.0).sum(), (~pad).sum()


#: Which projection loss the objective uses. Chunked (only the non-PAD rows, the softmax gradient
#: formed in place) is 1.8x faster than full logits on a 2-core CPU (docs/benchmarks.md, "Speed"); its row count
#: depends on the data, which costs a GPU a host sync per pass and torch.compile a graph break, so on
#: CUDA and under compile the dense form runs. Both give the same loss (tests/train/test_loss.py).
LOSS_IMPLS = ("chunked", "dense")


def loss_impl_for(device: torch.device, compiled: bool) -> str:
    return "dense" if compiled or torch.device(device).type != "cpu" else "chunked"


class TranslationLoss(nn.Module):
    """The training objective as one module, so that DDP can wrap it: encode, decode, then the
    projection and label-smoothed loss over the non-padding target positions (``impl``:
    :data:`LOSS_IMPLS`)."""

    def __init__(self, model: nn.Module, epsilon: float, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                 impl: str = "chunked") -> None:
        super().__init__()
        if impl not in LOSS_IMPLS:
            raise ValueError(f"impl must be one of {LOSS_IMPLS}, got {impl!r}")
        self.model, self.epsilon, self.chunk_rows, self.impl = model, epsilon, chunk_rows, impl
        if getattr(model.output_projection, "bias", None) is not None:
            raise ValueError("the fused loss expects a bias-free output projection (Section 3.4)")

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor,
                scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
        memory, src_mask = self.model.encode(src)
        hidden = self.model.decode(tgt_in, memory, src_mask)
        weight, pad = self.model.output_projection.weight, self.model.cfg.pad_id
        if self.impl == "dense":
            return dense_projection_loss(hidden, weight, tgt_out, epsilon=self.epsilon, pad_id=pad, scale=scale)
        out = projection_loss(hidden, weight, tgt_out, epsilon=self.epsilon, pad_id=pad, scale=scale,
                              chunk_rows=self.chunk_rows)
        # tensors, so that DDP's forward sees only tensors
        return out.loss, out.nll_sum, torch.tensor(out.tokens)
