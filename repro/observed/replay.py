"""The tokens of every update of a run, recounted from its encoded corpus with its own batchers.

A run's batches are a function of its corpus, its seed and its batching settings: every rank's
batcher (:func:`repro.train.loop.batcher_for`) draws each epoch's order from ``(seed, epoch)`` alone,
and a resumed run continues where the checkpoint left it (exact resume). So the real source and
target tokens of update ``u`` (every rank's ``accumulation`` passes) follow from the run's
``encoded/`` corpus and recipe, without a model: the batchers' epoch plans are walked, no batch is
collated. The metrics log's counts of the logged updates are set against these.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from repro.data.encoded import EncodedPairs
from repro.train.config import TrainConfig
from repro.train.loop import batcher_for
from repro.train.update_plan import plan_update

#: At most this many first updates are recounted (a base run's 100000 over 8 ranks would take minutes).
MAX_REPLAYED = 20_000


def encoded_corpus(folder: Path) -> tuple[EncodedPairs | None, str]:
    """The run's encoded corpus, memory-mapped and checked against its manifest's hashes; or None and why not."""
    reasons: list[str] = []
    pairs = EncodedPairs.load(folder, {}, reasons.append)
    if pairs is None:
        return None, reasons[0] if reasons else f"{folder / 'manifest.json'} not found"
    return pairs, ""


def replayed_tokens(cfg: TrainConfig, examples: EncodedPairs, world_size: int, updates: int) -> np.ndarray:
    """(updates, 2): the real source and target tokens of each of the first ``updates`` updates over
    ``world_size`` ranks, as the loop's batchers give them (module docstring)."""
    src_len, tgt_len = (np.asarray(x, dtype=np.int64) for x in examples.lengths())
    accumulation = plan_update(cfg.tokens_per_batch, world_size, cfg.max_tokens_per_device).accumulation
    out = np.zeros((updates, 2), dtype=np.int64)
    for rank in range(world_size):
        batcher = batcher_for(cfg, examples, world_size, rank)
        epoch, offset, batches = 0, 0, batcher.epoch_batches(0)
        for update in range(updates):
            for _ in range(accumulation):
                while offset == len(batches):   # an epoch may close no batch (length buckets filling up)
                    epoch, offset = epoch + 1, 0
                    batches = batcher.epoch_batches(epoch)
                idx = batches[offset]
                offset += 1
                out[update, 0] += src_len[idx].sum()
                out[update, 1] += tgt_len[idx].sum() + len(idx)   # every target ends with EOS
    return out
