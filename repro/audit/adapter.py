"""The adapter protocol: what an implementation exposes so the paper's claims can be checked.

Subclass :class:`Adapter` and override the methods for the parts your implementation has.
Every method is optional: one left as is raises :class:`~repro.checks.registry.NotApplicable`,
and each claim needing it is reported "not applicable", never passed. The same holds for the
optional fields of what a method returns: a ``None`` in :class:`ModelParts` (no embedding
matrix, no ``module``) makes the claims that need that part not applicable.

**Absent is not "not exposed".** A part the implementation does not *have* at all (T5 adds no
positional encoding to its embeddings; BART learns its positions instead of the sinusoids; a
feed-forward layer without biases) is a departure from the paper, and saying so fails the
claims that need it, with the reason "absent": raise ``self.absent(part, why)`` from the
method (:meth:`Adapter.absent`), give :func:`absent` (``absent(why)``) for an optional callable
of :class:`ModelParts`, or ``None`` for a bias of :class:`FeedForwardParts`. Leaving a method
out stays "not applicable": the adapter does not show the part, which says nothing about it.

Conventions (every check relies on them; ``repro audit`` enforces the checkable ones through
:mod:`repro.audit.contract`, and a violation is an error naming the method and what it gave):

* Tensors are float32 on the CPU, batch first. Modules are returned in ``eval()`` mode with
  dropout off, except by :meth:`Adapter.training_model`. Return values are checked for shape
  and kind as they are returned. Under ``--device`` (:mod:`repro.audit.on_device`) the adapter's
  methods are called under torch's default-device context, so what they build is born on the
  device; write them as for the CPU, with no device of their own, and make any tensor a call
  needs on its inputs' device (``torch.zeros(n, device=x.device)``).
* **Attention masks** are boolean, ``True`` where attention is allowed, and broadcast against
  the scores (batch, heads, n_q, n_k). The checks pass key-padding masks of shape
  (batch, 1, 1, n_k) that keep at least one key per row, or ``None``.
* **Attention functions** (``attention``, ``attention_paths``) compute Eq. 1 as the
  implementation runs it, without any additive position bias it adds to the scores (T5's
  relative bias): that bias is the model's, declared in ``ModelParts.encoder_attention_bias``
  and ``decoder_attention_bias``. When the masks you pass on are not boolean in the library's
  convention (Hugging Face's eager attention *adds* its mask to the scores), convert them: the
  contract compares every masked call with the other conventions and names the mistake ("adds
  the mask to the scores instead of masking", "reads True in the mask as 'masked'").
* **multi_head_attention** returns a module that the checks call as self-attention,
  ``module(x, x, x)``: query = key = value, each (batch, n, d_model), and only so (a module
  called otherwise may refuse). Its FLOPs are counted on that call; the fused kernels of
  ``F.scaled_dot_product_attention`` and of ``nn.MultiheadAttention``'s fast path are counted
  analytically, and a kernel the counter cannot see into (no FLOPs quadratic in n) makes the
  cost claim an error, not a pass. Keys and values apart are asked for only through
  :meth:`Adapter.multi_head_cross_attention`, which an implementation whose attention takes one
  tensor for keys and values (Hugging Face's) leaves out.
* **positional_encoding(length, d_model)** is what is added to the embeddings of the tokens
  at sequence positions 0 .. length-1 (row p for the p-th token, including any offset the
  implementation starts from, e.g. fairseq's ``padding_idx + 1``). Any fixed order of the
  dimensions is accepted by the wavelength and relative-position claims (they find the
  sine/cosine pairs); the order itself is ``sec3.pe.layout``'s fact. A table that belongs to
  one built model (a learned table, one per stack as in BART) is not the adapter's: give it as
  ``ModelParts.encoder_positions`` / ``decoder_positions`` and raise ``self.absent(...)`` from
  ``positional_encoding`` when the implementation has no sinusoids.
* **Layer parts** (``encoder_layer``, ``decoder_layer``, ``ModelParts.*_layers``) give the
  sub-layer functions without residual or norm, and the norms in the order the layer applies
  them, wherever it applies them: the checks that need to know where the norms sit (post-norm,
  LayerNorm(x + Sublayer(x)), or pre-norm, x + Sublayer(LayerNorm(x))) measure it on the layer
  (:mod:`repro.checks.placement`); nothing needs declaring. One norm per sub-layer: a norm on a
  sub-layer's output before its residual sum (sandwich norms, x + Norm'(Sublayer(Norm(x)))) is
  part of the sub-layer function. A layer that runs several streams in one tensor (a main
  stream and n-gram predict streams) takes and gives the main stream (batch, n, d_model); its
  norms may see every stream, and the checks follow the layer's own rows among theirs.
* **Token ids**: the checks feed ids in [4, vocab_size); the ids 0-3 (:data:`RESERVED_IDS`)
  are left to special tokens (padding, begin, end, unknown), so ``ModelParts.pad_id`` must be
  one of them. ``forward(src, tgt_in)`` is the teacher-forced training call: ``tgt_in`` is the
  decoder's input (shifted right), and the implementation builds whatever masks it builds
  when called that way in training.
* **Table 3 and the base dimensions** of an implementation other than repro are measured by
  building each row through :meth:`Adapter.model` (``vocab_size=37000`` for the counts) and
  counting the unique trainable parameters of ``ModelParts.module`` (built on the meta device
  when the implementation allows it); rows that set d_k apart from d_model / h (row B) cannot
  be built through ``model()`` and are not applicable.
* **learning_rate(step, ...)** is the rate of the step-th optimizer update, counted from 1
  (Eq. 3's step_num). An implementation that steps its scheduler after the optimizer (the
  Hugging Face Trainer, ``LambdaLR``) runs update k at the scheduler's value for k - 1: report
  that, and the check shows the departure (first update at rate 0, peak at warmup + 1).
* **loss** is summed over the non-padding tokens (``reduction="sum"``), not averaged; the
  contract calls it a second time on the batch given twice and refuses a mean.
* **hyperparameters()** maps the claims' keys (:data:`HYPERPARAMETER_KEYS`) to the values the
  implementation uses *by default* (or in its documented recipe), each a number, bool or word,
  bare or as ``(value, where)`` with ``where`` saying where it was read. Numbers are numbers,
  not text ("0.1" is refused); a setting the implementation lacks is left out, never ``None``.
* The claims come from ``$REPRO_CLAIMS_DIR`` when set, else the ``claims/`` folder of the
  checkout, else the copy shipped inside the package (``--claims-dir`` overrides).

Methods added after the first version of the protocol (``attention_paths``, ``model_paths``,
``decoder_layer``, ``training_model``, ``update_rates``, ``search``, ``beam_search``,
``average_last``, ``checkpoint_steps``, ``multi_head_cross_attention``, ``loss_paths``) and the optional fields
of :class:`ModelParts` after ``module`` are optional like the rest: an adapter written before
them runs unchanged, and the claims needing them read "not applicable" (``attention_paths`` and
``model_paths`` default to ``attention`` and ``model``, ``loss_paths`` to ``loss``). :meth:`Adapter.absent` and
:func:`absent` are additions an older adapter never calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from repro.claims.outcome import Absent, NotApplicable


class AbsentPart:
    """An optional callable of :class:`ModelParts` the implementation does not have (see
    :func:`absent`): calling it raises :class:`~repro.claims.outcome.Absent`, so a claim that
    needs the part fails with the reason, where ``None`` (not exposed) would make it not applicable."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise Absent(self.why)

    def __repr__(self) -> str:
        return f"absent({self.why!r})"


def absent(why: str) -> AbsentPart:
    """Mark an optional callable of :class:`ModelParts` as absent from the implementation, e.g.
    ``encoder_positions=absent("T5 adds no positional encoding to its embeddings")``."""
    return AbsentPart(why)


@dataclass
class FeedForwardParts:
    """A position-wise FFN (Eq. 2) and its weights in the paper's orientation:
    ``w_1`` is d_model x d_ff (so the hidden layer is x @ w_1 + b_1), ``w_2`` is d_ff x d_model.
    A bias the implementation does not have (T5's feed-forward layers have none) is ``None``:
    absent, a departure from Eq. 2 that the check reports (never pass zeros for it)."""

    module: Callable[[Tensor], Tensor]
    w_1: Tensor
    b_1: Tensor | None
    w_2: Tensor
    b_2: Tensor | None


@dataclass
class EncoderLayerParts:
    """One encoder layer and its pieces: the whole layer, its two sub-layer functions (without
    residual or norm), and its two layer normalisations, in the order they are applied (``()``
    for a layer that has none, as ReZero's: the norm claims then fail as absent)."""

    layer: Callable[[Tensor], Tensor]
    self_attention: Callable[[Tensor], Tensor]
    feed_forward: Callable[[Tensor], Tensor]
    norms: tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]


@dataclass
class DecoderLayerParts:
    """One decoder layer and its pieces: the whole layer called as ``layer(x, memory)`` (causal
    self-attention over ``x``, attention over the encoder output ``memory``), its three sub-layer
    functions without residual or norm: ``self_attention(x)`` (masked so that position i sees
    positions <= i), ``cross_attention(x, memory)`` (queries from ``x``, keys and values from
    ``memory``), ``feed_forward(x)``; and its three layer normalisations, in the order applied
    (``()`` for a layer that has none)."""

    layer: Callable[[Tensor, Tensor], Tensor]
    self_attention: Callable[[Tensor], Tensor]
    cross_attention: Callable[[Tensor, Tensor], Tensor]
    feed_forward: Callable[[Tensor], Tensor]
    norms: tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]


@dataclass
class ModelParts:
    """A whole encoder-decoder built at a given size.

    ``forward(src, tgt_in)`` maps token ids (batch, n) and (batch, m) to logits (batch, m, vocab),
    called as in teacher-forced training (``tgt_in`` is the decoder's input, shifted right; the
    checks use ids >= 4 and ``pad_id`` must be one of the reserved ids 0-3).
    ``embed_source(tokens)`` returns what the encoder stack receives before positional encoding
    is added (the scaled embedding: where the stack scales, as Pegasus's does, not the bare
    embedding module; the scale claim reads what the stack receives where ``encoder_input`` is
    given, and says when ``embed_source`` disagrees); the weight tensors are the raw parameter matrices, each
    vocab x d_model (the output projection too), or ``None`` where the implementation has none.

    Optional, for the claims that follow the data through the stacks (``None`` where absent):
    ``embed_target(tokens)`` the scaled target embedding; ``encoder_input(src)`` and
    ``decoder_input(tgt_in)`` what the first encoder / decoder layer receives (embedding plus
    positional encoding, after the embedding dropout in train mode); ``encode(src)`` the encoder
    stack's output; ``encoder_layers`` / ``decoder_layers`` the parts of each layer, in order;
    ``incremental(src, tgt_in, chunks)`` the logits of ``forward(src, tgt_in)`` computed by the
    implementation's incremental decoder, feeding ``tgt_in`` through its cache in chunks of the
    given sizes (one position at a time, or several at once).
    ``module`` is the ``nn.Module`` holding every parameter; Table 3's counts count its unique
    trainable parameters (``None``: not applicable).

    The model's own positions (``None``: not exposed; :func:`absent`: the model has none):
    ``encoder_positions(length)`` / ``decoder_positions(length)`` the (length, d_model) table
    that stack adds to its embeddings at positions 0 .. length-1, when the table belongs to the
    built model (a learned table, one per stack) rather than to :meth:`Adapter.positional_encoding`;
    fewer rows where the model has fewer positions (a learned table of ``max_position_embeddings``
    rows): the checks read the rows given and say so;
    ``encoder_attention_bias(n)`` / ``decoder_attention_bias(n)`` the additive bias (heads, n, n)
    that stack's self-attention adds to its scores over n positions (T5's relative position
    bias; the decoder's causal mask apart), where the implementation puts position there.
    """

    forward: Callable[[Tensor, Tensor], Tensor]
    vocab_size: int
    d_model: int
    pad_id: int = 0
    embed_source: Callable[[Tensor], Tensor] | None = None
    source_embedding: Tensor | None = None
    target_embedding: Tensor | None = None
    output_projection: Tensor | None = None
    module: torch.nn.Module | None = None
    embed_target: Callable[[Tensor], Tensor] | None = None
    encoder_input: Callable[[Tensor], Tensor] | None = None
    decoder_input: Callable[[Tensor], Tensor] | None = None
    encode: Callable[[Tensor], Tensor] | None = None
    encoder_layers: Sequence[EncoderLayerParts] | None = None
    decoder_layers: Sequence[DecoderLayerParts] | None = None
    incremental: Callable[[Tensor, Tensor, Sequence[int]], Tensor] | None = None
    encoder_positions: Callable[[int], Tensor] | None = None
    decoder_positions: Callable[[int], Tensor] | None = None
    encoder_attention_bias: Callable[[int], Tensor] | None = None
    decoder_attention_bias: Callable[[int], Tensor] | None = None
    #: The decoder's start token and the end-of-sentence token of the built model (what its search
    #: starts from and stops at); ``None``: the protocol's own, 1 and 2 (:data:`BOS_ID`, :data:`EOS_ID`).
    bos_id: int | None = None
    eos_id: int | None = None

    def special_ids(self) -> tuple[int, int, str]:
        """(start id, end id, where they come from): the model's own where it reports them."""
        reported = self.bos_id is not None and self.eos_id is not None
        bos = self.bos_id if self.bos_id is not None else BOS_ID
        eos = self.eos_id if self.eos_id is not None else EOS_ID
        return bos, eos, ("the model's own (ModelParts.bos_id, eos_id)" if reported
                          else "the protocol's (the model reports no ModelParts.bos_id / eos_id)")


#: The start and end ids the protocol assumes where a model reports none (``ModelParts.bos_id`` /
#: ``eos_id``), and the ids :meth:`Adapter.search`'s scripted models use.
BOS_ID, EOS_ID = 1, 2

#: ``next_log_probs(prefix)``: log-probabilities (vocab,) of the next token after ``prefix`` (the
#: tokens so far, without BOS), for :meth:`Adapter.search`.
NextLogProbs = Callable[[tuple[int, ...]], Tensor]


class Adapter:
    """Base class: override what your implementation provides."""

    name = "unnamed implementation"
    #: True only for repro's own model, whose presets (Table 3's rows) some claims count on.
    has_repro_presets = False

    def _missing(self, part: str) -> NotApplicable:
        return NotApplicable(f"{self.name} does not expose {part} (adapter method '{part}')")

    def absent(self, part: str, why: str) -> Absent:
        """The exception to raise from a method whose part the implementation does not have:
        ``raise self.absent("positional_encoding", "T5 adds no positional encoding")``. The claims
        needing the part fail with this reason (a departure), unlike a method left out."""
        return Absent(f"{self.name} has no {part}: {why}")

    # -- Section 3.2 ------------------------------------------------------------------------
    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        """Scaled dot-product attention (Eq. 1). ``query`` (batch, heads, n_q, d_k), ``key``
        (batch, heads, n_k, d_k), ``value`` (batch, heads, n_k, d_v); ``mask`` boolean, True =
        attend, broadcast against (batch, heads, n_q, n_k) (the checks give (batch, 1, 1, n_k))
        or None. Returns (batch, heads, n_q, d_v)."""
        raise self._missing("attention")

    def attention_paths(self) -> dict[str, Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]]:
        """Every attention function the implementation's model can run (e.g. a reference path and
        a fused kernel), each called as :meth:`attention` is. Default: :meth:`attention` alone."""
        return {"attention": self.attention}

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """A multi-head attention module with h heads of d_model/h each. The checks call it as
        self-attention, ``module(x, x, x)`` with query = key = value of shape (batch, n, d_model),
        and expect (batch, n, d_model) back."""
        raise self._missing("multi_head_attention")

    def multi_head_cross_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """A multi-head attention module (h heads of d_model/h) called with keys and values
        apart, ``module(query, key, value)``: query (batch, n_q, d_model), key and value
        (batch, n_k, d_model), different tensors; returns (batch, n_q, d_model). Leave it out when
        the implementation's attention takes one tensor for keys and values (Hugging Face's
        ``key_value_states``): the claims then use :meth:`attention` alone."""
        raise self._missing("multi_head_cross_attention")

    # -- Section 3.3 / 3.5 ------------------------------------------------------------------
    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        """The position-wise FFN of Eq. 2 and its weights (see :class:`FeedForwardParts`)."""
        raise self._missing("feed_forward")

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        """The (length, d_model) table added to the embeddings of the tokens at positions
        0 .. length-1 (any offset the implementation starts from included), in the
        implementation's own order of dimensions. An implementation without a fixed table (no
        absolute positions, or learned ones) raises ``self.absent("positional_encoding", why)``;
        a learned table goes in ``ModelParts.encoder_positions`` / ``decoder_positions``."""
        raise self._missing("positional_encoding")

    # -- Section 3.1 ------------------------------------------------------------------------
    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        """One encoder layer and its pieces (see :class:`EncoderLayerParts`). Give the norms as
        the torch modules the layer uses: the post-norm check sets their weights to random
        values (and restores them) so that their order shows."""
        raise self._missing("encoder_layer")

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        raise self._missing("decoder_layer")

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        """The whole encoder-decoder at this size, n_layers in each stack, one vocabulary shared
        by source and target (see :class:`ModelParts`). Also called at the sizes of Table 3's
        rows and of the base model (vocab_size=37000), whose parameters are counted."""
        raise self._missing("model")

    def model_paths(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int,
                    n_layers: int) -> dict[str, ModelParts]:
        """The model built with each attention path it can run (see :meth:`attention_paths`), for
        the claims about masks. Default: :meth:`model` alone."""
        return {"model": self.model(vocab_size, d_model, n_heads, d_ff, n_layers)}

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        """The model as training runs it: residual dropout rate ``dropout`` (Section 5.4), in train mode."""
        raise self._missing("training_model")

    # -- Section 5 --------------------------------------------------------------------------
    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """The optimizer the implementation trains with, over ``params`` (Section 5.3)."""
        raise self._missing("optimizer")

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        """The learning rate of the step-th optimizer update, counted from 1 (Eq. 3's step_num).

        With a torch scheduler stepped after ``optimizer.step()`` (the Hugging Face Trainer,
        ``LambdaLR``), update k runs at the scheduler's value for k - 1; return that value."""
        raise self._missing("learning_rate")

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        """Label-smoothed cross-entropy of logits (tokens, vocab) against target (tokens,),
        *summed* over the tokens whose target is not ``pad_id`` (padding gets no gradient);
        differentiable in ``logits``. A mean is refused by the contract."""
        raise self._missing("loss")

    def loss_paths(self) -> dict[str, Callable[[Tensor, Tensor, int, float], Tensor]]:
        """Every implementation of the training loss the implementation's loop can call (e.g. one
        for the CPU and one for an accelerator or a compiled step), each called as :meth:`loss`.
        Default: :meth:`loss` alone."""
        return {"loss": self.loss}

    def hyperparameters(self) -> dict[str, Any]:
        """The settings the implementation uses by default (or in its documented recipe):
        keys as in the claims' ``params.key`` (:data:`HYPERPARAMETER_KEYS`), each value a
        number, bool or word, bare or as ``(value, where)`` saying where it was read, e.g.
        ``{"dropout_base": (0.1, "the default 'dropout' of torch.nn.Transformer")}``. Leave
        out a setting the implementation does not have; ``None`` and numbers as text are
        refused."""
        raise self._missing("hyperparameters")

    def update_rates(self, steps: Sequence[int], d_model: int, warmup_steps: int) -> list[float]:
        """The learning rate the training loop applies in each of these updates, the first update
        being update 1 (whatever the implementation counts internally: report the rate the k-th
        optimizer step uses), with the schedule set for ``d_model`` and ``warmup_steps``."""
        raise self._missing("update_rates")

    def average_last(self, states: Sequence[dict[str, Tensor]], k: int) -> dict[str, Tensor]:
        """Section 6.1: the model the evaluation decodes with, averaged from these checkpoints'
        parameters (oldest first) as the implementation averages "the last k"."""
        raise self._missing("average_last")

    def checkpoint_steps(self, seconds_per_update: float, updates: int) -> list[int]:
        """The updates after which training writes a checkpoint, when each update takes
        ``seconds_per_update`` of wall time and the run has ``updates`` updates (the paper's
        recipe: every 10 minutes)."""
        raise self._missing("checkpoint_steps")

    # -- Section 6.1: decoding ----------------------------------------------------------------
    def search(self, next_log_probs: NextLogProbs, source_length: int, vocab_size: int, *, beam_size: int,
               alpha: float, max_len_offset: int) -> list[int]:
        """The implementation's beam search (as its evaluation runs it) over a scripted model: the
        best output's tokens, without BOS and EOS. ``next_log_probs`` gives the distribution after
        a prefix; the source has ``source_length`` tokens; token ids 1 and 2 are BOS and EOS."""
        raise self._missing("search")

    def beam_search(self, parts: ModelParts, src: Tensor, *, beam_size: int, alpha: float,
                    max_len_offset: int, use_cache: bool = True) -> list[list[int]]:
        """The implementation's beam search over one of its models (as ``model`` or
        ``training_model`` built it, in whatever mode it is in): the best output per row of ``src``.
        ``use_cache=False`` (optional, later than the rest): the same search recomputing every
        prefix instead of reading its key/value cache (``impl.incremental-decoding`` compares the
        two); an adapter written without the keyword leaves that comparison unmeasured."""
        raise self._missing("beam_search")

class AdapterWrapper:
    """Stands in front of an adapter (the contract's checks, a device bridge): its name, its presets
    and every method the wrapper does not define are the adapter's; ``adapter`` is the one wrapped."""

    def __init__(self, target: Adapter) -> None:
        self._target = target

    @property
    def name(self) -> str:
        return self._target.name

    @property
    def adapter(self) -> Adapter:
        """The adapter this one stands in front of."""
        return self._target

    @property
    def has_repro_presets(self) -> bool:
        return bool(getattr(self._target, "has_repro_presets", False))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


# -- Constants of the protocol (documented in the module docstring) ----------------------------

#: Token ids 0 .. RESERVED_IDS-1 are never fed by the checks: they are left to special tokens.
RESERVED_IDS = 4

#: The keys of :meth:`Adapter.hyperparameters` that claims read (``params.key`` of the
#: ``recipe.value`` claims); an adapter may give more.
HYPERPARAMETER_KEYS = (
    "label_smoothing", "warmup_steps", "tokens_per_batch", "train_steps_base", "train_steps_big",
    "average_last_base", "average_last_big", "checkpoint_every_minutes", "dropout_base",
    "dropout_big_ende", "dropout_big_enfr", "beam_size", "length_penalty", "max_len_offset",
    "parser_beam_size", "parser_length_penalty", "parser_max_len_offset", "vocab_size_ende", "vocab_size_enfr",
    "dataset_ende", "dataset_enfr", "parser_layers", "parser_d_model", "parser_vocab_wsj", "parser_vocab_semi",
    "gpus", "gpu_type", "table3_average_last",
)
