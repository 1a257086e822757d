"""What a stack's first layer receives, read off the library's own forward pass.

``ModelParts.encoder_input`` / ``decoder_input`` are what the first layer of each stack is
given: the embeddings with whatever the implementation adds to them (positions, a LayerNorm)
and, in train mode, its dropout. Recomputing that outside the library would audit the adapter's
copy; instead the stack is run as the model runs it and the first layer's input is taken with a
forward pre-hook, which stops the pass there.

Give the stack's layers (``encoder.layers``), not only the first: a stack with layer drop
(``encoder_layerdrop``, M2M100's default 0.05) skips a random layer in train mode, the first
included, and the first layer that runs then receives the stack's input unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch import Tensor, nn


class _Received(Exception):
    def __init__(self, tensor: Tensor) -> None:
        super().__init__("the first layer's input")
        self.tensor = tensor


def first_layer_input(run: Callable[[], Any], layer: nn.Module | Sequence[nn.Module]) -> Tensor:
    """The hidden states the first layer to run receives when ``run()`` runs its stack (the pass
    stops there); ``layer``: the stack's layers in order (or its first layer alone)."""
    layers = list(layer) if isinstance(layer, (nn.ModuleList, list, tuple)) else [layer]

    def stop(module: nn.Module, args: tuple, kwargs: dict) -> None:
        raise _Received(args[0] if args else kwargs["hidden_states"])

    handles = [each.register_forward_pre_hook(stop, with_kwargs=True) for each in layers]
    try:
        run()
    except _Received as received:
        return received.tensor
    finally:
        for handle in handles:
            handle.remove()
    names = ", ".join(sorted({type(each).__name__ for each in layers}))
    skipped = "" if len(layers) > 1 else " (a stack with layer drop skips it now and then in train mode: give all its layers)"
    raise RuntimeError(f"the stack never called its {'layers' if len(layers) > 1 else 'first layer'} ({names}){skipped}")
