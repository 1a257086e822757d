"""Section 3: the Transformer, an encoder-decoder built from the layers of Section 3.1.

Read top to bottom: embeddings and positional encodings (3.4, 3.5, dropout of 5.4), the
encoder stack, the decoder stack, and the pre-softmax linear projection that shares its
weight with the embeddings (3.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from repro.model.transformer_config import TransformerConfig
from repro.model.embedding import ScaledEmbedding
from repro.model.layers import DecoderLayer, DecoderLayerCache, EncoderLayer
from repro.model.masks import causal_mask, padding_mask
from repro.model.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


@dataclass
class DecoderCache:
    """State of incremental decoding: one cache per decoder layer and the number of steps taken."""

    layers: list[DecoderLayerCache] = field(default_factory=list)
    length: int = 0

    def reorder(self, index: Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of Figure 1."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.src_embed = ScaledEmbedding(cfg.src_vocab_size, cfg.d_model, cfg.pad_id)
        self.tgt_embed = self.src_embed if cfg.share_embeddings else ScaledEmbedding(
            cfg.tgt_vocab_size, cfg.d_model, cfg.pad_id
        )
        positional = SinusoidalPositionalEncoding if cfg.positional == "sinusoidal" else LearnedPositionalEmbedding
        self.src_pos = positional(cfg.d_model, cfg.max_positions)
        self.tgt_pos = positional(cfg.d_model, cfg.max_positions)
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        # Pre-norm stacks need a closing LayerNorm; the paper's post-norm stacks end normalised.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        self._reset_parameters()
        if cfg.tie_output:
            self.output_projection.weight = self.tgt_embed.weight

    def _reset_parameters(self) -> None:
        """The paper gives no initialisation; we follow tensor2tensor/fairseq: Glorot-uniform
        matrices, zero biases, embeddings N(0, d_model^-0.5) so that the sqrt(d_model)-scaled
        embedding has unit variance."""
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif "embed" in name:
                nn.init.normal_(param, mean=0.0, std=self.cfg.d_model**-0.5)
            elif param.dim() > 1:
                nn.init.xavier_uniform_(param)
        for embed in {self.src_embed, self.tgt_embed}:
            with torch.no_grad():
                embed.weight[self.cfg.pad_id].zero_()

    # -- Section 3.4/3.5: input of each stack ------------------------------------------------
    def _embed(self, tokens: Tensor, embed: ScaledEmbedding, pos: nn.Module, offset: int = 0) -> Tensor:
        return self.embed_dropout(embed(tokens) + pos(tokens.size(1), offset))

    # -- encoder -------------------------------------------------------------------------------
    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Encode ``src`` (batch, n) to z (batch, n, d_model); returns z and the source mask."""
        src_mask = padding_mask(src, self.cfg.pad_id)
        x = self._embed(src, self.src_embed, self.src_pos)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x), src_mask

    # -- decoder -------------------------------------------------------------------------------
    def new_cache(self, capacity: int = 0) -> DecoderCache:
        """An empty incremental-decoding cache; with ``capacity``, buffers for that many target positions."""
        return DecoderCache([DecoderLayerCache.with_capacity(capacity) for _ in self.decoder_layers])

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None
    ) -> Tensor:
        """Decoder hidden states (batch, m, d_model) for the shifted-right targets ``tgt_in``.

        With a ``cache``, ``tgt_in`` holds only the new positions; keys and values of earlier
        positions come from the cache (incremental decoding gives the same result as a full
        recompute, because each position depends only on earlier ones).
        """
        offset = cache.length if cache is not None else 0
        length = tgt_in.size(1)
        x = self._embed(tgt_in, self.tgt_embed, self.tgt_pos, offset)
        causal = False
        if cache is None and self.cfg.attention == "fused":
            # Targets are padded on the right: the causal mask alone hides every PAD key from every
            # real query, so the kernel gets the triangle alone (fused_attention makes it its bias);
            # only PAD queries, whose outputs nothing reads, then see PAD keys.
            tgt_mask, causal = None, True
        elif cache is None:
            tgt_mask = causal_mask(length, tgt_in.device) & padding_mask(tgt_in, self.cfg.pad_id)
        elif length == 1:
            tgt_mask = None  # one new query may see every cached position
        else:
            tgt_mask = torch.ones(length, offset + length, dtype=torch.bool, device=tgt_in.device).tril(offset)[None, None]
        for i, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, src_mask, tgt_mask, cache.layers[i] if cache is not None else None, causal)
        if cache is not None:
            cache.length += length
        return self.decoder_norm(x)

    # -- Section 3.4: pre-softmax linear transformation ------------------------------------------
    def project(self, hidden: Tensor) -> Tensor:
        """Logits over the target vocabulary (the softmax is left to the loss or the search)."""
        return self.output_projection(hidden)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, src_mask = self.encode(src)
        return self.project(self.decode(tgt_in, memory, src_mask))


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once (as Table 3 counts them)."""
    seen: set[int] = set()
    total = 0
    for param in model.parameters():
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            total += param.numel()
    return total

