"""Sections 5.1, 6.2 and 6.3 observed on a run's records: the sets it was evaluated on were held out of its
training (newstest2013 for development and newstest2014 for test apart from WMT 2014's training data;
Section 22 and Section 23 apart from the parser's training sections), and its development set is not its
test set (``repro check --run DIR``, basis ``run``: a result of a run).

The pairs each evaluation scored are read from the files its record names (``test_set``: each file's
SHA-256 checked first, :func:`repro.checks.observed_data.check_scored`); the pairs the run trained on from
the training files its ``run.json`` counted (``corpus.files``), each of which must still have the SHA-256
the run recorded, else nothing can be compared and the claim "needs another run". The value is the
largest share of one evaluation's scored pairs found among the training pairs (or, for a dev set, among
the pairs of the run's test set). A recipe that named those very files (``train_src``/``dev_src``: the test
files) departs; a data set whose training split holds the scored pairs without being asked fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.checks.observed_data import check_scored
from repro.checks.observed_records import not_found, own_evaluations, written_at_end
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.content_hash import file_sha256
from repro.data.corpus import read_parallel
from repro.errors import DataError
from repro.files.reader import iter_lines
from repro.observed.judge import judge, paper_job
from repro.train.config import TrainConfig
from repro.train.data import dataset_for


def _training_files(files: Any) -> tuple[Path, Path]:
    """The training files the run counted, each the one its record hashed: named there by its path, or by its
    name where the data set lies elsewhere on this machine."""
    counted = (files.record or {}).get("corpus")
    if not isinstance(counted, dict):
        raise not_found(files, "the run's record of its counted corpus", files.record_path)
    recorded = [f for f in counted.get("files") or [] if isinstance(f, dict)]
    try:
        recipe = TrainConfig.from_dict(files.train, source=f"{files.path}: the run's recipe")
        src, tgt = dataset_for(recipe).split("train")
    except DataError as err:
        raise NotRun(f"needs another run: the training files of the run are not on this machine to compare the "
                     f"scored pairs with ({err})") from None
    for path in (src, tgt):
        entry = next((f for f in recorded if str(f.get("path")) == str(path)), None) or \
            next((f for f in recorded if Path(str(f.get("path"))).name == path.name), None)
        if entry is None:
            raise Contradiction(f"{files.record_path}: field 'corpus.files' names "
                                f"{', '.join(str(f.get('path')) for f in recorded) or 'no file'}, not {path}, the "
                                "training file the run's recipe reads", path.name)
        now = file_sha256(path)
        if now != entry.get("sha256"):
            raise NotRun(f"needs another run: {path} is not the file the run counted (its SHA-256 {now[:12]}, field "
                         f"'corpus.files' of {files.record_path}: {str(entry.get('sha256'))[:12]}): the pairs it "
                         "trained on are not on this machine")
    return src, tgt


def _trained_among(train: tuple[Path, Path], wanted: set[int]) -> frozenset[int]:
    """Which of the pairs ``wanted`` (by :func:`_key`) the training files hold, read as a stream: a WMT corpus
    holds millions of pairs, the sets scored a few thousand."""
    lines = (iter_lines(side, "training file the run counted") for side in train)
    return frozenset(key for key in (_key(a, b) for a, b in zip(*lines)) if key in wanted)


def _scored_pairs(path: Path, scored: dict[str, Any]) -> tuple[list[tuple[str, str]], tuple[Path, Path]]:
    """The pairs an evaluation scored, from the files its record names (checked unchanged by ``check_scored``)."""
    src, ref = (Path(str(scored[side].get("path") or "")) for side in ("source", "reference"))
    if not (src.is_file() and ref.is_file()):
        raise NotRun(f"needs another run: the files {path.name} scored ({src}, {ref}) are not on this machine")
    return read_parallel(src, ref).pairs, (src, ref)


def _key(source: str, target: str) -> int:
    """A pair as one number, its lines' surrounding white space left out (within this process)."""
    return hash((source.strip(), target.strip()))


def _share(scored: list[tuple[str, str]], among: frozenset[int]) -> float:
    return sum(_key(*pair) in among for pair in scored) / len(scored) if scored else 0.0


def _asked(files: Any, key: str, named: tuple[Path, Path]) -> str | None:
    """The recipe's ``<key>_src``/``<key>_tgt`` in words, when it named the files ``named`` (by content)."""
    src, tgt = files.train.get(f"{key}_src"), files.train.get(f"{key}_tgt")
    if src is None or tgt is None:
        return None
    same = all(Path(mine).is_file() and file_sha256(mine) == file_sha256(theirs)
               for mine, theirs in zip((src, tgt), named))
    return f"{key}_src {src}, {key}_tgt {tgt}" if same else None


@checker("observed.held_out", audits=False, evidence="run")
def held_out(claim: Claim, ctx: CheckContext) -> Measurement:
    """The largest share of one evaluation's scored pairs that the run trained on, or that its dev set shares
    with its test set (module docstring)."""
    files = ctx.target
    paper_job(claim, files)
    records = own_evaluations(files, lambda r: isinstance(r.provenance.extra.get("test_set"), dict))
    if not records:
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no evaluation recording the files it scored")
    scored = [(path, result, check_scored(path, result)) for path, result in records]   # the records first
    train_files = _training_files(files)
    read = [(path, result, *_scored_pairs(path, test_set)) for path, result, test_set in scored]
    trained = _trained_among(train_files, {_key(*pair) for *_, pairs, _ in read for pair in pairs})
    worst: tuple[float, str, list[str]] = (-1.0, "", [])
    by_split: dict[str, tuple[list[tuple[str, str]], tuple[Path, Path], str]] = {}
    for path, result, pairs, named in read:
        split = str(result.provenance.extra.get("split"))
        by_split.setdefault(split, (pairs, named, path.name))
        share = _share(pairs, trained)
        asked = _asked(files, "train", named) or (_asked(files, split, train_files) if split == "dev" else None)
        if share > worst[0]:
            worst = (share, f"{share:.1%} of the {len(pairs)} pairs {path.name} scored ({named[0].name}, "
                            f"{named[1].name}) are pairs the run trained on ({train_files[0].name}, "
                            f"{train_files[1].name})", [asked] if asked else [])
    if "dev" in by_split and "test" in by_split:
        dev, test = by_split["dev"], by_split["test"]
        share = _share(dev[0], frozenset(_key(*pair) for pair in test[0]))
        if share > worst[0]:
            asked = _asked(files, "dev", test[1])
            worst = (share, f"{share:.1%} of the {len(dev[0])} pairs of the dev set {dev[2]} scored ({dev[1][0].name}) "
                            f"are pairs of the test set {test[2]} scored ({test[1][0].name})", [asked] if asked else [])
    share, detail, departures = worst
    return judge(claim, round(share, 6), detail, departures, unit=claim.unit)
