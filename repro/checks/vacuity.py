"""No vacuous pass: a comparison of two outputs shows nothing when the outputs carry nothing.

An invariance or equivalence check passes when two outputs agree (train- and eval-mode decoding,
a sentence alone and padded in a batch, the cached and the recomputed logits, a module and the
composition of its parts). Outputs that do not depend on anything agree whatever the code does:
a beam search that ends every sentence at once, a model whose logits are the same at every
position, a module that returns zeros. Every checker that compares outputs hands them to
:func:`require_informative` first; when they cannot show a difference it raises
:class:`~repro.claims.outcome.Inconclusive` and the claim is reported ``inconclusive``, never
``pass``.

Non-finite values are left to the comparison itself, which must fail on them: an output full of
NaN is a broken output, not an uninformative one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch
from torch import Tensor

from repro.claims.outcome import Inconclusive

#: Two rows of a tensor closer than this (relative to the tensor's scale) count as the same row.
SAME_ROW = 1e-6


def require_informative(outputs: Tensor | Sequence[Sequence[int]], what: str, *, special: Collection[int] = ()) -> None:
    """Raise :class:`Inconclusive` when ``outputs`` cannot show a difference.

    * A tensor (logits, hidden states, a module's output; the last dimension is the feature
      dimension): inconclusive when it is empty or every row (every position of every sequence)
      is the same vector, i.e. the output does not depend on the position or the input.
    * Token sequences (one per source sentence, as a search returns them): inconclusive when
      there are none, every one is empty or holds only ``special`` tokens (end-of-sentence,
      padding), or all are the same sequence (the search ignores its source).

    ``what`` names the outputs in the reason (e.g. "the eval-mode beam search's outputs")."""
    if isinstance(outputs, Tensor):
        _require_informative_tensor(outputs, what)
    else:
        _require_informative_tokens([list(map(int, o)) for o in outputs], what, set(special))


def _require_informative_tensor(output: Tensor, what: str) -> None:
    if output.numel() == 0:
        raise Inconclusive(f"{what} are empty: nothing to compare")
    values = output.detach().double()
    if not torch.isfinite(values).all():
        return  # the comparison fails on it
    rows = values.reshape(-1, values.shape[-1]) if values.dim() > 1 else values.reshape(-1, 1)
    scale = max(rows.abs().max().item(), 1.0)
    if rows.size(0) < 2 or (rows - rows[:1]).abs().max().item() <= SAME_ROW * scale:
        value = "0" if rows.abs().max().item() == 0 else "one vector"
        raise Inconclusive(
            f"{what} are the same ({value}) at every position of every input ({rows.size(0)} rows): a comparison "
            "of them cannot show a difference"
        )


def _require_informative_tokens(outputs: list[list[int]], what: str, special: set[int]) -> None:
    if not outputs:
        raise Inconclusive(f"{what}: there are none to compare")
    if all(not o for o in outputs):
        raise Inconclusive(f"{what} are all empty ({len(outputs)} sentences end at once): a comparison of them "
                           "cannot show a difference")
    if special and all(t in special for o in outputs for t in o):
        raise Inconclusive(f"{what} hold nothing but special tokens {sorted(special)} ({len(outputs)} sentences): "
                           "a comparison of them cannot show a difference")
    if len(outputs) > 1 and all(o == outputs[0] for o in outputs):
        raise Inconclusive(f"{what} are the same sequence for all {len(outputs)} sources ({outputs[0][:8]}...): "
                           "the search does not follow its input, and a comparison of them cannot show a difference")
