"""A synthetic parallel corpus for the ``smoke`` recipe: copy the source reversed.

It needs no files and no BPE, so a training job can be run and resumed anywhere in seconds
(the cluster tests do). Token ids are drawn after the special ones (PAD, BOS, EOS, UNK).
Lengths vary between ``length // 2`` and ``length``, so that devices see unequal token counts
and a gradient normalised per device instead of per update would show.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from repro.data.vocab import UNK

#: ``TrainConfig.dataset`` value that selects this corpus.
SYNTHETIC = "synthetic"


@dataclass(frozen=True)
class SyntheticCorpus:
    """``sentences`` pairs of at most ``length`` tokens over a vocabulary of ``vocab_size`` ids."""

    sentences: int = 16
    length: int = 8

    def examples(self, vocab_size: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """(source ids, target ids) pairs, the target being the source reversed; fixed by ``seed``."""
        gen = torch.Generator().manual_seed(seed)
        pairs = []
        for _ in range(self.sentences):
            n = int(torch.randint(max(1, self.length // 2), self.length + 1, (1,), generator=gen))
            x = torch.randint(UNK + 1, vocab_size, (n,), generator=gen).tolist()
            pairs.append((x, x[::-1]))
        return pairs
