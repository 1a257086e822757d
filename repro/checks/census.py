"""What an implementation's model is made of, read off models built through its adapter.

Table 3 counts parameters per row, and Section 3 gives the base model's dimensions. For repro
those are read off its presets (:mod:`repro.model.presets`); for any other implementation the
rows are built through :meth:`Adapter.model` and measured:

* :func:`row_parameters`: the unique trainable parameters of ``ModelParts.module`` for a row of
  Table 3, built on the meta device when the implementation allows it (shapes, no memory),
  else on the CPU; cached per adapter, since a difference or a fit needs the same rows again.
* :func:`forward_dimensions` (another implementation's model) and :func:`job_dimensions` (the
  model one of repro's paper jobs builds): N (encoder and decoder), d_model, d_ff, h, d_k and d_v
  read off the matrix products of one forward pass (:mod:`repro.complexity.products`): an FFN is a
  product d_model -> d_ff followed by d_ff -> d_model; it runs on the source tokens in the
  encoder and on the target tokens in the decoder (different lengths tell them apart); an
  attention's scores are (batch * h, n_q, d_k) @ (batch * h, d_k, n_k). PyTorch's fused
  inference path of ``nn.TransformerEncoderLayer`` is switched off for the pass (it is one
  opaque kernel); the path traced is the one training takes.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any

import torch

from repro.claims.outcome import NotApplicable
from repro.complexity.products import Product, record_products
from repro.model import Transformer, TransformerConfig, count_parameters, get_preset
from repro.train.config import TrainConfig

_COUNTS: "weakref.WeakKeyDictionary[Any, dict[tuple[str, int], tuple[int, bool]]]" = weakref.WeakKeyDictionary()

#: Lengths of the traced forward pass: source and target differ, and neither is a head size.
BATCH, SOURCE_LENGTH, TARGET_LENGTH, TRACE_VOCAB = 2, 7, 5, 1000


def buildable(row: str) -> TransformerConfig:
    """The row's architecture, if :meth:`Adapter.model` can build it (it takes vocab_size,
    d_model, h, d_ff and N only, with d_k = d_v = d_model / h and sinusoids)."""
    cfg = get_preset(row).model
    if cfg.d_k * cfg.n_heads != cfg.d_model or cfg.d_v * cfg.n_heads != cfg.d_model:
        raise NotApplicable(
            f"row {row} sets d_k={cfg.d_k}, d_v={cfg.d_v} with h={cfg.n_heads}, d_model={cfg.d_model}; "
            "Adapter.model() builds d_k = d_v = d_model / h only"
        )
    if cfg.positional != "sinusoidal":
        raise NotApplicable(f"row {row} uses {cfg.positional} positions; Adapter.model() builds the implementation's own")
    return cfg


def _adapter_key(target: Any) -> Any:
    """The adapter under the protocol checks (``CheckedAdapter.adapter``), to cache by."""
    try:
        return getattr(target, "adapter", None)
    except AttributeError:
        return None


def row_parameters(target: Any, row: str, vocab_size: int, *, with_embeddings: bool = True) -> int:
    """Unique trainable parameters of ``row`` built through ``target.model`` at ``vocab_size``.

    ``with_embeddings``: the count is compared with the paper's, which includes the embeddings;
    an implementation that exposes none (``torch.nn.Transformer``) makes that not applicable.
    A difference between two rows of one d_model does not need them."""
    cfg = buildable(row)
    key = _adapter_key(target)
    cache = _COUNTS.setdefault(key, {}) if key is not None else {}
    if (row, vocab_size) not in cache:
        sizes = (vocab_size, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.n_layers)
        try:
            with torch.device("meta"):
                parts = target.model(*sizes)
        except Exception:  # noqa: BLE001 - not every implementation builds on the meta device
            parts = target.model(*sizes)
        if parts.module is None:
            raise NotApplicable(f"{target.name} gives no ModelParts.module whose parameters could be counted")
        embedded = any(t is not None for t in (parts.source_embedding, parts.target_embedding, parts.output_projection))
        cache[(row, vocab_size)] = (count_parameters(parts.module), embedded)
    count, embedded = cache[(row, vocab_size)]
    if with_embeddings and not embedded:
        raise NotApplicable(
            f"{target.name} exposes no embedding matrices (ModelParts.source_embedding, target_embedding, "
            "output_projection): the paper's counts include them"
        )
    return count


def _one(values: list[int]) -> int | list[int] | None:
    distinct = sorted(set(values))
    return None if not distinct else distinct[0] if len(distinct) == 1 else distinct


def _attention(products: list[Product], n_q: int, n_k: int) -> list[tuple[int, int, int]]:
    """(h, d_k, d_v) of each attention with n_q queries over n_k keys."""
    found = []
    scores = [p.shape for p in products if p.kind == "batched" and p.shape[1] == n_q and p.shape[3] == n_k and p.shape[2] != n_k]
    values = [p.shape for p in products if p.kind == "batched" and p.shape[1] == n_q and p.shape[2] == n_k]
    for s, v in zip(scores, values):
        found.append((s[0] // BATCH, s[2], v[3]))
    for p in products:
        if p.kind == "attention" and p.shape[2:4] == (n_q, n_k):
            batch, heads, _, _, d_k, d_v = p.shape
            found.append((heads * batch // BATCH, d_k, d_v))
    return found


def forward_dimensions(parts: Any) -> tuple[dict[str, Any], str]:
    """N_encoder, N_decoder, d_model, d_ff, h, d_k, d_v of ``parts`` (a ModelParts built at
    ``TRACE_VOCAB``), read off the products of one forward pass; and a line on what was seen."""
    return traced_dimensions(parts.forward, parts.d_model)


def job_dimensions(cfg: TrainConfig) -> tuple[dict[str, Any], str]:
    """The dimensions of the model a job's training loop builds (:func:`repro.train.loop.build`
    builds ``Transformer(cfg.model_config(vocab_size))``), read off one forward pass of it. Built
    and run on the meta device: the products' shapes need no memory (big is 213M parameters)."""
    with torch.device("meta"):
        model = Transformer(cfg.model_config(TRACE_VOCAB)).eval()
        return traced_dimensions(model, cfg.model_config(TRACE_VOCAB).d_model, device="meta")


def traced_dimensions(forward: Any, width: int, device: str = "cpu") -> tuple[dict[str, Any], str]:
    """The dimensions of the model whose teacher-forced call is ``forward(src, tgt_in)``, read
    off the matrix products of one call; ``width`` is only a fallback for d_model."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, TRACE_VOCAB, (BATCH, SOURCE_LENGTH), generator=gen).to(device)
    tgt = torch.randint(4, TRACE_VOCAB, (BATCH, TARGET_LENGTH), generator=gen).to(device)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # torch's fused inference kernels hide the products
    try:
        products = record_products(lambda: forward(src, tgt))
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    linear = [p.shape for p in products if p.kind == "linear"]
    to_vocab = [k for rows, k, out in linear if out == TRACE_VOCAB]
    d_model = _one(to_vocab) or width
    width = d_model if isinstance(d_model, int) else width
    ins = Counter((rows, out) for rows, k, out in linear if k == width and out not in (width, TRACE_VOCAB))
    outs = {(rows, k) for rows, k, out in linear if out == width and k != width}
    ffn = {key: n for key, n in ins.items() if key in outs}  # d_model -> X followed by X -> d_model
    d_ff = _one([x for _, x in ffn])
    n_encoder = sum(n for (rows, _), n in ffn.items() if rows == BATCH * SOURCE_LENGTH)
    n_decoder = sum(n for (rows, _), n in ffn.items() if rows == BATCH * TARGET_LENGTH)
    attention = _attention(products, SOURCE_LENGTH, SOURCE_LENGTH)
    measured = {
        "N_encoder": n_encoder,
        "N_decoder": n_decoder,
        "d_model": d_model,
        "d_ff": d_ff,
        "h": _one([a[0] for a in attention]),
        "d_k": _one([a[1] for a in attention]),
        "d_v": _one([a[2] for a in attention]),
    }
    cross = _attention(products, TARGET_LENGTH, SOURCE_LENGTH)
    seen = (f"{len(products)} products in one forward pass: {n_encoder} + {n_decoder} feed-forward layers, "
            f"{len(attention)} encoder self-attentions, {len(cross)} cross-attentions")
    return measured, seen
