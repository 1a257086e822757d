"""What a job's encoded training corpus is reused on (Section 5.1's data, encoded once per run).

A job encodes its training corpus once into ``OUT_DIR/encoded`` and a later run in the same
folder (a requeued or resumed job) maps it instead of encoding again (:mod:`repro.train.data`).
Reused on the wrong key, a corpus edited in place is not what the run trains on. The check runs
the job's own data preparation on a small corpus it writes: prepared twice unchanged (the second
time must reuse), then with one target line changed in place, the file's size and modification
time kept (it must encode again, and train on the new line)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.vocab import EOS
from repro.files.reader import read_text
from repro.files.writer import atomic_write_text
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data

WORDS = ("the", "house", "is", "small", "a", "cat", "sees", "dog", "and", "we", "run", "far")


def _corpus(folder: Path, pairs: int) -> None:
    src = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(3 + i % 5)) for i in range(pairs)]
    tgt = [" ".join(WORDS[(2 * i + k) % len(WORDS)] for k in range(2 + i % 6)) for i in range(pairs)]
    for split in ("train", "dev", "test"):
        atomic_write_text(folder / f"{split}.en", "\n".join(src) + "\n", within=folder)
        atomic_write_text(folder / f"{split}.de", "\n".join(tgt) + "\n", within=folder)


@checker("run.encoded_cache_key")
def encoded_cache_key(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's data preparation reuses its encoded corpus when its sources are unchanged and
    encodes again when a source's content changed, size and mtime kept. Measured: the number of
    wrong decisions (a reuse of stale data, a corpus encoded again for nothing, the changed line
    not trained on)."""
    own(ctx)
    with tempfile.TemporaryDirectory(prefix="repro-encoded-") as tmp:
        data, run = Path(tmp) / "corpus", Path(tmp) / "run"
        _corpus(data, int(claim.params.get("pairs", 40)))
        cfg = TrainConfig(dataset=str(data), vocab_size=300, max_len=64, out_dir=str(run), device="cpu")
        first = prepare_training_data(cfg)
        again = prepare_training_data(cfg)
        target = data / "train.de"
        lines = read_text(target, "corpus").split("\n")
        changed = 3
        before = lines[changed]
        lines[changed] = " ".join(reversed(lines[changed].split(" ")))   # same words, same size, new content
        if lines[changed] == before:
            lines[changed] = lines[changed].replace("e", "o", 1)
        stat = target.stat()
        atomic_write_text(target, "\n".join(lines), within=data)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        edited = prepare_training_data(cfg)
        want = list(edited.vocab.encode(lines[changed])) if edited.vocab is not None else None
        got = [int(t) for t in edited.examples[changed][1]]
    wrong = []
    if again.origin != "reused":
        wrong.append(f"the unchanged corpus was {again.origin} again, not reused")
    if edited.origin == "reused":
        wrong.append("the corpus edited in place (size and mtime kept) was reused")
    if want is None or got[:len(want)] != want or (got[len(want):] and got[len(want):] != [EOS]):
        wrong.append(f"pair {changed} trains on {got}, its changed line encodes to {want}")
    return Measurement(len(wrong), detail=(f"first preparation {first.origin}, the same again {again.origin}, after "
                                           f"an edit in place (size and mtime kept) {edited.origin}"
                                           + ("; " + "; ".join(wrong) if wrong else "")))
