"""What the jobs' measurements store (:mod:`repro.measures`): which BLEU protocol each named
measurement stores as its value, and that a value which is not a finite number is never stored as
a measurement. The measurement code runs as a job calls it (:func:`repro.measures.measure`, then
:func:`repro.measures.recording.record`); only the translation it scores is given (two protocols
with different scores), so that the value stored tells which protocol it came from."""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch

import repro.measures.translation_quality as quality
from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.decode.settings import TRANSLATION
from repro.decode.translate import search_of
from repro.eval.bleu import paper_bleu, sacre_bleu
from repro.eval.translation import BleuEvaluation
from repro.measures.measure_registry import Measured, Request, Trained, measure
from repro.measures.recording import record
from repro.model.precision import Precision
from repro.results import ResultStore
from repro.runtime import Runtime

HYPOTHESES = ["The house is small .", "the cat sees a Dog", "Ein Haus-Boot läuft ."]
REFERENCES = ["the house is small .", "the cat sees the dog .", "Ein Hausboot läuft ."]


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The logger ``name`` silent for the block."""
    logger = logging.getLogger(name)
    before, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = before


def _scored() -> BleuEvaluation:
    return BleuEvaluation("test", sacre_bleu(HYPOTHESES, REFERENCES), paper_bleu(HYPOTHESES, REFERENCES), HYPOTHESES,
                          0.0, len(HYPOTHESES), settings=search_of(TRANSLATION), references=REFERENCES)


@checker("run.bleu_stored")
def bleu_stored(claim: Claim, ctx: CheckContext) -> Measurement:
    """Each BLEU measurement of the catalogue stores its own protocol's score: the paper's
    (``bleu.tokenized-compound-split``: tokenized, compound-split multi-bleu) and sacreBLEU's
    (``bleu.sacrebleu``: detokenized), measured by the registered code on one scored translation
    whose two scores differ, as a job's second rank measures it (no bootstrap). Measured: the
    number of measurements storing another value or signature than their protocol's."""
    own(ctx)
    scored = _scored()
    want = {"bleu.tokenized-compound-split": scored.paper, "bleu.sacrebleu": scored.sacrebleu}
    if round(scored.paper.score, 2) == round(scored.sacrebleu.score, 2):
        return Measurement(None, False, "the two protocols score the probe alike: nothing told apart")
    trained = Trained(model=None, vocab=None, dataset=SimpleNamespace(name="probe", tgt_lang="de", tokenized=False),
                      runtime=Runtime(torch.device("cpu"), Precision("fp32", "probe"), 2, 1, 1),
                      search=SimpleNamespace(beam_size=4, alpha=0.6, max_len_offset=50), run_dir=Path("."))
    wrong, rows = [], []
    with mock.patch.object(quality, "evaluate_bleu", lambda *a, **k: scored):
        for name, result in want.items():
            got = measure(trained, Request("probe", name, "test"))
            rows.append(f"{name}: {got.value} ({got.bleu_signature})")
            if got.value != round(result.score, 2) or got.bleu_signature != result.signature:
                wrong.append(f"{name} stored {got.value}, its protocol scores {result.score:.2f}")
    return Measurement(len(wrong), detail="; ".join(rows + wrong))


@checker("run.nonfinite_stored")
def nonfinite_stored(claim: Claim, ctx: CheckContext) -> Measurement:
    """A measurement whose value is not a finite number (inf, -inf, NaN: a diverged model's
    perplexity) is stored by :func:`repro.measures.recording.record` as a failure, never as a
    measured value; a finite one as a measured value. Measured: the number stored otherwise."""
    own(ctx)
    wrong, rows = [], []
    with tempfile.TemporaryDirectory(prefix="repro-nonfinite-") as tmp:
        store = ResultStore(Path(tmp))
        for i, value in enumerate((math.inf, -math.inf, math.nan, 4.25)):
            request = Request(f"probe.{i}", "perplexity.wordpiece", "test")
            with _quiet("repro.measures.recording"):   # its warning is what a job logs; the check reads the record
                record(store, request, Measured(value, "PPL", "probe", "probe", 3), config={}, scale="local")
            stored = next(r for r in store.read_all() if r.claim_id == request.result_id)
            failed = stored.status == "fail"
            rows.append(f"{value}: {'failure' if failed else 'measured'}")
            if failed == math.isfinite(value):
                wrong.append(str(value))
    return Measurement(len(wrong), detail="stored as " + "; ".join(rows))
