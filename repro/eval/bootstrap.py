"""Bootstrap confidence intervals for corpus metrics (BLEU, EVALB F1), as sacreBLEU computes them.

Koehn (2004)'s bootstrap over sentences, exactly as ``sacrebleu --confidence`` does it
(``sacrebleu.significance._bootstrap_resample`` and ``Score.estimate_ci``): draw
``resamples`` index vectors at once from ``numpy.random.default_rng(seed)`` with
``seed = $SACREBLEU_SEED`` (default 12345), re-score each resample from the summed
per-sentence statistics, sort the scores, and take the 2.5th and 97.5th percentiles
(indices ``n // 40`` and ``n - n // 40 - 1``). sacreBLEU prints ``μ = mean ± h`` where ``mean`` is
the resamples' mean and ``h`` half the percentile spread; the interval here is
``[mean - h, mean + h]``, so the figures agree with its CLI to the digit.

The same resampling gives per-wordpiece perplexity an interval (:func:`perplexity_interval`).
The paper reports single numbers (Table 2, Section 6.1, Table 4); the interval is what lets the
report say whether a measurement differs from the paper's figure by more than its own noise.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from repro.environment import env_int
from repro.errors import DataError, UsageError
from repro.eval.bleu import multi_bleu_stats
from repro.eval.evalb import SentenceResult
from repro.machine_memory import too_large

#: sacreBLEU's default number of resamples (``--confidence-n``).
DEFAULT_RESAMPLES = 1000
#: sacreBLEU's default seed, overridden by ``$SACREBLEU_SEED`` (``none``: fresh entropy).
DEFAULT_SEED = "12345"


@dataclass(frozen=True)
class Interval:
    """A bootstrap estimate: the resamples' mean, the half width of their 95% range, how it was drawn."""

    mean: float
    half_width: float
    resamples: int
    seed: str

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.mean - self.half_width, self.mean + self.half_width)

    def to_dict(self) -> dict:
        return {"ci95": list(self.ci95), "confidence_mean": self.mean, "resamples": self.resamples,
                "seed": self.seed}


def bootstrap_seed() -> str:
    """sacreBLEU's seed choice: ``$SACREBLEU_SEED`` or 12345, as text (``none`` for no fixed seed); a
    value sacreBLEU could not seed with (not ``none`` nor an integer of at least 0) is refused, naming it."""
    text = os.environ.get("SACREBLEU_SEED", DEFAULT_SEED).lower()
    if text != "none":
        env_int("SACREBLEU_SEED", environ={"SACREBLEU_SEED": text}, other=" or 'none'")
    return text


def resample_indices(n_items: int, resamples: int, seed: str | None = None) -> np.ndarray:
    """``resamples`` × ``n_items`` indices drawn with replacement, the same draw as sacreBLEU's."""
    if n_items < 1:
        raise DataError("a bootstrap needs at least one sentence")
    if resamples < 2:
        raise DataError(f"a bootstrap needs at least 2 resamples (got {resamples})")
    why = too_large(2 * resamples * n_items * np.dtype(np.int64).itemsize,   # the indices and one gather of them
                    f"a bootstrap of {resamples} resamples of {n_items} sentences")
    if why is not None:
        raise UsageError(f"{why}; take fewer resamples (--confidence-n)")
    seed = bootstrap_seed() if seed is None else seed
    rng = np.random.default_rng(None if seed == "none" else int(seed))
    return rng.choice(n_items, size=(resamples, n_items), replace=True)


def percentile_interval(scores: Sequence[float], resamples: int, seed: str) -> Interval:
    """``Score.estimate_ci``: the mean of the scores and half the spread of their 2.5-97.5 percentiles."""
    ordered = sorted(scores)
    lower_idx = len(ordered) // 40
    low, high = ordered[lower_idx], ordered[len(ordered) - lower_idx - 1]
    return Interval(statistics.mean(ordered), 0.5 * (high - low), resamples, seed)


def bootstrap(stats: Sequence[Sequence[float]], score: Callable[[np.ndarray], float],
              resamples: int = DEFAULT_RESAMPLES, seed: str | None = None) -> Interval:
    """Resample sentences' statistics (one row per sentence) and score each resample's column sums."""
    seed = bootstrap_seed() if seed is None else seed
    idxs = resample_indices(len(stats), resamples, seed)
    table = np.asarray(stats, dtype="float32")  # sacreBLEU sums float32 statistics
    return percentile_interval([score(table[i].sum(0)) for i in idxs], resamples, seed)


# -- the paper's protocol: multi-bleu.perl from per-sentence counts ---------------------------------
def multi_bleu_from_totals(totals: Sequence[float], max_n: int = 4) -> float:
    """multi-bleu.perl's BLEU (percent) from ``[correct_1..n, total_1..n, hyp_len, ref_len]``."""
    correct, total = totals[:max_n], totals[max_n : 2 * max_n]
    hyp_len, ref_len = float(totals[2 * max_n]), float(totals[2 * max_n + 1])
    if hyp_len == 0 or ref_len == 0:
        return 0.0
    precisions = [c / t if t else 0.0 for c, t in zip(correct, total)]
    bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    log_mean = sum(math.log(p) if p > 0 else -9999999999 for p in precisions) / max_n
    return 100 * bp * math.exp(log_mean)


# -- EVALB: bracketing F1 over sentences --------------------------------------------------------------
def f1_from_totals(totals: Sequence[float]) -> float:
    """EVALB's bracketing F1 (percent) from ``[matched, gold brackets, test brackets]``."""
    matched, gold, test = (float(x) for x in totals[:3])
    recall = matched / gold if gold else 0.0
    precision = matched / test if test else 0.0
    return 100.0 * 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def sacrebleu_interval(hyps: Sequence[str], refs: Sequence[str], resamples: int = DEFAULT_RESAMPLES,
                       seed: str | None = None, tokenize: str | None = None) -> Interval:
    """sacreBLEU's own bootstrap (``sacrebleu REF -i HYP --confidence``) of detokenized text."""
    metric = BLEU(tokenize=tokenize) if tokenize else BLEU()
    stats = metric._extract_corpus_statistics(list(hyps), [list(refs)])
    return bootstrap(stats, lambda totals: metric._compute_score_from_stats(totals).score, resamples, seed)


def paper_interval(hyp_tokens: Sequence[str], ref_tokens: Sequence[str], resamples: int = DEFAULT_RESAMPLES,
                   seed: str | None = None) -> Interval:
    """The same bootstrap on multi-bleu.perl's per-sentence counts of the paper protocol's tokens."""
    rows = []
    for hyp, ref in zip(hyp_tokens, ref_tokens):
        s = multi_bleu_stats([hyp], [[ref]])
        rows.append([*s.correct, *s.total, s.hyp_len, s.ref_len])
    return bootstrap(rows, multi_bleu_from_totals, resamples, seed)


def perplexity_interval(sentences: Sequence[tuple[float, int]], resamples: int = DEFAULT_RESAMPLES,
                        seed: str | None = None) -> Interval:
    """Per-wordpiece perplexity resampled over sentences: each resample's exp(summed NLL / summed
    wordpieces), from each sentence's (NLL, wordpieces) (:func:`repro.eval.perplexity.perplexity`)."""
    if any(not math.isfinite(nll) for nll, _ in sentences):
        raise DataError("a sentence's NLL is not finite; the perplexity has no interval")
    return bootstrap([[nll, tokens] for nll, tokens in sentences],
                     lambda totals: math.exp(float(totals[0]) / max(float(totals[1]), 1.0)), resamples, seed)


def evalb_interval(rows: Sequence[SentenceResult], resamples: int = DEFAULT_RESAMPLES,
                   seed: str | None = None) -> Interval:
    """EVALB bracketing F1 resampled over sentences (skipped and error sentences count nothing, as in EVALB)."""
    stats = [[r.matched, r.gold_brackets, r.test_brackets] if r.status == 0 else [0, 0, 0] for r in rows]
    return bootstrap(stats, f1_from_totals, resamples, seed)
