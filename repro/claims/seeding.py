"""Every random draw a check makes, seeded from the run's seed and the claim's id.

A check that builds a model draws its weights (and, in train mode, its dropout masks) from torch's
global random state. Left unseeded, that state is whatever the claims run before left behind, so a
verdict would change with ``--only`` and with the order of the claims. The engine
(:func:`repro.claims.runner.run_claim`) therefore runs each checker inside :func:`seeded` with
:func:`claim_seed` (the run's ``--seed`` and the claim's id), and restores the global state after:
a claim draws the same models alone, in any selection and in the full run. A checker that builds
several models in turn (a fresh one when the last showed nothing) seeds each from
``claim_seed(seed, claim.id, attempt)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def claim_seed(seed: int, claim_id: str, attempt: int = 0) -> int:
    """A seed for torch's global random state, from the run's ``seed``, the claim's id and the
    checker's ``attempt`` (stable across processes and platforms, unlike ``hash``)."""
    digest = hashlib.sha256(f"{seed}/{claim_id}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's global random state (the CPU's and every accelerator's) seeded with ``seed`` for the
    block, and restored after it."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield
