"""Section 5.1's data and 5.2's hardware observed on a run's own records: the vocabulary it learned, the
corpus it counted, the test set its evaluations scored, the devices it trained on (``repro check --run``).

What a run's files say of these is checked against each other first (the vocabulary file against the
run's record, the checkpoint's lineage and the model's embedding; the counted corpus against the encoded
one; each scored file against what its evaluation recorded of it): a record that contradicts another
fails, naming the file, the field and both values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.checks.registry import checker
from repro.checks.observed_records import not_found, own_evaluations, sessions, written_at_end
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.content_hash import file_sha256
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.test_sets import identity, paper_test_set
from repro.errors import DataError
from repro.files.reader import opened
from repro.observed.judge import judge, paper_job
from repro.observed.run_files import missing

#: What each way of cutting words (``TrainConfig.bpe_split``) learns, and the kind of vocabulary it is.
VOCABULARY_KINDS = {"bytes": ("byte-level byte-pair encoding", "byte-pair encoding"),
                    "words": ("byte-pair encoding within whitespace words", "byte-pair encoding"),
                    "word-level": ("a word-level vocabulary (no merges)", "word-level")}


def _paper_dataset(files: Any) -> str | None:
    return str(files.paper.spec.train.get("dataset")) if files.paper is not None else None


def _corpus_departs(files: Any) -> list[str]:
    """Why the run's corpus is not its paper job's, in words (empty when it is)."""
    mine, paper = files.train.get("dataset"), _paper_dataset(files)
    return [f"its corpus {mine} (the paper's job trains on {paper})"] if paper is not None and mine != paper else []


@checker("observed.vocabulary", audits=False, evidence="run")
def vocabulary(claim: Claim, ctx: CheckContext) -> Measurement:
    """The entries of the run's ``vocab.json``, which must be the vocabulary its record, its checkpoint's
    lineage and its model's embedding say it trained with; and what kind of vocabulary it is."""
    files = ctx.target
    paper_job(claim, files)
    vocab = files.path / "vocab.json"
    if files.vocab_size is None:
        raise NotRun(missing("the vocabulary the run learned", vocab))
    size, sha = files.vocab_size, files.vocab_sha256
    record = (files.record or {}).get("vocabulary")
    if record is not None and record.get("size") != size:
        raise Contradiction(f"{files.record_path}: field 'vocabulary.size' is {record.get('size')!r}, but {vocab} holds "
                            f"{size} entries", size)
    for field, asked in (("split", files.train.get("bpe_split", "bytes")), ("asked", files.train.get("vocab_size"))):
        if record is not None and field in record and record[field] != asked:   # what the run asked of its vocabulary
            raise Contradiction(f"{files.record_path}: field 'vocabulary.{field}' is {record[field]!r}, but the run's "
                                f"recipe asked for {asked!r} ({'bpe_split' if field == 'split' else 'vocab_size'})",
                                record[field])
    if record is not None and record.get("sha256") != sha:
        raise Contradiction(f"{vocab}: changed since the run recorded it (its SHA-256 {sha[:12]}, field "
                            f"'vocabulary.sha256' of {files.record_path}: {str(record.get('sha256'))[:12]})", size)
    if files.newest is not None:
        trained_with = files.newest.lineage.get("vocab_sha256")
        if trained_with and trained_with != sha:
            raise Contradiction(f"{vocab}: not the vocabulary {files.newest.path.name} was trained with (its SHA-256 "
                                f"{sha[:12]}, the checkpoint's lineage {trained_with[:12]})", size)
        for side in ("src_vocab_size", "tgt_vocab_size"):   # one vocabulary, shared by source and target (Section 5.1)
            rows = files.newest.model_config.get(side)
            if rows is not None and rows != size:
                raise Contradiction(f"{vocab}: {size} entries, but the model of {files.newest.path.name} embeds {rows} "
                                    f"(field 'model_config.{side}')", size)
    split = str(files.train.get("bpe_split", "bytes"))
    learned, kind = VOCABULARY_KINDS.get(split, (split, split))
    asked = files.train.get("vocab_size")
    detail = f"{size} entries of {learned} in {vocab.name} (asked for {asked})"
    wanted = claim.params.get("kind")
    if wanted and wanted != kind:
        return Measurement(size, passed=False, departs=True,
                           detail=f"{detail}: not the paper's {wanted} vocabulary (the run's bpe_split is '{split}')")
    departures = [*( [f"vocab_size {asked}"] if isinstance(asked, int) and not claim.within(asked) else []),
                  *_corpus_departs(files)]
    return judge(claim, size, detail, departures, unit="vocabulary entries")


@checker("observed.corpus", audits=False, evidence="run")
def corpus(claim: Claim, ctx: CheckContext) -> Measurement:
    """The pairs the run counted in its training corpus (read = trained on + filtered by length), which
    its encoded corpus must hold."""
    files = ctx.target
    paper_job(claim, files)
    if files.record is None or "corpus" not in files.record:
        raise not_found(files, "the run's record of its counted corpus", files.record_path)
    counted = files.record["corpus"]
    pairs, trained, filtered = counted["pairs"], counted["trained"], counted["filtered"]
    if pairs != trained + filtered:
        raise Contradiction(f"{files.record_path}: field 'corpus.pairs' is {pairs}, but corpus.trained {trained} + "
                            f"corpus.filtered {filtered} = {trained + filtered}", pairs)
    encoded = files.encoded
    if encoded is not None:
        manifest = files.path / "encoded" / "manifest.json"
        arrays, why = files.encoded_pairs
        if arrays is None and any((manifest.parent / f"{name}.npy").exists() for name in ("src", "src_offsets")):
            raise Contradiction(f"{manifest}: {why}", pairs)   # the encoded arrays are what the run trained on
        if encoded.get("pairs") != trained:
            raise Contradiction(f"{files.record_path}: field 'corpus.trained' is {trained}, but {manifest} holds "
                                f"{encoded.get('pairs')!r} encoded pairs", pairs)
        if len(encoded.get("filtered_lines") or []) != filtered:
            raise Contradiction(f"{files.record_path}: field 'corpus.filtered' is {filtered}, but {manifest} lists "
                                f"{len(encoded.get('filtered_lines') or [])} filtered lines", pairs)
        sources = {f.get("path"): f.get("sha256") for f in counted.get("files") or [] if isinstance(f, dict)}
        theirs = {p: (e or {}).get("sha256") for p, e in (encoded.get("files") or {}).items()}
        if sources and sources != theirs:
            raise Contradiction(f"{files.record_path}: field 'corpus.files' does not name the files {manifest} was "
                                "encoded from (paths or SHA-256 differ)", pairs)
    _files_hold(files, counted, pairs)
    return judge(claim, pairs, f"{pairs:,} pairs read from {counted.get('dataset')}, {trained:,} trained on, {filtered:,} "
                 "longer than the run's max_len left out", _corpus_departs(files), unit="sentence pairs")


def _files_hold(files: Any, counted: dict[str, Any], pairs: int) -> None:
    """Each file the run counted, where it is on this machine as the run hashed it, holds one line per pair read."""
    for i, recorded in enumerate(counted.get("files") or []):
        path = Path(str((recorded or {}).get("path") or ""))
        if not path.is_file() or file_sha256(path) != recorded.get("sha256"):
            continue   # not here, or another copy: nothing to count
        with opened(path, "corpus file the run counted") as (fh, _):
            lines = sum(1 for _ in fh)
        if lines != pairs:
            raise Contradiction(f"{files.record_path}: field 'corpus.pairs' is {pairs}, but {path}, which field "
                                f"'corpus.files[{i}]' names with its SHA-256, holds {lines} lines", pairs)


def translations_file(path: Path, recorded: dict[str, Any]) -> Path:
    """Where the translations an evaluation (``RUN_DIR/evaluations/<id>.json``) recorded are now: in the
    run's directory, wherever it has moved since, else where the record says."""
    moved = path.parent.parent / str(recorded.get("file"))
    return moved if moved.is_file() else Path(str(recorded.get("path") or ""))


def _scored_now(path: Path, recorded: dict[str, Any], what: str, field: str) -> str | None:
    """Whether a scored file still is what its evaluation recorded; None when it is not on this machine."""
    where = translations_file(path, recorded) if what == "translations" else Path(str(recorded.get("path") or ""))
    if not where.is_file():
        return None
    now = identity(where)
    for key in ("lines", "sha256", "content_sha256"):
        if now[key] != recorded.get(key):
            raise Contradiction(f"{path}: field '{field}.{key}' records {recorded.get(key)!r} for the {what} {where}, "
                                f"which now has {now[key]!r}: the scored file changed since it was scored",
                                recorded.get(key))
    return str(where)


def scored_records(files: Any, split: str, measures: tuple[str, ...] = ()) -> list[tuple[Path, Any]]:
    """The run's evaluation records of ``split`` (of the given measurements, when named)."""
    def wanted(result: Any) -> bool:
        extra = result.provenance.extra
        return extra.get("split") == split and (not measures or str(extra.get("measure", "")).startswith(measures))
    return own_evaluations(files, wanted)


def check_scored(path: Path, result: Any) -> dict[str, Any]:
    """An evaluation's record of the files it scored, against itself and against the files on this machine."""
    scored = result.provenance.extra.get("test_set")
    field = "provenance.extra.test_set"
    if not isinstance(scored, dict):
        raise NotRun(f"needs another run: {path} does not record which files it scored (an evaluation by an older repro)")
    for side in ("source", "reference"):   # a record that says which files it scored, but not which
        if not isinstance(scored.get(side), dict):
            raise Contradiction(f"{path}: field '{field}' names no {side} file", None)
    lines, sentences = scored["reference"].get("lines"), scored.get("sentences")
    if sentences != lines or scored["source"].get("lines") != lines:
        raise Contradiction(f"{path}: field '{field}' says {sentences!r} sentences were scored, from a source of "
                            f"{scored['source'].get('lines')!r} and a reference of {lines!r} lines", sentences)
    for side in ("source", "reference", "hypotheses"):
        if isinstance(scored.get(side), dict):
            _scored_now(path, scored[side], {"hypotheses": "translations"}.get(side, f"{side} file"), f"{field}.{side}")
    return scored


def _of_its_split(files: Any, path: Path, result: Any, scored: dict[str, Any]) -> None:
    """The files an evaluation scored must not be those of another split of the run's data set than the one
    it names (a dev set scored and filed as the test set: newstest2013 reported as 2014); compared by
    content where the data set is on this machine, its training split left out."""
    split = result.provenance.extra.get("split")
    try:
        dataset = get_dataset(str(files.train.get("dataset")), resolve_data_dir(files.train.get("data_dir")))
    except DataError:   # not registered, or not on this machine: nothing to compare with
        return
    wanted = (scored["source"].get("content_sha256"), scored["reference"].get("content_sha256"))
    for name, (src, tgt) in dataset.splits.items():
        if name in (split, "train") or not (src.is_file() and tgt.is_file()):
            continue
        if (identity(src)["content_sha256"], identity(tgt)["content_sha256"]) == wanted:
            raise Contradiction(f"{path}: field 'provenance.extra.split' is {split!r}, but the files it scored ("
                                f"{scored['source'].get('file')}, {scored['reference'].get('file')}) hold the "
                                f"sentences of split {name!r} of its data set {dataset.name} ({src.name}, {tgt.name})",
                                split)


@checker("observed.test_set", audits=False, evidence="run")
def test_set(claim: Claim, ctx: CheckContext) -> Measurement:
    """The identity of the files the run's evaluations of ``split`` scored, against the paper's test set."""
    files = ctx.target
    paper_job(claim, files)
    split, dataset = claim.params["split"], claim.params["dataset"]
    records = scored_records(files, split, ("bleu.", "perplexity.", "f1."))
    if not records:
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no evaluation of the run's {split} split")
    paper = paper_test_set(dataset, split)
    found: list[str] = []
    for path, result in records:
        scored = check_scored(path, result)
        _of_its_split(files, path, result, scored)
        differences = paper.differences(scored) if paper is not None else ["no identity of the paper's set is known"]
        if differences:
            ref = scored["reference"]
            value = f"{ref.get('file')} ({ref.get('lines')} lines, content {str(ref.get('content_sha256'))[:12]})"
            return judge(claim, value, f"{path.name} scored {value}, not {claim.expected}: {'; '.join(differences)}",
                         _corpus_departs(files) or ([f"its data set {files.train.get('dataset')}"]
                                                    if files.train.get("dataset") != dataset else []))
        found.append(path.name)
    return judge(claim, paper.name, f"{', '.join(found)} scored {paper.name} (both sides by content)")


@checker("observed.hardware", audits=False, evidence="run")
def hardware(claim: Claim, ctx: CheckContext) -> Measurement:
    """The devices each session of the run trained on, as its record says (one machine with 8 P100 in the paper)."""
    files = ctx.target
    paper_job(claim, files)
    found = sessions(files)
    if not found:
        raise not_found(files, "the run's record of the devices it trained on", files.record_path)
    plan = (files.record or {}).get("update_plan") or {}
    for i, session in enumerate(found):
        devices = session.get("devices", 1)
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise Contradiction(f"{files.record_path}: field 'sessions[{i}].devices' is {devices!r}, not a number of "
                                "devices", devices)
    last = found[-1]
    if plan.get("world_size") is not None and last.get("devices") is not None and plan["world_size"] != last["devices"]:
        raise Contradiction(f"{files.record_path}: field 'sessions[{len(found) - 1}].devices' is {last['devices']}, "
                            f"field 'update_plan.world_size' {plan['world_size']}", last["devices"])
    seen = []
    for session in found:
        where = f"{session.get('devices', 1)} x {_device_name(session)}"
        if where not in seen:
            seen.append(where)
    value = "; ".join(seen)
    paper = all(on_paper_machine(s) for s in found)
    detail = f"{len(found)} session(s) on {value}"
    if paper:
        return Measurement(claim.expected, passed=True, detail=detail)
    return Measurement(value, passed=False, departs=True, detail=f"{detail}; the paper: {claim.expected}")


def on_paper_machine(session: dict[str, Any]) -> bool:
    """Whether a session trained on the paper's machine (Section 5.2): its 8 devices, the 8 P100 GPUs of one machine."""
    return session.get("devices") == 8 == _machine_gpus(session) and "P100" in str(session.get("hardware", "")) \
        and not trained_on_cpu(session)


def trained_on_cpu(session: dict[str, Any]) -> bool:
    """Whether a session trained on the CPU (its ``device``), whatever accelerators its machine had."""
    return str(session.get("device") or "").startswith("cpu")


def _machine_gpus(session: dict[str, Any]) -> int | None:
    """The GPUs of the machine a session's hardware line describes ("8x Tesla P100 ..."; None: no GPU named)."""
    count = str(session.get("hardware") or "").split("x ", 1)[0]
    return int(count) if count.isascii() and count.isdigit() else None


def _device_name(session: dict[str, Any]) -> str:
    """The device's name from a session's hardware line ("1x NVIDIA H100 80GB HBM3 (CUDA 12.8), torch ...",
    "CPU AMD EPYC (avx2 ...), 2 cores, ..."); a session that trained on the CPU of a machine whose line names
    its GPUs (the line describes the machine) trained on the CPU."""
    if not session.get("hardware"):
        return f"{session.get('device') or 'unknown'} (the session records no hardware)"
    text = str(session["hardware"])
    if trained_on_cpu(session) and not text.startswith("CPU"):
        return f"CPU (device 'cpu' on a machine of {text.split(' (')[0]}, unused)"
    if "x " in text.split(" (")[0]:
        name, gpus = text.split("x ", 1)[1].split(" (")[0], _machine_gpus(session)
        devices = session.get("devices", 1)
        # one machine holds the devices the line counts: more devices than that were several machines
        return name if gpus is None or devices <= gpus else f"{name} (on machines of {gpus}: not one machine)"
    return text.split(" (")[0]
