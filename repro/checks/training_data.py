"""Section 5.1's training data as the run's own data path encodes it: one vocabulary for both
languages, of the size the job asks for, and each pair the loop trains on holding the source
sentence as its source.

The probe is a corpus whose two sides share no word, written as a dataset folder and prepared by
:func:`repro.train.data.prepare_training_data` (what ``repro train`` calls): the vocabulary it
learns and the encoded pairs it hands the batcher are read back.
"""

from __future__ import annotations

import random
import string
import tempfile
from pathlib import Path

from repro.checks.jobs import job_config, own
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


#: The vocabulary the size probe asks the data path for: the byte alphabet and the special tokens
#: (260 entries) and 140 merges, far fewer than its corpus offers.
PROBE_VOCAB = 400


def _varied_corpus(seed: int, lines: int = 300, words: int = 400) -> list[str]:
    """Lines of ``words`` distinct made-up words (a seeded draw), each frequent enough for BPE to merge
    it whole: a corpus that supports a vocabulary of well over :data:`PROBE_VOCAB` entries."""
    rng = random.Random(seed)
    lexicon = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                      for _ in range(words)})
    return [" ".join(rng.choice(lexicon) for _ in range(8)) for _ in range(lines)]


@checker("run.vocabulary_size", audits=False)
def vocabulary_size(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.1 ("a shared source-target vocabulary of about 37000 tokens"; "a 32000 word-piece
    vocabulary"): the vocabulary the job's own data path learns (:func:`prepare_training_data`, with the
    job's settings) has as many entries as its config asks for. The probe asks for :data:`PROBE_VOCAB`
    on a corpus that supports many more (a corpus for 37000 is not at hand); the recipes' 37000 and
    32000 are read by ``sec5.vocab.*``. Measured: entries learned minus entries asked for."""
    own(ctx)
    job = job_config(claim.params["experiment"], claim.params.get("job"))
    lines = _varied_corpus(ctx.seed)
    with tempfile.TemporaryDirectory(prefix="repro-vocab-size-") as tmp:
        folder = Path(tmp) / "varied"
        for split in ("train", "dev"):
            for lang, offset in (("en", 0), ("de", len(lines) // 2)):
                text = lines[offset:] + lines[:offset]   # both sides from one lexicon, in other orders
                atomic_write_text(folder / f"{split}.{lang}", "".join(line + "\n" for line in text), within=tmp)
        cfg = job.replace(dataset=str(folder), vocab_size=PROBE_VOCAB, out_dir=str(Path(tmp) / "run"), data_dir=None,
                          train_src=None, train_tgt=None, dev_src=None, dev_tgt=None)
        learned = len(prepare_training_data(cfg).vocab)
    return Measurement(learned - PROBE_VOCAB, detail=(
        f"job {claim.params.get('job') or claim.params['experiment']}'s data path ({cfg.bpe_split} BPE) asked for "
        f"{PROBE_VOCAB} entries on a corpus of {len(lines)} lines x 8 of ~400 words learned {learned}"))
