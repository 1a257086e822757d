"""Bootstrap intervals: ``repro bleu --confidence`` agrees with sacreBLEU's own CLI to the digit, the
paper protocol and EVALB F1 use the same estimator, and bad settings are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repro.cli import main
from repro.eval.bootstrap import evalb_interval, f1_from_totals, multi_bleu_from_totals, percentile_interval
from repro.eval.bleu import multi_bleu, multi_bleu_stats
from repro.eval.evalb import SentenceResult, Summary

REFS = Path("/work/shared/data/multi30k/test_2016_flickr.de")


def corpus(tmp_path: Path, n: int = 150) -> tuple[Path, Path]:
    """Real German references and hypotheses that drop every fourth word (a BLEU near 27)."""
    if REFS.is_file():
        refs = REFS.read_text(encoding="utf-8").splitlines()[:n]
    else:  # a synthetic stand-in where the shared data is absent
        refs = [f"ein Hund {i} läuft schnell über die grüne Wiese am Fluss {i % 7}" for i in range(n)]
    hyps = [" ".join(w for j, w in enumerate(r.split(), 1) if (j + i) % 4) for i, r in enumerate(refs, 1)]
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    return hyp, ref


@pytest.mark.parametrize("seed", ["12345", "7"])
def test_sacrebleu_interval_equals_sacrebleus_cli(tmp_path, capsys, monkeypatch, seed):
    hyp, ref = corpus(tmp_path)
    monkeypatch.setenv("SACREBLEU_SEED", seed)
    cli = subprocess.run([sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "--confidence", "-w", "4"],
                         capture_output=True, text=True, check=True, env={"SACREBLEU_SEED": seed, "PATH": "/usr/bin"})
    theirs = json.loads(cli.stdout)
    assert main(["bleu", str(hyp), str(ref), "--json", "--confidence"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours["resamples"] == 1000 and ours["seed"] == seed
    assert round(ours["score"], 4) == theirs["score"]
    assert round(ours["confidence_mean"], 4) == theirs["confidence_mean"]
    low, high = ours["ci95"]
    assert round(0.5 * (high - low), 4) == theirs["confidence_var"]
    assert round(0.5 * (high + low), 4) == theirs["confidence_mean"]


def test_without_the_flag_the_output_is_unchanged(tmp_path, capsys):
    hyp, ref = corpus(tmp_path, 20)
    assert main(["bleu", str(hyp), str(ref), "--json"]) == 0
    assert not {"ci95", "confidence_mean", "resamples", "seed"} & set(json.loads(capsys.readouterr().out))


def test_paper_protocol_interval_surrounds_its_score(tmp_path, capsys):
    hyp, ref = corpus(tmp_path)
    assert main(["bleu", str(hyp), str(ref), "--json", "--confidence", "--protocol", "paper",
                 "--confidence-n", "200"]) == 0
    out = json.loads(capsys.readouterr().out)
    low, high = out["ci95"]
    assert out["resamples"] == 200 and low < out["score"] < high and 0.5 < high - low < 10


def test_multi_bleu_from_totals_equals_multi_bleu():
    hyps, refs = ["a b c d e", "a b x d", "q"], ["a b c d f", "a b c d", "q r"]
    s = multi_bleu_stats(hyps, [refs])
    assert multi_bleu_from_totals([*s.correct, *s.total, s.hyp_len, s.ref_len]) == pytest.approx(
        multi_bleu(hyps, [refs])[0])


def test_percentile_interval_is_sacrebleus_rule():
    """The 2.5/97.5 percentiles of 1000 sorted scores are indices 25 and 974 (n // 40, n - n // 40 - 1)."""
    scores = list(range(1000))
    iv = percentile_interval(scores[::-1], 1000, "1")
    assert iv.mean == pytest.approx(499.5) and iv.half_width == pytest.approx(0.5 * (974 - 25))


def test_evalb_interval_surrounds_f1():
    rows = [SentenceResult(i, 10, 0, matched=6 + i % 4, gold_brackets=10, test_brackets=9 + i % 3) for i in range(80)]
    rows.append(SentenceResult(81, 10, 2))  # a skipped sentence counts nothing
    f1 = Summary.of(rows).f1
    assert f1_from_totals([sum(r.matched for r in rows), sum(r.gold_brackets for r in rows),
                           sum(r.test_brackets for r in rows)]) == pytest.approx(f1)
    low, high = evalb_interval(rows, 500).ci95
    assert low < f1 < high and high - low < 10


def test_too_few_resamples_exit_2(tmp_path, capsys):
    hyp, ref = corpus(tmp_path, 5)
    assert main(["bleu", str(hyp), str(ref), "--confidence", "--confidence-n", "1"]) == 2
    assert "--confidence-n" in capsys.readouterr().err


def test_perplexity_interval_resamples_sentences():
    """exp(sum NLL / sum tokens) of each of the same resamples as sacreBLEU's, the 2.5-97.5 percentiles'
    half spread; the point estimate lies inside; a NaN is refused."""
    import math

    import numpy as np

    from repro.errors import DataError
    from repro.eval.bootstrap import perplexity_interval, resample_indices

    rng = np.random.default_rng(3)
    sentences = [(float(rng.uniform(5, 60)), int(rng.integers(3, 30))) for _ in range(200)]
    interval = perplexity_interval(sentences, resamples=500, seed="7")
    point = math.exp(sum(n for n, _ in sentences) / sum(t for _, t in sentences))
    assert interval.ci95[0] < point < interval.ci95[1]
    idx = resample_indices(len(sentences), 500, "7")
    table = np.asarray(sentences, dtype="float32")
    by_hand = sorted(math.exp(float(table[i, 0].sum()) / float(table[i, 1].sum())) for i in idx)
    assert interval.half_width == pytest.approx(0.5 * (by_hand[500 - 12 - 1] - by_hand[12]), rel=1e-5)
    with pytest.raises(DataError, match="not finite"):
        perplexity_interval([(float("nan"), 3), (1.0, 2)])
