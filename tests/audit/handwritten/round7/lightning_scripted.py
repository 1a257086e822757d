"""A translation model as a PyTorch Lightning project writes it: a ``LightningModule`` (here its
API written out: ``training_step``, ``configure_optimizers`` with a per-step ``lr_scheduler``),
whose encoder and decoder layers are compiled with ``torch.jit.script`` for speed, and an adapter
written from docs/audit.md (issue 43, seventh round).

Its choices: each layer is a ``RecursiveScriptModule`` (no forward hooks: ``register_forward_hook``
raises on ScriptModules, and Python-level ``__torch_function__`` modes do not see inside them);
inside, ``nn.MultiheadAttention(batch_first=True)`` with a True-is-padding ``key_padding_mask`` and
a boolean causal ``attn_mask``, post-norm ``norm1(x + dropout1(sa(x)))``, ReLU FFN; interleaved
sinusoids added to embeddings scaled by sqrt(d_model) (in Python, before the scripted layers), one
embedding shared by both stacks and the output projection, no final norms.
``configure_optimizers``: Adam (0.9, 0.98, 1e-9) at lr 1.0 under ``LambdaLR`` with Eq. 3 as
``lambda step: rate(step + 1)`` and ``"interval": "step"`` (Lightning steps the scheduler after
each optimizer step, so update k runs at rate(k)); ``training_step``: ``F.cross_entropy(...,
ignore_index=pad, label_smoothing=0.1, reduction="sum")``. Faithful: every claim should pass.
"""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts

PAD, BOS, EOS = 0, 1, 2


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def sa(self, x: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
        return self.self_attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]

    def ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))

    def forward(self, x: Tensor, key_padding_mask: Optional[Tensor] = None) -> Tensor:
        x = self.norm1(x + self.dropout1(self.sa(x, key_padding_mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.dropout1 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout)

    def sa(self, x: Tensor) -> Tensor:
        n = x.size(1)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        return self.self_attn(x, x, x, attn_mask=future, need_weights=False)[0]

    def ca(self, x: Tensor, memory: Tensor, memory_key_padding_mask: Optional[Tensor]) -> Tensor:
        return self.cross_attn(x, memory, memory, key_padding_mask=memory_key_padding_mask, need_weights=False)[0]

    def ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))

    def forward(self, x: Tensor, memory: Tensor, memory_key_padding_mask: Optional[Tensor] = None) -> Tensor:
        x = self.norm1(x + self.dropout1(self.sa(x)))
        x = self.norm2(x + self.dropout2(self.ca(x, memory, memory_key_padding_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, d_model: int, nhead: int, d_ff: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.emb_dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(torch.jit.script(EncoderLayer(d_model, nhead, d_ff, dropout)) for _ in range(layers))
        self.decoder = nn.ModuleList(torch.jit.script(DecoderLayer(d_model, nhead, d_ff, dropout)) for _ in range(layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.emb_dropout(self.embedding(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        x, pad = self.embed(src), src.eq(PAD)
        for layer in self.encoder:
            x = layer(x, pad)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.embed(tgt)
        for layer in self.decoder:
            x = layer(x, memory, src.eq(PAD))
        return F.linear(x, self.embedding.weight)


def rate(step: int, d_model: int, warmup: int) -> float:
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class TranslationModule(nn.Module):
    """The ``pl.LightningModule`` of the project (Lightning's hooks written out)."""

    def __init__(self, vocab: int, d_model: int = 512, nhead: int = 8, d_ff: int = 2048, layers: int = 6,
                 dropout: float = 0.1, label_smoothing: float = 0.1, warmup: int = 4000) -> None:
        super().__init__()
        self.hparams = dict(d_model=d_model, dropout=dropout, label_smoothing=label_smoothing, warmup=warmup)
        self.model = Seq2Seq(vocab, d_model, nhead, d_ff, layers, dropout)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.model(src, tgt)

    def training_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> Tensor:
        src, tgt_in, tgt_out = batch
        logits = self(src, tgt_in)
        return criterion(logits.flatten(0, 1), tgt_out.flatten(), PAD, self.hparams["label_smoothing"])

    def configure_optimizers(self) -> dict:
        optimizer = make_optimizer(self.parameters())
        scheduler = make_scheduler(optimizer, self.hparams["d_model"], self.hparams["warmup"])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def make_optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)


def make_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: rate(step + 1, d_model, warmup))


def criterion(logits: Tensor, target: Tensor, pad: int, smoothing: float) -> Tensor:
    return F.cross_entropy(logits, target, ignore_index=pad, label_smoothing=smoothing, reduction="sum")


# -- the adapter ------------------------------------------------------------------------------

class LightningScriptedAdapter(Adapter):
    name = "LightningModule with torch.jit.script'ed layers (hand-written)"

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        # a bare scripted nn.MultiheadAttention breaks in torch's fused kernel under no_grad ("strides()
        # called on an undefined Tensor"); the project scripts whole layers, so its layer's ``sa`` is given.
        # Its cross-attention takes one memory for keys and values: no multi_head_cross_attention.
        layer = torch.jit.script(EncoderLayer(d_model, n_heads, 1, 0.0).eval())
        return lambda q, k, v: layer.sa(q, None)

    def feed_forward(self, d_model, d_ff):
        layer = torch.jit.script(EncoderLayer(d_model, 1, d_ff, 0.0).eval())
        return FeedForwardParts(layer.ff, layer.linear1.weight.T, layer.linear1.bias, layer.linear2.weight.T,
                                layer.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(torch.jit.script(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval()))

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(torch.jit.script(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval()))

    def _parts(self, module: TranslationModule, vocab: int, d_model: int) -> ModelParts:
        net = module.model
        scaled = lambda tokens: net.embedding(tokens) * math.sqrt(d_model)
        return ModelParts(
            forward=module, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=module,
            embed_source=scaled, embed_target=scaled, source_embedding=net.embedding.weight,
            target_embedding=net.embedding.weight, output_projection=net.embedding.weight,
            # ScriptModules take no hooks: what the first layer receives is what forward gives it, net.embed
            encoder_input=net.embed, decoder_input=net.embed, encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        module = TranslationModule(vocab_size, d_model, n_heads, d_ff, n_layers, dropout=0.0).eval()
        return self._parts(module, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        module = TranslationModule(vocab_size, d_model, n_heads, d_ff, n_layers, dropout=dropout).train()
        return self._parts(module, vocab_size, d_model)

    def optimizer(self, params):
        return make_optimizer(params)

    def learning_rate(self, step, d_model, warmup_steps):
        # Lightning: optimizer.step() then scheduler.step(), so update k runs at the lambda of k - 1
        return make_scheduler(make_optimizer([nn.Parameter(torch.zeros(1))]), d_model, warmup_steps).lr_lambdas[0](step - 1)

    def loss(self, logits, target, pad_id, smoothing):
        return criterion(logits, target, pad_id, smoothing)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "TranslationModule(label_smoothing=0.1)"),
                "warmup_steps": (4000, "TranslationModule(warmup=4000)"),
                "dropout_base": (0.1, "TranslationModule(dropout=0.1)")}


def _encoder_parts(layer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.sa(x, None), feed_forward=layer.ff,
                             norms=(layer.norm1, layer.norm2))


def _decoder_parts(layer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.sa,
                             cross_attention=lambda x, memory: layer.ca(x, memory, None), feed_forward=layer.ff,
                             norms=(layer.norm1, layer.norm2, layer.norm3))


def adapter() -> Adapter:
    return LightningScriptedAdapter()
