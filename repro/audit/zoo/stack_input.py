"""What a stack's first layer receives, read off the library's own forward pass.

``ModelParts.encoder_input`` / ``decoder_input`` are what the first layer of each stack is
given: the embeddings with whatever the implementation adds to them (positions, a LayerNorm)
and, in train mode, its dropout. Recomputing that outside the library would audit the adapter's
copy; instead the stack is run as the model runs it and the first layer's input is taken with a
forward pre-hook, which stops the pass there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn


class _Received(Exception):
    def __init__(self, tensor: Tensor) -> None:
        super().__init__("the first layer's input")
        self.tensor = tensor


def first_layer_input(run: Callable[[], Any], layer: nn.Module) -> Tensor:
    """The hidden states ``layer`` receives when ``run()`` runs its stack (the pass stops there)."""

    def stop(module: nn.Module, args: tuple, kwargs: dict) -> None:
        raise _Received(args[0] if args else kwargs["hidden_states"])

    handle = layer.register_forward_pre_hook(stop, with_kwargs=True)
    try:
        run()
    except _Received as received:
        return received.tensor
    finally:
        handle.remove()
    raise RuntimeError(f"the stack never called its first layer ({type(layer).__name__})")
