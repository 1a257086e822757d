"""The adapter for repro's own implementation (``repro.audit.repro_adapter:adapter``).

Every part is the one repro runs: the model's own modules, the training loop's optimizer builder,
schedule, objective and checkpoint averaging, the evaluation's beam search. Settings are read
from the resolved job specs of ``repro submit`` and measured on the code that uses them
(:mod:`repro.cluster.paper_jobs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from repro.audit.adapter import (
    Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts, NextLogProbs,
)
from repro.claims.outcome import Absent
from repro.cluster.paper_jobs import paper_settings
from repro.data.vocab import BOS, EOS
from repro.audit.scripted import ScriptedModel
from repro.decode.beam import beam_search
from repro.model import Transformer, TransformerConfig
from repro.model.attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention
from repro.model.transformer_config import ATTENTION_IMPLS
from repro.model.feedforward import PositionwiseFeedForward
from repro.model.layers import DecoderLayer, EncoderLayer
from repro.model.masks import causal_mask
from repro.model.positional import sinusoidal_encoding
from repro.recipes import get_recipe
from repro.train.average import average_of_run
from repro.train.loss import LOSS_IMPLS, dense_projection_loss, projection_loss
from repro.train.optimizer import optimizer_for
from repro.train.probes import checkpoint_steps, update_rates
from repro.train.schedule import learning_rate


def encoder_layer_parts(layer: EncoderLayer) -> EncoderLayerParts:
    """An encoder layer's parts, as the protocol lays them out (its layer called without a mask)."""
    return EncoderLayerParts(
        layer=lambda x: layer(x, None),
        self_attention=lambda x: layer.self_attn(x, x, x),
        feed_forward=layer.feed_forward,
        norms=(layer.sublayers[0].norm, layer.sublayers[1].norm),
    )


def decoder_layer_parts(layer: DecoderLayer) -> DecoderLayerParts:
    """A decoder layer's parts: self-attention under the causal mask, attention over ``memory``."""
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, None, causal_mask(x.size(1), x.device)),
        self_attention=lambda x: layer.self_attn(x, x, x, causal_mask(x.size(1), x.device)),
        cross_attention=lambda x, memory: layer.cross_attn(x, memory, memory, None),
        feed_forward=layer.feed_forward,
        norms=(layer.sublayers[0].norm, layer.sublayers[1].norm, layer.sublayers[2].norm),
    )


def first_layer_input(layers: nn.ModuleList, run: Callable[[], object]) -> Tensor:
    """What the first of ``layers`` receives while ``run`` runs the model's own path (Section 3.4:
    the sum of embedding and positions, after the embedding dropout in train mode): observed on
    ``encode``/``decode`` as training and search call them, not on a helper they may bypass."""
    seen: list[Tensor] = []
    handle = layers[0].register_forward_pre_hook(lambda _module, args: seen.append(args[0]))
    try:
        run()
    finally:
        handle.remove()
    if not seen:
        raise Absent("the stack's path never runs its first layer")
    return seen[0]


def model_parts(model: Transformer) -> ModelParts:
    """Every part of a built Transformer the claims look at, each the model's own code path."""

    def incremental(src: Tensor, tgt_in: Tensor, chunks: Sequence[int]) -> Tensor:
        memory, src_mask = model.encode(src)
        cache, start, logits = model.new_cache(), 0, []
        for size in chunks:
            logits.append(model.project(model.decode(tgt_in[:, start:start + size], memory, src_mask, cache)))
            start += size
        return torch.cat(logits, dim=1)

    cfg = model.cfg
    return ModelParts(
        forward=model,
        vocab_size=cfg.tgt_vocab_size,
        d_model=cfg.d_model,
        pad_id=cfg.pad_id,
        embed_source=model.src_embed,
        source_embedding=model.src_embed.weight,
        target_embedding=model.tgt_embed.weight,
        output_projection=model.output_projection.weight,
        module=model,
        embed_target=model.tgt_embed,
        encoder_input=lambda src: first_layer_input(model.encoder_layers, lambda: model.encode(src)),
        decoder_input=lambda tgt: first_layer_input(model.decoder_layers, lambda: model.decode(tgt, *model.encode(tgt))),
        encode=lambda src: model.encode(src)[0],
        encoder_layers=[encoder_layer_parts(layer) for layer in model.encoder_layers],
        decoder_layers=[decoder_layer_parts(layer) for layer in model.decoder_layers],
        incremental=incremental,
        bos_id=BOS, eos_id=EOS,
    )


class ReproAdapter(Adapter):
    """repro's Transformer; ``config_overrides`` builds a variant (e.g. ``norm_first=True``)."""

    has_repro_presets = True
    #: The model class every model-building method uses (a variant may put a subclass here).
    transformer_class: type[Transformer] = Transformer

    def watched_on_jobs(self, method: str) -> bool:
        """Whether the claims that answer to ``method`` may watch repro's own paper jobs (the training
        loop, the evaluation's search) instead of calling it: True unless a subclass overrides it (a
        variant of repro, or an implementation built on it, is audited through what it overrides)."""
        return getattr(type(self), method, None) is getattr(ReproAdapter, method, None)

    def __init__(self, **config_overrides: Any) -> None:
        self.overrides = config_overrides
        self.name = "repro" + (f" ({', '.join(f'{k}={v}' for k, v in config_overrides.items())})" if config_overrides else "")

    def _config(self, **fields: Any) -> TransformerConfig:
        return TransformerConfig(**{"dropout": 0.0, **fields, **self.overrides})

    def _build(self, **fields: Any) -> Transformer:
        return self.transformer_class(self._config(**fields))

    # -- Section 3.2 ------------------------------------------------------------------------
    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return scaled_dot_product_attention(query, key, value, mask)[0]

    def attention_paths(self) -> dict[str, Any]:
        return {"reference": self.attention, "fused": fused_attention,
                "fused, in a GPU's compiled graph": partial(fused_attention, graph_form=True)}

    def multi_head_attention(self, d_model: int, n_heads: int):
        cfg = self._config(d_model=d_model, n_heads=n_heads)
        return MultiHeadAttention(d_model, n_heads, cfg.d_k, cfg.d_v, cfg.attention).eval()

    def multi_head_cross_attention(self, d_model: int, n_heads: int):
        """repro's MultiHeadAttention takes queries, keys and values apart (``module(q, k, v)``)."""
        return self.multi_head_attention(d_model, n_heads)

    # -- Section 3.3 / 3.5 ------------------------------------------------------------------
    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        ffn = PositionwiseFeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ffn, ffn.w_1.weight.T, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return sinusoidal_encoding(length, d_model)

    # -- Section 3.1 ------------------------------------------------------------------------
    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        return encoder_layer_parts(EncoderLayer(self._config(d_model=d_model, n_heads=n_heads, d_ff=d_ff)).eval())

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        return decoder_layer_parts(DecoderLayer(self._config(d_model=d_model, n_heads=n_heads, d_ff=d_ff)).eval())

    def _model_config(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                      **more: Any) -> dict[str, Any]:
        return dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                    d_ff=d_ff, n_layers=n_layers, **more)

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        return model_parts(self._build(**self._model_config(vocab_size, d_model, n_heads, d_ff, n_layers)).eval())

    def model_paths(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> dict[str, ModelParts]:
        if "attention" in self.overrides:
            return {self.overrides["attention"]: self.model(vocab_size, d_model, n_heads, d_ff, n_layers)}
        paths = {impl: model_parts(self._build(**self._model_config(vocab_size, d_model, n_heads, d_ff, n_layers,
                                                                    attention=impl)).eval())
                 for impl in ATTENTION_IMPLS}
        # The attention maps (the report's Figures 3-5, the parser's alignments) run the fused
        # model through the reference path, which then applies the causal flag itself.
        recording = self._build(**self._model_config(vocab_size, d_model, n_heads, d_ff, n_layers, attention="fused"))
        for module in recording.modules():
            if isinstance(module, MultiHeadAttention):
                module.record_weights = True
        paths["fused, weights recorded"] = model_parts(recording.eval())
        return paths

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        return model_parts(self._build(**self._model_config(vocab_size, d_model, n_heads, d_ff, n_layers,
                                                            dropout=dropout)).train())

    # -- Section 5: what the training loop builds and runs -----------------------------------
    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return optimizer_for(get_recipe("base").train, torch.nn.ParameterList(params))

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        return learning_rate(step, d_model=d_model, warmup_steps=warmup_steps, scale=get_recipe("base").train.lr_scale)

    def update_rates(self, steps: Sequence[int], d_model: int, warmup_steps: int) -> list[float]:
        return update_rates(steps, d_model, warmup_steps)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        """The training objective's fused kernel (:func:`repro.train.loss.projection_loss`), fed the
        logits as hidden states through an identity projection, so its gradient is dLoss/dlogits."""
        identity = torch.eye(logits.size(-1), dtype=logits.dtype, device=logits.device)
        return projection_loss(logits, identity, target, epsilon=smoothing, pad_id=pad_id).loss

    def dense_loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        """The objective's dense form (:func:`repro.train.loss.dense_projection_loss`: what the loop
        calls on an accelerator and under ``torch.compile``), fed as :meth:`loss` is."""
        identity = torch.eye(logits.size(-1), dtype=logits.dtype, device=logits.device)
        return dense_projection_loss(logits, identity, target, epsilon=smoothing, pad_id=pad_id)[0]

    def loss_paths(self) -> dict[str, Any]:
        """Both forms of the objective the training loop runs (``repro.train.loss.loss_impl_for``):
        the chunked one on a CPU, the dense one on an accelerator or compiled (a variant that
        overrides ``loss`` is watched on its own loss)."""
        if type(self).loss is not ReproAdapter.loss:  # a variant with its own loss: that loss alone
            return {"loss": self.loss}
        paths = {"chunked": self.loss, "dense": self.dense_loss}
        assert set(paths) == set(LOSS_IMPLS), "a loss form the loop can run is not watched"
        return paths

    def hyperparameters(self) -> dict[str, Any]:
        """The paper's settings as ``repro submit`` resolves them into job specs, and as measured
        on the code that uses them (:func:`repro.cluster.paper_jobs.paper_settings`)."""
        return paper_settings()

    def average_last(self, states: Sequence[dict[str, Tensor]], k: int) -> dict[str, Tensor]:
        return average_of_run(states, k, self._config(src_vocab_size=8, tgt_vocab_size=8, d_model=4, n_heads=1,
                                                      d_ff=4, n_layers=1).to_dict())

    def checkpoint_steps(self, seconds_per_update: float, updates: int) -> list[int]:
        return checkpoint_steps(get_recipe("base").train, seconds_per_update, updates)

    # -- Section 6.1: the evaluation's search -------------------------------------------------
    def search(self, next_log_probs: NextLogProbs, source_length: int, vocab_size: int, *, beam_size: int,
               alpha: float, max_len_offset: int) -> list[int]:
        src = torch.full((1, source_length), 4, dtype=torch.long)
        return beam_search(ScriptedModel(next_log_probs), src, beam_size=beam_size, alpha=alpha,
                           max_len_offset=max_len_offset, use_cache=False)[0]

    def beam_search(self, parts: ModelParts, src: Tensor, *, beam_size: int, alpha: float,
                    max_len_offset: int, use_cache: bool = True) -> list[list[int]]:
        return beam_search(parts.module, src, beam_size=beam_size, alpha=alpha, max_len_offset=max_len_offset,
                           use_cache=use_cache)


def adapter() -> Adapter:
    """Factory for ``repro audit repro.audit.repro_adapter:adapter``."""
    return ReproAdapter()
