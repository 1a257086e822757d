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
from dataclasses import dataclass
from typing import Any

import torch

from repro.claims.outcome import Inconclusive, NotApplicable
from repro.complexity.products import Product, record_products
from repro.model import Transformer, TransformerConfig, count_parameters, get_preset
from repro.train.config import TrainConfig

_COUNTS: "weakref.WeakKeyDictionary[Any, dict[tuple[str, int], tuple[int, bool]]]" = weakref.WeakKeyDictionary()

#: Lengths of the traced forward pass: source and target differ, and neither is a head size; each is
#: made LONGER in a pass of its own, to tell the products that follow it.
BATCH, SOURCE_LENGTH, TARGET_LENGTH, TRACE_VOCAB, LONGER = 2, 7, 5, 1000, 2


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


def _narrowing(p: Product, width: int) -> bool:
    """A product d_model -> fewer features over every row: a linear layer, or a batched product of
    batch 1 (``einsum("bnd,dk->bnk", x, W_i)`` runs as one)."""
    shape = p.shape if p.kind == "linear" else p.shape[1:] if p.kind == "batched" and p.shape[0] == 1 else None
    return shape is not None and shape[1] == width and shape[2] < width


def _attention(products: list[Product], n_q: int | None, n_k: int, width: int) -> list[tuple[int, int, int]]:
    """(h, d_k, d_v) of each attention with n_q queries (``None``: any number, as a decoder with
    several streams runs) over n_k keys. Heads computed one after another (one small projection per
    head, the paper's W_i^Q, W_i^K, W_i^V, each head's scores and values a product of its own) are
    one attention: consecutive heads of the same d_k and d_v with nothing between them but
    products d_model -> fewer features (the next head's projections) add up their h. An attention
    without scores that sums its keys' features times its values over the n_k positions (a
    kernelised attention, linear in n) is read off that product (h, the features, d_v), where no
    product of the pass forms scores (the relation terms of a relative attention sum over the
    positions too). Heads folded into the query rows, (B, h n_q, d_k) @ (B, d_k, n_k) (multi-query
    attention's one key head serving h query heads as one product), count h. A sliding-window
    attention, one product per query over its own window of keys (batch: BATCH x h x n_q), is read
    off its two products."""
    found: list[list[int]] = []

    def queries(rows: int) -> int:
        """Heads per query row block: 1 for n_q rows, m for m heads folded into the rows, 0 for neither."""
        if n_q is None or rows == n_q:
            return 1
        return rows // n_q if rows % n_q == 0 else 0

    # the open head's scores (a windowed attention's: window); whether the next head joins the last attention
    score, window, joined = None, None, False
    scored = any(p.kind == "attention" or (p.kind == "batched" and queries(p.shape[1]) and p.shape[3] == n_k)
                 for p in products)   # an attention with scores runs here: no product is read as a kernelised one
    for p in products:
        if p.kind == "batched" and queries(p.shape[1]) and p.shape[3] == n_k and p.shape[2] != n_k:
            score = p.shape
        elif p.kind == "batched" and queries(p.shape[1]) and p.shape[2] == n_k and score is not None \
                and p.shape[1] == score[1]:
            head = [score[0] // BATCH * queries(score[1]), score[2], p.shape[3]]
            if joined and found[-1][1:] == head[1:]:
                found[-1][0] += head[0]
            else:
                found.append(head)
            score, joined = None, True
        elif p.kind == "batched" and p.shape[2] == n_k and not queries(p.shape[1]) and not scored:
            # a kernelised attention (linear in n): phi(K)^T V, (B h, d_k, n_k) @ (B h, n_k, d_v), no scores
            found.append([p.shape[0] // BATCH, p.shape[1], p.shape[3]])
            joined = False
        elif window is not None and p.kind == "batched" and p.shape[:3] == (window[0], 1, window[3]):
            found.append([window[0] // (BATCH * n_q), window[2], p.shape[3]])
            window, joined = None, False
        elif p.kind == "batched" and p.shape[1] == 1 and n_q is not None and p.shape[0] % (BATCH * n_q) == 0:
            window = p.shape   # one query per product: its scores over its own window of keys
        elif p.kind == "attention" and queries(p.shape[2]) and p.shape[3] == n_k:
            batch, heads, _, _, d_k, d_v = p.shape
            found.append([heads * batch // BATCH, d_k, d_v])
            joined = False
        elif not _narrowing(p, width):
            joined = False
    return [tuple(a) for a in found]


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


def _trace(forward: Any, source_length: int, target_length: int, device: str, redraw: str = "") -> list[Product]:
    """The products of one call at these lengths; ``redraw`` ('source' or 'target'): that side's
    tokens drawn anew (the same lengths, so the same products, reached by other values)."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, TRACE_VOCAB, (BATCH, source_length), generator=gen)
    tgt = torch.randint(4, TRACE_VOCAB, (BATCH, target_length), generator=gen)
    if redraw:
        other = torch.randint(4, TRACE_VOCAB, (BATCH, source_length if redraw == "source" else target_length),
                              generator=gen)
        src, tgt = (other, tgt) if redraw == "source" else (src, other)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # torch's fused inference kernels hide the products
    try:
        return record_products(lambda: forward(src.to(device), tgt.to(device)), values=device != "meta")
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)


def _same_sequence(runs: dict[str, list[Product]]) -> None:
    """Inconclusive unless every run ran the same kinds of products in the same order."""
    sequences = {what: tuple(p.kind for p in run) for what, run in runs.items()}
    if len(set(sequences.values())) != 1:
        base = next(iter(sequences.values()))
        by_tokens = any(seq != base for what, seq in sequences.items() if what.startswith("with other"))
        raise Inconclusive(
            "not read: the forward pass runs " + ", ".join(f"{len(run)} matrix products {what}" for what, run in runs.items())
            + ": not one sequence of products, so the products cannot be told apart between the stacks (the census "
            "assumes one)" + ("; which products run depends on the tokens themselves, at the same lengths (tokens "
                              "routed to experts?)" if by_tokens else ""))


def _followers(forward: Any, device: str) -> tuple[list[Product], list[str]]:
    """The products of one pass, and which input each follows: ``target`` where it changes with the
    target alone (the decoder's), ``source`` where it changes with the source alone (the
    encoder's), ``both`` (the encoder-decoder attention, and the decoder's layers after it) or
    ``neither``. A product follows an input when its shape changes with that input's length, or
    (where the pass has values and repeats itself exactly) when its operand changes with that
    input's tokens at the same lengths: a stack that pads its input to a fixed length (a local
    attention's window) is still told by what reaches it."""
    s, t = SOURCE_LENGTH, TARGET_LENGTH
    runs = {f"at source/target lengths {s}/{t}": _trace(forward, s, t, device),
            f"at {s}/{t + LONGER}": _trace(forward, s, t + LONGER, device),
            f"at {s + LONGER}/{t}": _trace(forward, s + LONGER, t, device)}
    base, longer_target, longer_source = runs.values()
    if device != "meta":
        runs.update({"again": _trace(forward, s, t, device), "with other target tokens": _trace(forward, s, t, device, "target"),
                     "with other source tokens": _trace(forward, s, t, device, "source")})
    _same_sequence(runs)
    repeated = device != "meta" and all(a.operand == b.operand for a, b in zip(base, runs["again"]))
    follows = []
    for i, p in enumerate(base):
        by_target, by_source = p.shape != longer_target[i].shape, p.shape != longer_source[i].shape
        if repeated:
            by_target |= p.operand != runs["with other target tokens"][i].operand
            by_source |= p.operand != runs["with other source tokens"][i].operand
        follows.append({(True, False): "target", (False, True): "source", (True, True): "both"}.get(
            (by_target, by_source), "neither"))
    return base, follows


@dataclass(frozen=True)
class FeedForward:
    """One feed-forward layer as it ran: ``parts``, (rows, X, input projections) of each product
    X -> d_model it ran, one for a plain layer, several where its tokens ran in groups (experts,
    global tokens apart from local ones); ``follows``, which input reaches it (:func:`_followers`)."""

    parts: tuple[tuple[int, int, int], ...]
    follows: str


def _feed_forward_layers(products: list[Product], follows: list[str], width: int, vocab: int) -> list[FeedForward]:
    """The feed-forward layers of a pass: a product X -> d_model (X neither d_model nor the
    vocabulary) preceded, since the last such product, by one or more products d_model -> X over
    the same rows (two for a gated layer, as GLU variants run it); products of that kind that run
    one after another with nothing else between them (no attention, no d_model -> d_model
    projection) are one layer whose tokens ran in groups. A product d_model -> X followed by an
    attention product is a projection of that attention, never a feed-forward layer's input."""
    layers: list[list[tuple[int, int, int]]] = []
    reached: list[set[str]] = []
    inputs: Counter = Counter()
    joined = False  # nothing but feed-forward products since the last layer's output
    for p, f in zip(products, follows):
        rows, k, out = p.shape if p.kind == "linear" else (0, 0, 0)
        if p.kind == "linear" and k == width and out not in (width, vocab):
            inputs[(rows, out)] += 1
        elif p.kind == "linear" and out == width and k not in (width, vocab) and inputs[(rows, k)]:
            if not joined:
                layers.append([])
                reached.append(set())
            layers[-1].append((rows, k, inputs[(rows, k)]))
            reached[-1].add(f)
            inputs.clear()
            joined = True
        else:
            joined = False
            if p.kind != "linear":
                # an attention's products: what was projected to X before it were its queries, keys and
                # values, so X -> d_model after it is its output projection (Keras' heads of key_dim =
                # d_model run h x d_model wide), not a feed-forward layer
                inputs.clear()
    return [FeedForward(tuple(parts), "target" if "target" in f else "both" if "both" in f else
                        "source" if "source" in f else "neither") for parts, f in zip(layers, reached)]


def _stream_width(products: list[Product], follows: list[str], d_model: Any, width: int,
                  notes: list[str]) -> tuple[Any, int, list[FeedForward]]:
    """Where no feed-forward layer runs at the width the logits are projected from, that width is
    not the residual stream's: the output projection is factorised (ALBERT's tied vocab x E
    embedding after a d_model -> E product). d_model is then the width the most products read, if
    feed-forward layers run at it (said so in ``notes``); else the first reading stands."""
    widths = Counter(p.shape[1] for p in products if p.kind == "linear" and p.shape[2] != TRACE_VOCAB)
    if not widths:
        return d_model, width, []
    stream = widths.most_common(1)[0][0]
    layers = _feed_forward_layers(products, follows, stream, TRACE_VOCAB) if stream != width else []
    if not layers:
        return d_model, width, []
    notes.append(f"d_model read as {stream}, the width most products read: the logits are projected from "
                 f"{d_model} features, a factorised output projection")
    return stream, stream, layers


def traced_dimensions(forward: Any, width: int, device: str = "cpu") -> tuple[dict[str, Any], str]:
    """The dimensions of the model whose teacher-forced call is ``forward(src, tgt_in)``, read
    off the matrix products of its forward pass; ``width`` is only a fallback for d_model.

    What it assumes, and checks: the pass runs one sequence of products, and each stack's products
    follow that stack's input (:func:`_followers`: the encoder's the source, the decoder's the
    target, however many streams or rows per token it carries); a feed-forward layer is one
    product X -> d_model after one or more d_model -> X over the same rows (a gated layer has two;
    several such products in a row with nothing between them are one layer whose tokens ran in
    groups: experts, global and local tokens); a self-attention has n_q = n_k = its stack's length (the encoder's read, else the decoder's). Where one does not
    hold the dimension is not read, and :class:`Inconclusive` says what was seen instead of a number."""
    products, follows = _followers(forward, device)
    stacks = {"encoder": ("source",), "decoder": ("target", "both")}
    to_vocab = [p.shape[1] for p in products if p.kind == "linear" and p.shape[2] == TRACE_VOCAB]
    d_model = _one(to_vocab) or width
    width = d_model if isinstance(d_model, int) else width
    layers = _feed_forward_layers(products, follows, width, TRACE_VOCAB)
    unread, notes = {}, []
    if not layers:
        d_model, width, layers = _stream_width(products, follows, d_model, width, notes)
    gated = sum(1 for layer in layers if any(inputs > 1 for *_, inputs in layer.parts))
    grouped = sum(1 for layer in layers if len(layer.parts) > 1)
    counts = {}
    for key, stack, length in (("N_encoder", "encoder", SOURCE_LENGTH), ("N_decoder", "decoder", TARGET_LENGTH)):
        mine = [layer for layer in layers if layer.follows in stacks[stack]]
        counts[key] = len(mine)
        rows = sorted({layer.parts[0][0] for layer in mine if len(layer.parts) == 1})
        reach = "the source reaches and the target does not" if stack == "encoder" else "the target reaches"
        if not counts[key]:
            unread[key] = (f"no feed-forward layer (d_model -> X -> d_model) among the products {reach}; the {stack} "
                           "could not be read")
        for r in rows:
            if r != BATCH * length:
                notes.append(f"the {stack}'s feed-forward layers run on {r} rows for {BATCH} x {length} tokens"
                             + (f" ({r // (BATCH * length)} streams in one tensor)" if r % (BATCH * length) == 0
                                else " (its input padded to a fixed length)"))
    stray = sum(1 for layer in layers if layer.follows == "neither")
    if stray:
        notes.append(f"{stray} feed-forward layer(s) that neither input reaches, counted in neither stack")
    if grouped:
        notes.append(f"{grouped} feed-forward layers ran their tokens in groups, several products X -> d_model in a row "
                     "with nothing between them (experts, or global tokens apart from local ones), each counted once")
    attention = _attention([p for p, f in zip(products, follows) if f in stacks["encoder"]], SOURCE_LENGTH, SOURCE_LENGTH,
                           width)
    if not attention:
        attention = _attention([p for p, f in zip(products, follows) if f in stacks["decoder"]], TARGET_LENGTH,
                               TARGET_LENGTH, width)
        if attention:
            notes.append(f"h, d_k, d_v read off the decoder's self-attention (no attention over {SOURCE_LENGTH} "
                         f"queries and {SOURCE_LENGTH} keys in the encoder)")
    cross = _attention([p for p, f in zip(products, follows) if f in stacks["decoder"]], None, SOURCE_LENGTH, width)
    selves = len(attention)
    if not attention:
        # a self-attention without queries and keys (a Synthesizer's weights from each position alone): the
        # heads are read off the attention across stacks, which has them
        attention = cross
        if attention:
            notes.append(f"h, d_k, d_v read off the cross-attentions (no self-attention with scores over as many "
                         f"queries and keys as its stack's length, {SOURCE_LENGTH} or {TARGET_LENGTH})")
        else:
            unread["h, d_k, d_v"] = ("no self-attention over as many queries and keys as its stack's length (the "
                                     f"encoder's {SOURCE_LENGTH}, the decoder's {TARGET_LENGTH}), nor a "
                                     "cross-attention; the heads could not be read")
    measured = {
        **counts,
        "d_model": d_model,
        "d_ff": _one([x for layer in layers for _, x, _ in layer.parts]),
        "h": _one([a[0] for a in attention]),
        "d_k": _one([a[1] for a in attention]),
        "d_v": _one([a[2] for a in attention]),
    }
    if gated:
        notes.append(f"{gated} feed-forward layers gated (more than one d_model -> X product each), each counted once")
    seen = (f"{len(products)} products in one forward pass: {counts['N_encoder']} + {counts['N_decoder']} feed-forward "
            f"layers, {selves} self-attentions read, {len(cross)} cross-attentions" + "".join(f"; {n}" for n in notes))
    if unread:
        read = ", ".join(f"{k}={v}" for k, v in measured.items() if k not in unread and v is not None)
        raise Inconclusive("not read: " + "; ".join(f"{k}: {why}" for k, why in unread.items())
                           + f" (read: {read}; {seen})")
    return measured, seen
