"""Section 6.1 observed on a run's own records: its checkpoints' spacing, the search and the BLEU protocol
of its evaluations, and its results against the paper's figures for the job it stands for
(``repro check --run``, basis ``run``); the checkpoints its evaluation averaged: :mod:`repro.checks.observed_average`.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from repro.checks.observed_data import check_scored, on_paper_machine, translations_file
from repro.checks.observed_records import kept_steps, own_evaluations, written_at_end
from repro.checks.observed_records import sessions as all_sessions
from repro.checks.registry import checker
from repro.checks.step_time import normalised
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.measure_names import RUN_MEASURES
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.errors import DataError
from repro.eval.bleu import dataset_language, read_lines, score
from repro.measures.run_dev import DEV_REQUEST
from repro.observed.gate import not_counted
from repro.observed.history import changes, parts
from repro.observed.judge import judge, paper_job
from repro.recipes import PAPER_STEP_SECONDS
from repro.results.normalise import NotComparable


#: The BLEU protocol of each BLEU measurement (:func:`repro.eval.bleu.score`; its signature begins ``protocol:<it>|``).
BLEU_PROTOCOLS = {"bleu.tokenized-compound-split": "paper", "bleu.sacrebleu": "sacrebleu"}


@checker("observed.checkpoints", audits=False, evidence="run")
def checkpoints(claim: Claim, ctx: CheckContext) -> Measurement:
    """The spacing of the run's kept checkpoints (the median gap in updates between consecutive ones, the last
    left out where the run's last update lies off its spacing), in minutes at the paper's step time for the
    model's size (Section 5.2: 0.4 s base, 1.0 s big); they must lie on the recipe's spacing. One kept
    checkpoint shows no spacing: it needs another run, whatever the recipe asked."""
    files = ctx.target
    job = paper_job(claim, files)
    steps = kept_steps(files)
    every, minutes = int(files.train.get("checkpoint_every_steps") or 0), float(files.train.get("checkpoint_every_minutes") or 0)
    finite(minutes, f"{files.path}: the run's recipe's checkpoint_every_minutes")
    final, found = steps[-1], parts(files)
    for step in steps[:-1]:   # each on the spacing of the part of the run that wrote it (a resume may change it)
        train = next((part.train for part in reversed(found) if part.first <= step), files.train)
        spacing = int(train.get("checkpoint_every_steps") or 0)
        if spacing and not train.get("checkpoint_every_minutes") and step % spacing:
            raise Contradiction(f"{files.path / 'checkpoints'}: step_{step:08d}.pt lies off the run's spacing "
                                f"(checkpoint_every_steps {spacing}; the last update {final})", step)
    asked = (f"checkpoint_every_steps {every}" if every else f"checkpoint_every_minutes {minutes:g}" if minutes
             else "no checkpoint but the last")
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    if every and len(gaps) > 1 and final % every:
        gaps = gaps[:-1]   # the run's last update, written at its end off the spacing
    if not gaps:
        raise NotRun(f"needs another run: {files.path / 'checkpoints'} keeps one checkpoint (update {final}): no interval "
                     f"between checkpoints to read (the run's recipe asks {asked})")
    paper_s = PAPER_STEP_SECONDS["big" if job is not None and job.model == "big" else "base"]
    gap = median(gaps)
    value = round(gap * paper_s / 60, 4)
    detail = (f"kept checkpoints {gap:g} updates apart (updates {', '.join(map(str, steps[-6:]))}) = {value:g} min at "
              f"the paper's {paper_s} s per update; the run's recipe asks {asked}")
    changed = changes(files, ("checkpoint_every_steps", "checkpoint_every_minutes"))
    if changed:
        return Measurement(value, passed=False, departs=True, detail=f"{detail}; {'; '.join(changed)}")
    on_paper = every and not minutes and claim.within(round(every * paper_s / 60, 4))
    return judge(claim, value, detail, [] if on_paper else [asked])


#: The settings of the search an evaluation records that an older repro recorded too (``stop`` came later).
RECORDED_ALWAYS = ("beam_size", "alpha", "max_len_offset")


def _searched(path: Path, result: Any, name: str) -> Any:
    """The setting ``name`` of the search an evaluation's decode ran (``provenance.extra.decode``)."""
    decode = result.provenance.extra.get("decode")
    if decode is None or (name not in decode and name not in RECORDED_ALWAYS):
        raise NotRun(f"needs another run: {path} does not record the {name} of its search (an evaluation by an older "
                     "repro)")
    if name not in decode:
        raise Contradiction(f"{path}: field 'provenance.extra.decode' records no {name} (it holds "
                            f"{', '.join(sorted(decode)) or 'nothing'})", None)
    value = decode[name]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        finite(value, f"{path}: field 'provenance.extra.decode.{name}'")
    return value


def _one_search(path: Path, decode: dict[str, Any]) -> None:
    """A decode's record names one search (:func:`repro.decode.translate.search_of`): a greedy search keeps one
    hypothesis and applies no length penalty; a beam search applies one."""
    kind = decode.get("search")
    if kind == "greedy" and (decode.get("beam_size") != 1 or decode.get("alpha") is not None):
        raise Contradiction(f"{path}: field 'provenance.extra.decode.search' is 'greedy', but the record says beam_size "
                            f"{decode.get('beam_size')!r} and alpha {decode.get('alpha')!r} (a greedy search: 1 and none)",
                            decode.get("beam_size"))
    if kind == "beam" and "alpha" in decode and decode["alpha"] is None:
        raise Contradiction(f"{path}: field 'provenance.extra.decode.search' is 'beam', but field "
                            "'provenance.extra.decode.alpha' is null (a beam search applies a length penalty)", None)


@checker("observed.search", audits=False, evidence="run")
def search(claim: Claim, ctx: CheckContext) -> Measurement:
    """A setting of the search (``setting``: beam_size, alpha, max_len_offset or stop) the decode of every
    evaluation that searched (BLEU, F1) ran, as it recorded it (:func:`repro.decode.translate.search_of`),
    which must be the run's recipe's; a greedy search has no length penalty (alpha None) and fails it."""
    files = ctx.target
    paper_job(claim, files)
    name = claim.params["setting"]
    records = own_evaluations(files, lambda r: str(r.provenance.extra.get("measure", "")).startswith(("bleu.", "f1.")))
    if not records:
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no evaluation that searched (BLEU or F1)")
    asked = (files.recipe.get("decode") or {}).get(name)
    values: dict[Any, Path] = {}
    for path, result in records:
        _one_search(path, result.provenance.extra.get("decode") or {})
        value = _searched(path, result, name)
        if asked is not None and value != asked:
            said = f"{value!r}" + (f" (a greedy search, which applies no {name})" if value is None else "")
            raise Contradiction(f"{path}: field 'provenance.extra.decode.{name}' is {said}, but the run's "
                                f"recipe searches with {name} {asked!r}", value)
        values.setdefault(value, path)
    if len(values) > 1:
        raise Contradiction(f"{files.path / 'evaluations'}: the run's evaluations searched with {name} "
                            f"{', '.join(f'{v!r} ({p.name})' for v, p in values.items())}: more than one", list(values))
    [value] = values
    if name == "max_len_offset" and isinstance(value, int):
        for path, result in records:   # translations as decoded (a parser's trees are repaired after: not these)
            if str(result.provenance.extra.get("measure", "")).startswith("bleu."):
                _within_output_limit(files, path, result, value)
    where = ", ".join(p.name for p, _ in records)
    if value is None:
        return Measurement(None, passed=False, detail=f"{where}: a greedy search, which applies no {name}")
    return judge(claim, value, f"{name} {value} in {where}", [f"{name} {asked}"] if asked is not None else [])


def _within_output_limit(files: Any, path: Path, result: Any, offset: int) -> None:
    """The translations an evaluation wrote must fit the output limit it records (Section 6.1: input length +
    ``offset`` ids): a line of n ids decodes to at most n x (the vocabulary's longest piece + a space) characters,
    n at most the source's ids + ``offset`` (checked where the translations, source and vocabulary are here)."""
    scored = result.provenance.extra.get("test_set") or {}
    if not isinstance(scored.get("hypotheses"), dict) or not isinstance(scored.get("source"), dict):
        return
    hyps, src, vocab = (translations_file(path, scored["hypotheses"]), Path(str(scored["source"].get("path") or "")),
                        files.path / "vocab.json")
    if not (hyps.is_file() and src.is_file() and vocab.is_file()):
        return
    pieces = SharedVocab.load(vocab)
    widest = max(len(piece) for piece in pieces.tokenizer.get_vocab()) + 1
    sources, outputs = read_lines(src), read_lines(hyps)
    for line, (source, output) in enumerate(zip(sources, outputs), start=1):
        limit = (len(pieces.encode(source)) + offset) * widest
        if len(output) > limit:
            raise Contradiction(f"{hyps}:{line}: a translation of {len(output)} characters, more than the {limit} that "
                                f"input length + {offset} ids decode to at most ({path}: field "
                                "'provenance.extra.decode.max_len_offset'): not searched with that output limit",
                                len(output))


#: The decimals a BLEU record keeps (:mod:`repro.measures.translation_quality` rounds its scores to 2).
BLEU_ROUNDING = 0.01


def _rescored(files: Any, path: Any, result: Any) -> float | None:
    """The BLEU of an evaluation recomputed from the translations it wrote and the reference it scored
    (None when they are not on this machine)."""
    scored = check_scored(path, result)
    if not isinstance(scored.get("hypotheses"), dict):
        return None
    hyps, ref = translations_file(path, scored["hypotheses"]), Path(str(scored["reference"].get("path") or ""))
    if not hyps.is_file() or not ref.is_file():   # another machine's run: not recomputed here
        return None
    hypotheses, references = read_lines(hyps), read_lines(ref)
    if BLEU_PROTOCOLS.get(str(result.provenance.extra.get("measure"))) == "sacrebleu":
        return score(hypotheses, references, "sacrebleu").score
    try:
        dataset = get_dataset(str(files.train.get("dataset")), resolve_data_dir(files.train.get("data_dir")))
    except DataError:   # the data set is not registered or not on this machine: its language is unknown
        return None
    return score(hypotheses, references, "paper", lang=dataset_language(dataset), refs_tokenized=dataset.tokenized).score


def _named(path: Path, result: Any) -> None:
    """A BLEU record must say which protocol computed its number, three times alike: its measurement
    (``provenance.extra.measure``), its signature (``provenance.bleu_signature``, which the scorer begins
    with ``protocol:<it>|``) and its unit (sacreBLEU's names sacreBLEU; the paper's does not)."""
    measure, signature = str(result.provenance.extra.get("measure")), str(result.provenance.bleu_signature or "")
    if measure not in BLEU_PROTOCOLS:
        raise Contradiction(f"{path}: field 'provenance.extra.measure' is {measure!r}, no BLEU protocol repro computes "
                            f"({', '.join(BLEU_PROTOCOLS)})", measure)
    protocol = BLEU_PROTOCOLS[measure]
    if not signature.startswith(f"protocol:{protocol}|"):
        said = repr(signature.split("|")[0]) if signature else "nothing (no signature)"
        raise Contradiction(f"{path}: field 'provenance.extra.measure' is {measure!r}, but its BLEU was computed "
                            f"as field 'provenance.bleu_signature' says: {said}", measure)
    if result.unit is not None and ("sacrebleu" in result.unit.lower()) != (protocol == "sacrebleu"):
        raise Contradiction(f"{path}: field 'unit' is {result.unit!r}, but the record's BLEU is {measure}", result.unit)


def _one_decode_scored_twice(records: list[tuple[Path, Any]]) -> None:
    """Where the run's records score the same translations under both protocols, each keeps the other's
    number: they must agree (a number of one protocol filed as the other's fails even where the
    translations are not on this machine to be rescored)."""
    by_translations: dict[Any, dict[str, tuple[Path, Any]]] = {}
    for path, result in records:
        hyps = (result.provenance.extra.get("test_set") or {}).get("hypotheses")
        if isinstance(hyps, dict) and hyps.get("sha256"):
            by_translations.setdefault(hyps["sha256"], {})[str(result.provenance.extra.get("measure"))] = (path, result)
    for pair in by_translations.values():
        if len(pair) < 2:
            continue
        (paper_path, paper), (sacre_path, sacre) = pair["bleu.tokenized-compound-split"], pair["bleu.sacrebleu"]
        for path, result, kept, other_path, other in (
                (paper_path, paper, "provenance.extra.sacrebleu", sacre_path, sacre),
                (sacre_path, sacre, "extra.paper_protocol_bleu", paper_path, paper)):
            where, _, key = kept.rpartition(".")
            value = (result.provenance.extra if where == "provenance.extra" else result.extra).get(key)
            if value is not None and value != other.measured:
                raise Contradiction(f"{path}: field '{kept}' is {value!r}, but {other_path.name}, which scored the same "
                                    f"translations, measured {other.measured!r}", value)


@checker("observed.protocol", audits=False, evidence="run")
def protocol(claim: Claim, ctx: CheckContext) -> Measurement:
    """The BLEU protocol of the run's BLEU evaluations, each recomputed from its translations and reference."""
    files = ctx.target
    paper_job(claim, files)
    records = own_evaluations(files, lambda r: str(r.provenance.extra.get("measure", "")).startswith("bleu."))
    if not records:
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no BLEU evaluation")
    rescored = []
    for path, result in records:
        finite(result.measured, f"{path}: field 'measured'")
        _named(path, result)
        again = _rescored(files, path, result)
        # the record keeps BLEU rounded to 2 decimals: the score recomputed lies within half its last digit
        if again is not None and abs(again - float(result.measured)) > BLEU_ROUNDING / 2 + 1e-9:
            raise Contradiction(f"{path}: field 'measured' is {result.measured!r}, but its translations scored against "
                                f"its reference give {again:.2f}", result.measured)
        rescored += [path.name] if again is not None else []
    _one_decode_scored_twice(records)
    if not rescored:   # the labels agree, but no number was recomputed: the protocol is only what they say
        raise NotRun(f"needs another run: no BLEU of the run could be recomputed on this machine (the translations and "
                     f"reference {', '.join(p.name for p, _ in records)} scored are not here, or their data set is not "
                     "registered): its protocol would rest on its records' labels alone")
    measures = sorted({str(r.provenance.extra.get("measure")) for _, r in records})
    value = claim.expected if claim.expected in measures else measures[0]
    scores = ", ".join(f"{r.claim_id} = {r.measured} ({r.provenance.extra.get('measure')})" for _, r in records)
    return judge(claim, value, f"the run's BLEU: {scores}; recomputed from their translations: {', '.join(rescored)}",
                 [f"its job reports {value}"])


def _record_for(files: Any, claim_id: str, measure: str | None, split: str | None) -> tuple[Any, Any] | None:
    """The run's evaluation of ``claim_id``: its own record, else one of the same kind of measurement of
    its model (BLEU, perplexity, F1) on the same split, measured as the claim says where one is, or a step
    time measured as the claim's."""
    if claim_id in files.evaluations:
        return files.evaluations[claim_id]
    family = str(measure) if measure in RUN_MEASURES else str(measure).split(".")[0] + "."
    found = [(path, result) for path, result in files.evaluations.values()
             if str(result.provenance.extra.get("measure", "")).startswith(family)
             and result.provenance.extra.get("split") == split and result.claim_id != DEV_REQUEST.result_id]
    # the one measured as the claim says, where there is one (a repro evaluate records both BLEU protocols)
    return next((f for f in found if f[1].provenance.extra.get("measure") == measure), found[0] if found else None)


def same_step_time(files: Any, path: Path, result: Any) -> None:
    """A step time an evaluation stored must be the one the run's record holds for its last session."""
    stored = (result.extra.get("step_time") or {}).get("steady_s_per_update")
    sessions = all_sessions(files)
    own = ((sessions[-1] if sessions else {}).get("step_time") or {}).get("steady_s_per_update")
    if stored is not None and own is not None and stored != own:
        raise Contradiction(f"{path}: field 'extra.step_time.steady_s_per_update' is {stored!r}, but "
                            f"{files.record_path} records {own!r} for the run's last session", stored)


def _own_step_time(claim: Claim, files: Any) -> Measurement:
    """Section 5.2's step time as the run's record has it (no evaluation stored one): the steady-state
    seconds per update of its longest session, compared only on the paper's hardware and recipe."""
    for path, result in own_evaluations(files, lambda r: r.provenance.extra.get("measure") in RUN_MEASURES):
        same_step_time(files, path, result)
    sessions = [s for s in all_sessions(files) if (s.get("step_time") or {}).get("steady_updates")]
    if not sessions:
        raise written_at_end(files, f"{files.record_path} holds no session with a steady update")
    longest = max(sessions, key=lambda s: s["step_time"]["steady_updates"])
    seconds = longest["step_time"].get("steady_s_per_update")
    finite(seconds, f"{files.record_path}: field 'sessions[].step_time.steady_s_per_update'")
    text = (f"{seconds} s per steady update (median of {longest['step_time']['steady_updates']}) on "
            f"{longest.get('devices', 1)} device(s), {longest.get('hardware')}")
    if on_paper_machine(longest) and files.paper is not None and files.recipe_hash == files.paper.recipe_hash:
        return judge(claim, seconds, text)
    return Measurement(seconds, passed=False, departs=True,
                       detail=f"{text}; not comparable with the paper's 8 P100: the run is not its job's recipe on "
                              "that hardware and recorded no measured peak to normalise by")


@checker("observed.metric", audits=False, evidence="run")
def metric(claim: Claim, ctx: CheckContext) -> Measurement:
    """A figure of the paper the run's job stands for (Table 2's BLEU, a row of Table 3, Table 4's F1,
    Section 5.2's step time), read off the run's own evaluation of it, and counted only when the run is
    the claim's experiment as the paper specifies it (:mod:`repro.observed.gate`); else it departs,
    saying what differs."""
    files = ctx.target
    measure, split = claim.params.get("measure"), claim.params.get("split")
    found = _record_for(files, claim.id, measure, split)
    if found is None:
        if measure in RUN_MEASURES:
            return _own_step_time(claim, files)
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no evaluation measured as {measure}"
                     + (f" on the {split} split" if split else ""))
    path, result = found
    finite(result.measured, f"{path}: field 'measured'")
    own_evaluations(files, lambda r: r is result)   # of this run
    if measure in RUN_MEASURES:
        same_step_time(files, path, result)
    text = f"{path.name}: {result.measured} {result.unit or ''} on {result.provenance.dataset}".replace("  ", " ")
    why = not_counted(claim, result)
    if why:
        departs = files.paper is None or result.provenance.config_hash != files.paper.recipe_hash
        return Measurement(result.measured, passed=False, departs=departs,
                           detail=f"{text}; not counted for the paper: {why}")
    if not result.provenance.scale.startswith("cluster"):
        return Measurement(result.measured, passed=False, departs=True,
                           detail=f"{text}; the run is the job's recipe but did not run it to its end ({result.provenance.scale})")
    if measure in RUN_MEASURES:
        try:
            value, how = normalised(result)
        except NotComparable as err:
            return Measurement(result.measured, passed=False, departs=True,
                               detail=f"{text}; not comparable with the paper's 8 P100: {err}")
        return judge(claim, round(value, 4), f"{text}: {how}")
    return judge(claim, result.measured, text)
