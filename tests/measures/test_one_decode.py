"""A job that asks for both BLEU protocols decodes its split once (Section 6.1's search is the costly
part of an evaluation); each protocol scores that one decode, and a new model or split decodes anew."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from repro.decode.settings import TRANSLATION
from repro.eval.bleu import paper_bleu
from repro.eval.translation import BleuEvaluation
from repro.measures import Request, Trained, measure
from repro.measures import translation_quality
from repro.runtime import Runtime

HYPS = ["ein Hund läuft über die Wiese .", "zwei Männer spielen Fußball ."]
REFS = ["ein Hund rennt über die Wiese .", "zwei Männer spielen Fußball ."]


@pytest.fixture
def decodes(monkeypatch, tmp_path: Path) -> list[tuple]:
    made: list[tuple] = []

    def fake_decode(model, vocab, dataset, split, settings, *, output=None, runtime=None):
        made.append((model, split, settings))
        import sacrebleu
        sb = sacrebleu.corpus_bleu(HYPS, [REFS])
        score = SimpleNamespace(score=sb.score, signature="sacrebleu-test", to_dict=lambda: {"score": sb.score})
        paper = paper_bleu(HYPS, REFS, lang="de")
        return BleuEvaluation(split, score, paper, list(HYPS), 1.0, len(HYPS), {"search": "beam"}, list(REFS))

    monkeypatch.setattr(translation_quality, "evaluate_bleu", fake_decode)
    monkeypatch.setattr(translation_quality, "scored_files", lambda *a, **k: {})
    monkeypatch.setattr(translation_quality, "_search", lambda bleu: "beam search")
    return made


def _trained(tmp_path: Path, model: object) -> Trained:
    dataset = SimpleNamespace(name="probe", tgt_lang="de", tokenized=False)
    return Trained(model, None, dataset, Runtime.resolve("cpu", "fp32"), TRANSLATION, tmp_path)


def test_both_protocols_score_one_decode(decodes, tmp_path: Path) -> None:
    trained = _trained(tmp_path, object())
    paper = measure(trained, Request("a", "bleu.tokenized-compound-split", "test"))
    sacre = measure(trained, Request("b", "bleu.sacrebleu", "test"))
    assert len(decodes) == 1, decodes
    assert paper.raw is sacre.raw
    assert sacre.extra["paper_protocol_bleu"] == paper.value


def test_another_split_or_model_decodes_again(decodes, tmp_path: Path) -> None:
    trained = _trained(tmp_path, object())
    measure(trained, Request("a", "bleu.sacrebleu", "test"))
    measure(trained, Request("b", "bleu.sacrebleu", "dev"))
    assert [d[1] for d in decodes] == ["test", "dev"]
    other = _trained(tmp_path, object())
    measure(other, Request("c", "bleu.sacrebleu", "test"))
    assert len(decodes) == 3


def test_another_search_decodes_again(decodes, tmp_path: Path) -> None:
    trained = _trained(tmp_path, object())
    measure(trained, Request("a", "bleu.sacrebleu", "test"))
    trained.search = TRANSLATION.replace(beam_size=1)
    measure(trained, Request("b", "bleu.tokenized-compound-split", "test"))
    assert len(decodes) == 2
