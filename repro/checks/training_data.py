"""Section 5.1's training data as the run's own data path encodes it: one vocabulary for both
languages, and each pair the loop trains on holding the source sentence as its source.

The probe is a corpus whose two sides share no word, written as a dataset folder and prepared by
:func:`repro.train.data.prepare_training_data` (what ``repro train`` calls): the vocabulary it
learns and the encoded pairs it hands the batcher are read back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.vocab import SharedVocab
from repro.files.writer import atomic_write_text
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data

#: The words of each side of the probe corpus (English source, German target); no word on both.
SOURCE_WORDS, TARGET_WORDS = ("alpha", "bravo", "charlie"), ("xylo", "quartz", "zephyr")
#: Lines of each split: enough for BPE to merge every word whole.
ROWS = 60


def disjoint_run() -> tuple[SharedVocab, list[tuple[list[int], list[int]]]]:
    """The vocabulary and the encoded training pairs the run's data path makes of the probe corpus."""
    with tempfile.TemporaryDirectory(prefix="repro-vocab-") as tmp:
        folder = Path(tmp) / "disjoint"
        for split in ("train", "dev"):
            for lang, words in (("en", SOURCE_WORDS), ("de", TARGET_WORDS)):
                atomic_write_text(folder / f"{split}.{lang}", "".join(" ".join(words) + "\n" for _ in range(ROWS)),
                                  within=tmp)
        cfg = TrainConfig(dataset=str(folder), vocab_size=300, out_dir=str(Path(tmp) / "run"))
        data = prepare_training_data(cfg)
        examples = [(list(map(int, s)), list(map(int, t))) for s, t in data.examples]
    return data.vocab, examples


@checker("run.pair_direction", audits=False)
def pair_direction(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.1 ("WMT 2014 English-German"): the run translates from the dataset's source language
    into its target language. Every encoded pair the run's data path hands the batcher must decode to
    the source file's line on its source side and the target file's line on its target side (a run
    that trained the other way round scores its BLEU against the wrong language). Measured: the pairs
    that do not."""
    own(ctx)
    vocab, examples = disjoint_run()
    source, target = " ".join(SOURCE_WORDS), " ".join(TARGET_WORDS)
    wrong = [(vocab.decode(s), vocab.decode(t)) for s, t in examples if (vocab.decode(s), vocab.decode(t)) != (source, target)]
    return Measurement(len(wrong), detail=(
        f"{len(examples) - len(wrong)} of {len(examples)} encoded pairs read ({source!r} -> {target!r})"
        + (f"; the first other: {wrong[0]!r}" if wrong else "")))
