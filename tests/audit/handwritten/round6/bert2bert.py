"""A Hugging Face-style ``EncoderDecoderModel`` built from BERT blocks ("bert2bert", Rothe et al.
2020), written out as ``modeling_bert.py`` writes it, and an adapter written from docs/audit.md
(issue 43, sixth round).

BERT's choices, each marked where the paper differs: ``BertEmbeddings`` adds *learned* absolute
positions (and a token-type row) to unscaled word embeddings and puts a LayerNorm (eps 1e-12) and
dropout on the sum; ``BertSelfAttention`` (query/key/value, scaled by sqrt(head size)) with the
extended attention mask, an additive float of ``torch.finfo.min`` at masked keys; post-norm
``BertSelfOutput``/``BertOutput``: LayerNorm(dropout(dense(h)) + input), eps 1e-12; GELU in
``BertIntermediate``; the decoder's layers add a cross-attention (``add_cross_attention``); two
BERTs, so two word embeddings (``tie_encoder_decoder=False``); the decoder's ``BertLMHeadModel``
head transforms (dense, GELU, LayerNorm) before its projection, which is tied to the decoder's
word embedding and has a bias of its own. Trained with the Hugging Face Trainer's defaults.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo import hf_trainer
from repro.audit.zoo.stack_input import first_layer_input

PAD, CLS, SEP, UNK = 0, 1, 2, 3   # [PAD] [CLS] [SEP] [UNK]: the decoder starts from [CLS], ends at [SEP]
EPS = 1e-12


class Config:
    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2, is_decoder=False, add_cross_attention=False) -> None:
        self.__dict__.update(locals())
        del self.__dict__["self"]


def extended_attention_mask(keep: Tensor, dtype=torch.float32) -> Tensor:
    """``ModuleUtilsMixin.get_extended_attention_mask``: 1 = keep becomes 0, 0 becomes finfo.min."""
    return (1.0 - keep.to(dtype)) * torch.finfo(dtype).min


class BertEmbeddings(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=EPS)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids: Tensor) -> Tensor:
        n = input_ids.size(1)
        token_type = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type)
        x = x + self.position_embeddings(self.position_ids[:, :n])
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = config.hidden_size
        self.query, self.key, self.value = (nn.Linear(config.hidden_size, self.all_head_size) for _ in range(3))
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x: Tensor) -> Tensor:
        return x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)).permute(0, 2, 1, 3)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None,
                encoder_hidden_states: Tensor | None = None) -> Tensor:
        kv = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        q = self.transpose_for_scores(self.query(hidden_states))
        k, v = self.transpose_for_scores(self.key(kv)), self.transpose_for_scores(self.value(kv))
        context = eager_attention(q, k, v, attention_mask, self.dropout)
        context = context.permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.all_head_size,))


def eager_attention(q: Tensor, k: Tensor, v: Tensor, attention_mask: Tensor | None, dropout=None) -> Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = F.softmax(scores, dim=-1)
    if dropout is not None:
        probs = dropout(probs)
    return torch.matmul(probs, v)


class BertSelfOutput(nn.Module):
    """dense, dropout, then LayerNorm(h + input): the residual and the norm."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=EPS)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: Tensor, input_tensor: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.self, self.output = BertSelfAttention(config), BertSelfOutput(config)

    def sublayer(self, hidden_states, attention_mask=None, encoder_hidden_states=None) -> Tensor:
        """The attention and its output projection, without the residual and the norm."""
        return self.output.dense(self.self(hidden_states, attention_mask, encoder_hidden_states))

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None) -> Tensor:
        return self.output(self.self(hidden_states, attention_mask, encoder_hidden_states), hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.dense(x))


class BertOutput(BertSelfOutput):
    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)


class BertLayer(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.crossattention = BertAttention(config) if config.add_cross_attention else None
        self.intermediate, self.output = BertIntermediate(config), BertOutput(config)

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.output.dense(self.intermediate(x))

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None):
        x = self.attention(hidden_states, attention_mask)
        if self.crossattention is not None and encoder_hidden_states is not None:
            x = self.crossattention(x, encoder_attention_mask, encoder_hidden_states)
        return self.output(self.intermediate(x), x)


class BertModel(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, input_ids, encoder_hidden_states=None, encoder_attention_mask=None):
        n = input_ids.size(1)
        keep = input_ids.ne(PAD)[:, None, None, :]
        if self.config.is_decoder:   # the causal mask, combined with the padding one
            keep = keep & torch.ones(n, n, dtype=torch.bool, device=input_ids.device).tril()
        x = self.embeddings(input_ids)
        for layer in self.layer:
            x = layer(x, extended_attention_mask(keep), encoder_hidden_states, encoder_attention_mask)
        return x


class BertLMPredictionHead(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=EPS)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.LayerNorm(F.gelu(self.dense(x))))


class EncoderDecoderModel(nn.Module):
    def __init__(self, encoder_config: Config, decoder_config: Config) -> None:
        super().__init__()
        self.encoder, self.decoder = BertModel(encoder_config), BertModel(decoder_config)
        self.lm_head = BertLMPredictionHead(decoder_config)
        self.lm_head.decoder.weight = self.decoder.embeddings.word_embeddings.weight   # tie_word_embeddings
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def forward(self, input_ids: Tensor, decoder_input_ids: Tensor) -> Tensor:
        memory = self.encoder(input_ids)
        keep = extended_attention_mask(input_ids.ne(PAD)[:, None, None, :])
        return self.lm_head(self.decoder(decoder_input_ids, memory, keep))


def configs(vocab: int, d_model: int, heads: int, d_ff: int, n: int, dropout: float) -> tuple[Config, Config]:
    kw = dict(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=n, num_attention_heads=heads,
              intermediate_size=d_ff, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return Config(**kw), Config(**kw, is_decoder=True, add_cross_attention=True)


# -- the adapter ------------------------------------------------------------------------------

class Bert2BertAdapter(Adapter):
    name = "bert2bert EncoderDecoderModel (hand-written, Hugging Face style)"

    def attention(self, query, key, value, mask):
        return eager_attention(query, key, value, None if mask is None else extended_attention_mask(mask))

    def multi_head_attention(self, d_model, n_heads):
        attention = BertAttention(configs(8, d_model, n_heads, 4, 1, 0.0)[0]).eval()

        def call(q, k, v):
            if not torch.equal(k, v):
                raise ValueError("BertSelfAttention projects keys and values from one tensor")
            return attention.sublayer(q, None, None if torch.equal(k, q) else k)
        return call

    def feed_forward(self, d_model, d_ff):
        layer = BertLayer(configs(8, d_model, 1, d_ff, 1, 0.0)[0]).eval()
        return FeedForwardParts(layer.feed_forward, layer.intermediate.dense.weight.T, layer.intermediate.dense.bias,
                                layer.output.dense.weight.T, layer.output.dense.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "BERT learns its absolute positions (position_embeddings, one per stack)")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(BertLayer(configs(8, d_model, n_heads, d_ff, 1, 0.0)[0]).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(BertLayer(configs(8, d_model, n_heads, d_ff, 1, 0.0)[1]).eval())

    def _parts(self, net: EncoderDecoderModel, vocab: int, d_model: int) -> ModelParts:
        enc, dec = net.encoder.embeddings, net.decoder.embeddings

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=CLS, eos_id=SEP, module=net,
            embed_source=enc.word_embeddings, embed_target=dec.word_embeddings,
            source_embedding=enc.word_embeddings.weight, target_embedding=dec.word_embeddings.weight,
            output_projection=net.lm_head.decoder.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encoder(src), net.encoder.layer),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder.layer),
            encode=net.encoder,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder.layer],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder.layer],
            encoder_positions=lambda n: enc.position_embeddings.weight[:n],
            decoder_positions=lambda n: dec.position_embeddings.weight[:n],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        net = EncoderDecoderModel(*configs(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0)).eval()
        return self._parts(net, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = EncoderDecoderModel(*configs(vocab_size, d_model, n_heads, d_ff, n_layers, dropout)).train()
        return self._parts(net, vocab_size, d_model)

    def optimizer(self, params):
        return hf_trainer.optimizer(params)

    def learning_rate(self, step, d_model, warmup_steps):
        return hf_trainer.learning_rate(step, d_model, warmup_steps)

    def loss(self, logits, target, pad_id, smoothing):
        return hf_trainer.loss(logits, target, pad_id, smoothing)

    def hyperparameters(self):
        return {**hf_trainer.hyperparameters(), "dropout_base": (0.1, "BertConfig.hidden_dropout_prob")}


def _encoder_parts(layer: BertLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: layer(x), self_attention=lambda x: layer.attention.sublayer(x),
                             feed_forward=layer.feed_forward,
                             norms=(layer.attention.output.LayerNorm, layer.output.LayerNorm))


def _decoder_parts(layer: BertLayer) -> DecoderLayerParts:
    def causal(x):
        n = x.size(1)
        return extended_attention_mask(torch.ones(n, n, dtype=torch.bool, device=x.device).tril())
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, causal(x), memory),
        self_attention=lambda x: layer.attention.sublayer(x, causal(x)),
        cross_attention=lambda x, memory: layer.crossattention.sublayer(x, None, memory),
        feed_forward=layer.feed_forward,
        norms=(layer.attention.output.LayerNorm, layer.crossattention.output.LayerNorm, layer.output.LayerNorm))


def adapter() -> Adapter:
    return Bert2BertAdapter()
