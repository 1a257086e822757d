"""The case rule of both BLEU protocols repro scores with (Section 6.1, Table 2): case-sensitive.

``multi-bleu.perl`` (the paper's protocol, without ``-lc``) and sacreBLEU (``lowercase=False``, its
default and its signature's ``case:mixed``) both count ``The`` and ``the`` as different words. The
checker scores a corpus whose hypotheses differ from their references in case alone in places (so a
lowercased score is higher, which the checker confirms on the reference before it compares) with
repro's two protocols, as ``repro bleu`` and the evaluation call them
(:func:`repro.eval.bleu.score`), and sets each against sacreBLEU's own BLEU, case-sensitive, on the
same text: for ``sacrebleu`` its default metric, for ``paper`` its BLEU of the token strings
without tokenization or smoothing (the text here is already tokenized as the script leaves it: no
hyphens, no characters Moses escapes, so the script's tokens are the words). The signature repro
stores must say ``case:mixed``.
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Inconclusive, Measurement
from repro.eval.bleu import score

HYPOTHESES = [
    "The cat sat on the Mat in the morning .",
    "berlin is the capital of Germany and its largest city .",
    "He said That it would Rain tomorrow in the north .",
    "We went to Paris in may with our friends .",
]
REFERENCES = [
    "the cat sat on the mat in the morning .",
    "Berlin is the capital of Germany and its largest city .",
    "He said that it would rain tomorrow in the North .",
    "We went to Paris in May with our friends .",
]


def _reference(protocol: str, lowercase: bool) -> float:
    metric = BLEU(lowercase=lowercase) if protocol == "sacrebleu" else \
        BLEU(tokenize="none", smooth_method="none", force=True, lowercase=lowercase)
    return metric.corpus_score(HYPOTHESES, [REFERENCES]).score


@checker("bleu.case", audits=False)
def case_rule(claim: Claim, ctx: CheckContext) -> Measurement:
    """The largest |repro's BLEU - sacreBLEU's case-sensitive BLEU| over both protocols; fails when
    a signature does not say ``case:mixed``."""
    diffs, lines, wrong = [], [], []
    for protocol in ("sacrebleu", "paper"):
        mixed, lowered = _reference(protocol, False), _reference(protocol, True)
        if abs(mixed - lowered) < 1.0:
            raise Inconclusive(f"the corpus does not tell case-sensitive BLEU ({mixed:.2f}) from lowercased "
                               f"({lowered:.2f}) under the {protocol} protocol")
        ours = score(HYPOTHESES, REFERENCES, protocol, **({"lang": "en"} if protocol == "paper" else {}))
        value = finite(ours.score, f"repro's {protocol} BLEU")
        diffs.append(abs(value - mixed))
        lines.append(f"{protocol}: repro {value:.2f}, case-sensitive {mixed:.2f}, lowercased {lowered:.2f}")
        if "case:mixed" not in ours.signature:
            wrong.append(f"{protocol}'s signature {ours.signature!r} does not say case:mixed")
    return Measurement(round(max(diffs), 4), False if wrong else None, "; ".join(lines + wrong))
