"""The adapter for PyTorch's own ``torch.nn.Transformer`` (``repro audit repro.audit.torch_adapter:adapter``).

What is torch's and what is not, claim by claim:

* ``attention``: ``torch.nn.functional.scaled_dot_product_attention``, the function
  ``nn.MultiheadAttention`` calls when no attention weights are asked for (as the layers of
  ``nn.Transformer`` do). Its boolean ``attn_mask`` has the protocol's convention (True = attend).
* ``multi_head_attention`` and ``multi_head_cross_attention``: ``nn.MultiheadAttention(batch_first=True)``,
  called as (q, k, v) (self-attention, and with keys and values apart).
  Its inference fast path is switched off for the call (``torch.backends.mha``): the standard
  path is the one training takes. (The FLOP counter counts the fast path's fused kernel too,
  analytically: :func:`repro.complexity.flops.flop_counter`.)
* ``feed_forward`` and ``encoder_layer``: ``nn.TransformerEncoderLayer`` (ReLU, dropout 0,
  ``norm_first`` as given), its sub-layers taken from its own ``_sa_block``/``_ff_block`` and
  ``norm1``/``norm2``. ``norm_first=True`` is torch's pre-norm option, not the paper.
* ``model``: ``torch.nn.Transformer`` has no embeddings, no positional encoding and no output
  projection. To feed it tokens the adapter wraps it as thinly as it can: two untied
  ``nn.Embedding`` (source, target) and an ``nn.Linear`` projection, which are *the wrapper's*,
  and the decoder's causal mask from torch's ``nn.Transformer.generate_square_subsequent_mask``
  (with torch's key-padding masks), which is *torch's*. So the causal-mask claim tests torch's
  masking. The embeddings are reported as absent (``None`` in :class:`ModelParts`): torch has
  none, so the embedding claims (scale, sharing) and Table 3's counts, which include the
  embeddings, do not apply (PyTorch's translation tutorial adds separate, untied ones). The
  differences between Table 3's rows and the base dimensions are measured on the model built.
* ``positional_encoding``: torch has none: not applicable.
* ``loss``: ``nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=pad, reduction="sum")``,
  PyTorch's label smoothing. It spreads eps uniformly over all V classes (the true one
  included), so the mass off the label is eps * (1 - 1/V); ``ignore_index`` gives padding no
  gradient. ``nn.Transformer`` itself has no loss; this is the one PyTorch offers for it.
* ``hyperparameters``: only ``dropout_base``, read off ``nn.Transformer``'s default ``dropout``.
* ``optimizer`` and ``learning_rate``: PyTorch has no Transformer recipe (``torch.optim.Adam``'s
  defaults are Adam's, not a choice made for the Transformer): not applicable.

Differences from the paper that no claim of Section 3 measures: ``nn.Transformer`` puts a final
LayerNorm on both stacks, also in its post-norm configuration.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts

PAD_ID = 0


def _without_fast_path(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def call(*args: Any, **kwargs: Any) -> Tensor:
        enabled = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.backends.mha.set_fastpath_enabled(enabled)

    return call


class TorchSeq2Seq(nn.Module):
    """``torch.nn.Transformer`` between the wrapper's token embeddings and output projection."""

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, norm_first: bool) -> None:
        super().__init__()
        # The wrapper's parts: torch.nn.Transformer takes and returns d_model-vectors only.
        self.src_embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD_ID)
        self.output_projection = nn.Linear(d_model, vocab_size)
        with warnings.catch_warnings():  # torch warns that pre-norm disables its nested-tensor path
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(
                d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
            )

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        src_pad, tgt_pad = _padding(src), _padding(tgt_in)
        with warnings.catch_warnings():  # torch's encoder fast path warns that nested tensors are a prototype
            warnings.filterwarnings("ignore", message=".*nested tensors is in prototype", category=UserWarning)
            hidden = self.transformer(
                self.src_embed(src), self.tgt_embed(tgt_in), tgt_mask=causal,
                src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
            )
        return self.output_projection(hidden)


def _padding(tokens: Tensor) -> Tensor:
    """A key-padding mask in the float form of torch's causal mask (-inf at padding): torch
    deprecates mixing boolean and float masks."""
    return torch.zeros(tokens.shape, device=tokens.device).masked_fill(tokens == PAD_ID, float("-inf"))


class TorchTransformerAdapter(Adapter):
    """``torch.nn.Transformer`` and its layers, as PyTorch builds them (see the module docstring)."""

    def __init__(self, norm_first: bool = False) -> None:
        self.norm_first = norm_first
        self.name = f"torch.nn.Transformer (norm_first={norm_first})"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        mha = nn.MultiheadAttention(d_model, n_heads, dropout=0.0, batch_first=True).eval()
        return _without_fast_path(lambda q, k, v: mha(q, k, v, need_weights=False)[0])

    def multi_head_cross_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """``nn.MultiheadAttention`` takes queries, keys and values apart (``kdim``/``vdim`` default d_model)."""
        return self.multi_head_attention(d_model, n_heads)

    def _layer(self, d_model: int, n_heads: int, d_ff: int) -> nn.TransformerEncoderLayer:
        return nn.TransformerEncoderLayer(
            d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=self.norm_first
        ).eval()

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        layer = self._layer(d_model, 1, d_ff)
        return FeedForwardParts(
            layer._ff_block, layer.linear1.weight.T, layer.linear1.bias, layer.linear2.weight.T, layer.linear2.bias
        )

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        layer = self._layer(d_model, n_heads, d_ff)
        return EncoderLayerParts(
            layer=layer,
            self_attention=lambda x: layer._sa_block(x, None, None),
            feed_forward=layer._ff_block,
            norms=(layer.norm1, layer.norm2),
        )

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        module = TorchSeq2Seq(vocab_size, d_model, n_heads, d_ff, n_layers, self.norm_first).eval()
        # The embeddings and projection are the wrapper's, not torch's: reported as absent.
        return ModelParts(forward=module, vocab_size=vocab_size, d_model=d_model, pad_id=PAD_ID, module=module)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        return nn.CrossEntropyLoss(ignore_index=pad_id, reduction="sum", label_smoothing=smoothing)(logits, target)

    def hyperparameters(self) -> dict[str, Any]:
        default = inspect.signature(nn.Transformer.__init__).parameters["dropout"].default
        return {"dropout_base": (default, "the default 'dropout' of torch.nn.Transformer")}


def adapter() -> Adapter:
    """Factory for ``repro audit repro.audit.torch_adapter:adapter``: torch's post-norm layout."""
    return TorchTransformerAdapter(norm_first=False)


def adapter_norm_first() -> Adapter:
    """Factory for ``repro audit repro.audit.torch_adapter:adapter_norm_first``: torch's pre-norm option."""
    return TorchTransformerAdapter(norm_first=True)
