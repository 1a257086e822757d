"""The training data of Section 5.1: a parallel corpus encoded with one shared BPE vocabulary.

The vocabulary is learned on the training source and target text together and saved as
``OUT_DIR/vocab.json``; a resumed run (and decoding) reloads it. Pairs longer than
``max_len`` wordpieces on either side are filtered and counted, never dropped silently.
The ``synthetic`` dataset (:mod:`repro.data.synthetic`) needs no files and no vocabulary.

A job prepares its data once: rank 0 learns the vocabulary and encodes the corpus into
``OUT_DIR/encoded/`` (:class:`~repro.data.encoded.EncodedPairs`, with a manifest of what it was
encoded from); the other ranks wait for it at a barrier and memory-map the result, and a
requeued or resumed run whose corpus, vocabulary and filter are unchanged (by content: SHA-256 of
the files and of each array) reuses it; otherwise it says why on stderr and encodes again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from repro.content_hash import file_sha256
from repro.data.corpus import read_parallel
from repro.data.encoded import EncodedPairs
from repro.data.corpora import Dataset, get_dataset, resolve_data_dir, with_splits
from repro.data.synthetic import SYNTHETIC, SyntheticCorpus
from repro.data.vocab import SharedVocab
from repro.errors import ConfigError, DataError
from repro.files.reader import read_json
from repro.files.writer import make_dirs
from repro.train.config import TrainConfig

Examples = list[tuple[list[int], list[int]]]


@dataclass
class TrainingData:
    vocab: SharedVocab | None          # None for the synthetic corpus (ids are drawn directly)
    examples: Sequence                 # (source ids, target ids) pairs: lists, or EncodedPairs
    vocab_size: int
    filtered: int = 0
    filtered_lines: list[int] = field(default_factory=list)
    source: tuple[Path, Path] | None = None
    #: how this process got the data: ``encoded`` it (rank 0, first run), ``reused`` what an earlier
    #: run of the job encoded, or ``mapped`` what rank 0 encoded (the other ranks); ``synthetic``
    origin: str = "encoded"


def dataset_for(cfg: TrainConfig) -> Dataset:
    """``cfg.dataset`` under the data directory, with explicit file overrides applied."""
    dataset = get_dataset(cfg.dataset, resolve_data_dir(cfg.data_dir))
    overrides = {}
    for split, (src, tgt) in (("train", (cfg.train_src, cfg.train_tgt)), ("dev", (cfg.dev_src, cfg.dev_tgt))):
        if (src is None) != (tgt is None):
            raise ConfigError(f"training config: give both {split}_src and {split}_tgt, or neither")
        if src is not None:
            overrides[split] = (Path(src), Path(tgt))
    dataset = with_splits(dataset, **overrides) if overrides else dataset
    for split in dataset.available_splits():   # a split's file that is no file (a link to /dev/zero) is
        dataset.split(split)                    # refused now, not when the run reads it after training
    return dataset


def _check_evaluation_splits(dataset: Dataset) -> None:
    """Read every split but ``train`` that is on this machine, as the run's evaluations will read them
    after training (its dev split, a job's test split): files of unequal length, an empty line or bytes
    that are not text are refused now, naming the file and line, not after the training they would waste.
    These splits are small (a few thousand sentences)."""
    for split in dataset.available_splits():
        if split != "train":
            read_parallel(*dataset.split(split))


def load_or_train_vocab(path: Path, texts: list[str], vocab_size: int, split: str = "bytes") -> SharedVocab:
    """The run's vocabulary at ``path``, or one learned from ``texts`` when there is none (not saved here:
    :func:`_prepare` saves it once the corpus it encodes is accepted)."""
    if path.exists():
        return SharedVocab.load(path)
    return SharedVocab.train(texts, vocab_size, split=split)


def encode_pairs(vocab: SharedVocab, pairs: list[tuple[str, str]], max_len: int | None = None
                 ) -> tuple[Examples, list[int]]:
    """Encode pairs; with ``max_len``, pairs longer on either side are left out and their
    (0-based) positions returned."""
    src = vocab.encode_batch([s for s, _ in pairs])
    tgt = vocab.encode_batch([t for _, t in pairs])
    examples, dropped = [], []
    for i, (s, t) in enumerate(zip(src, tgt)):
        if max_len is not None and (len(s) > max_len or len(t) > max_len):
            dropped.append(i)
        else:
            examples.append((s, t))
    return examples, dropped


def prepare_training_data(cfg: TrainConfig, synthetic: SyntheticCorpus | None = None, *,
                          rank: int = 0, world_size: int = 1) -> TrainingData:
    """The encoded training pairs of ``cfg.dataset`` (``synthetic``'s corpus for the synthetic dataset).

    With several ranks, rank 0 prepares them (or finds them prepared) while the others wait at a
    barrier, then every rank maps the same files."""
    if cfg.dataset == SYNTHETIC:
        examples = (synthetic or SyntheticCorpus()).examples(cfg.vocab_size, cfg.seed)
        return TrainingData(None, examples, cfg.vocab_size, origin="synthetic")
    dataset = dataset_for(cfg)
    src_path, tgt_path = dataset.split("train")
    grouped = world_size > 1 and dist.is_available() and dist.is_initialized()
    failure: BaseException | None = None
    data = None
    if rank == 0:
        try:
            _check_evaluation_splits(dataset)
            data = _prepared(cfg, src_path, tgt_path) or _prepare(cfg, src_path, tgt_path)
        except BaseException as err:  # noqa: BLE001 - re-raised after the barrier, so no rank waits for nothing
            failure = err
    if grouped:
        dist.barrier()
    if failure is not None:
        raise failure
    if data is None:
        data = _prepared(cfg, src_path, tgt_path, "mapped")
        if data is None:
            raise DataError(f"{Path(cfg.out_dir) / 'encoded'}: rank 0 did not prepare the training data of "
                            f"{src_path}, {tgt_path} (see rank 0's log)")
    return data


def _manifest(cfg: TrainConfig, src_path: Path, tgt_path: Path, vocab_file: Path) -> dict:
    """What an encoded corpus depends on: the two files (by content: size and SHA-256), the
    vocabulary (SHA-256), the filter."""
    files = {str(p.resolve()): {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in (src_path, tgt_path)}
    vocab = file_sha256(vocab_file) if vocab_file.is_file() else None
    return {"files": files, "vocab_sha256": vocab, "max_len": cfg.max_len, "format": 2}


def _say_stale(folder: Path) -> Callable[[str], None]:
    return lambda reason: print(f"repro train: not reusing {folder}: {reason}; encoding again", file=sys.stderr)


def _prepared(cfg: TrainConfig, src_path: Path, tgt_path: Path, origin: str = "reused") -> TrainingData | None:
    """The training data encoded earlier into ``OUT_DIR/encoded`` from these very inputs (by
    content), if any; ids outside the vocabulary are refused naming the array file."""
    out_dir = Path(cfg.out_dir)
    vocab_file = out_dir / "vocab.json"
    if not vocab_file.is_file():
        return None
    folder = out_dir / "encoded"
    try:
        manifest = _manifest(cfg, src_path, tgt_path, vocab_file)
    except OSError as err:
        raise DataError(f"{err.filename or src_path}: cannot read ({err.strerror})") from None
    pairs = EncodedPairs.load(folder, manifest, _say_stale(folder) if origin == "reused" else None)
    if pairs is None:
        return None
    saved = read_json(folder / "manifest.json", "encoded corpus's manifest", error=DataError)
    lines = list(saved.get("filtered_lines", []))
    vocab = SharedVocab.load(vocab_file)
    pairs.check_ids(folder, len(vocab), vocab_file)
    return TrainingData(vocab, pairs, len(vocab), len(lines), lines, (src_path, tgt_path), origin)


def _prepare(cfg: TrainConfig, src_path: Path, tgt_path: Path) -> TrainingData:
    """Learn (or reload) the vocabulary, encode and filter the corpus, and save it encoded."""
    corpus = read_parallel(src_path, tgt_path)
    if not corpus.pairs:  # refused before the run directory or a vocabulary is written
        raise DataError(f"{src_path}, {tgt_path}: training corpus of dataset '{cfg.dataset}' is empty; "
                        "training needs at least one sentence pair")
    vocab_file = Path(cfg.out_dir) / "vocab.json"
    texts = [s for s, _ in corpus.pairs] + [t for _, t in corpus.pairs]
    learned = not vocab_file.exists()
    vocab = load_or_train_vocab(vocab_file, texts, cfg.vocab_size, cfg.bpe_split)
    examples, dropped = encode_pairs(vocab, corpus.pairs, cfg.max_len)
    lines = [i + 1 for i in dropped]
    if dropped:
        shown = ", ".join(map(str, lines[:10])) + (" ..." if len(lines) > 10 else "")
        print(f"repro train: filtered {len(dropped)} of {len(corpus.pairs)} pairs of {src_path} longer than "
              f"{cfg.max_len} wordpieces (lines {shown})", file=sys.stderr)
    if not examples:
        raise DataError(f"{src_path}, {tgt_path}: all {len(corpus.pairs)} training pairs are longer than "
                        f"max_len={cfg.max_len} wordpieces; nothing is left to train on (raise max_len)")
    out_dir = make_dirs(cfg.out_dir)   # only now: a refused corpus leaves no folder and no vocabulary behind
    if learned:
        vocab.save(vocab_file)
    encoded = EncodedPairs.from_lists(examples)
    encoded.save(out_dir / "encoded", {**_manifest(cfg, src_path, tgt_path, out_dir / "vocab.json"),
                                       "filtered_lines": lines}, within=out_dir)
    return TrainingData(vocab, encoded, len(vocab), len(dropped), lines, (src_path, tgt_path))
