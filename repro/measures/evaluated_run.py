"""The records ``repro evaluate`` keeps in the run whose checkpoint it evaluated (Section 6.1).

A checkpoint of a run (``RUN/checkpoints/step_*.pt``, or an averaged file ``RUN/average_last*.pt``
beside ``RUN/checkpoints/``) is evaluated as the jobs evaluate theirs, and the evaluation is recorded
as theirs are, in ``RUN/evaluations/`` (:func:`repro.measures.recording.keep_in_run`), one result
record per measurement, all put in place together or none: ``evaluate.<split>.<measure>.json`` (``bleu.tokenized-compound-split``,
``bleu.sacrebleu``, ``perplexity.wordpiece``). Each record holds, in ``provenance.extra``, the
checkpoint evaluated (``evaluated_checkpoint``, ``evaluated_sha256``), the checkpoints averaged into it
(``averaged_from``, ``averaged``: name, update, SHA-256 and time written of each), the search the
decode ran (``decode``: :func:`repro.decode.translate.search_of`), the files scored and the translations
(``test_set``: each by name, lines and hashes; ``sentences``: how many were translated); beside them the
protocol's BLEU signature, the score, the commit, the hardware and the run's recipe hash (the recipe the
checkpoint holds, whatever the search flags asked: those show in ``decode``). Evaluating the run so
again keeps the earlier record under ``evaluations/earlier/``. ``repro check --run RUN`` reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.eval.perplexity import Perplexity
from repro.eval.translation import BleuEvaluation
from repro.measures.measure_registry import Request, Trained, how_taken
from repro.measures.recording import keep_all_in_run, result_of
from repro.measures.translation_quality import paper_bleu_of, perplexity_of, sacrebleu_of
from repro.train.run_record import RUN_RECORD

#: The measurements of one ``repro evaluate``, by the function that scores what it translated or passed.
BLEU_MEASURES = {"bleu.tokenized-compound-split": paper_bleu_of, "bleu.sacrebleu": sacrebleu_of}
PERPLEXITY = "perplexity.wordpiece"


def run_folder(checkpoint: str | Path) -> Path | None:
    """The run folder a checkpoint belongs to: ``RUN`` of ``RUN/checkpoints/<file>``, or the folder of a
    file beside a run's ``checkpoints/`` or ``run.json``; None for a file of no run."""
    path = Path(checkpoint).resolve()
    folders = [path.parent.parent] if path.parent.name == "checkpoints" else []
    for folder in (*folders, path.parent):
        if (folder / RUN_RECORD).is_file() or (folder / "checkpoints").is_dir():
            return folder
    return None


def hypotheses_file(run_dir: Path, split: str, lang: str) -> Path:
    """Where ``repro evaluate`` writes the translations it scored when not told where: in the run folder."""
    return run_dir / f"hypotheses.evaluate.{split}.{lang}"


def record_id(split: str, measure: str) -> str:
    return f"evaluate.{split}.{measure}"


def keep_evaluation(trained: Trained, state: dict[str, Any], bleu: BleuEvaluation | None = None,
                    ppl: tuple[str, Perplexity] | None = None) -> list[Path]:
    """Record in ``trained.run_dir`` what one ``repro evaluate`` measured of ``trained`` (loaded from
    ``state``): each protocol's BLEU of the decode ``bleu`` and the perplexity ``ppl`` (its split and
    pass); returns the records' paths."""
    recipe = dict(state.get("recipe") or {})
    train = dict(recipe.get("train") or state.get("train_config") or {})
    name = trained.checkpoint.name if trained.checkpoint is not None else "the checkpoint"
    scale = (f"repro evaluate: {name} after {state.get('step', 0)} of {train.get('max_steps', '?')} updates; "
             "not a job's evaluation at its scale")
    common = {"checkpoint": str(trained.checkpoint), "run_dir": str(trained.run_dir), "steps": state.get("step"),
              "devices": 1, "device": str(trained.runtime.device), **trained.runtime.precision.provenance()}
    found = []
    if bleu is not None:
        for measure, score in BLEU_MEASURES.items():
            request = Request(record_id(bleu.split, measure), measure, bleu.split)
            found.append((request, score(trained, request, bleu)))
    if ppl is not None:
        request = Request(record_id(ppl[0], PERPLEXITY), PERPLEXITY, ppl[0])
        found.append((request, perplexity_of(trained, request, ppl[1])))
    return keep_all_in_run(trained.run_dir, [result_of(request, how_taken(trained, request, measured), config=train,
                                                       decode=dict(recipe.get("decode") or {}), scale=scale,
                                                       provenance=common) for request, measured in found])
