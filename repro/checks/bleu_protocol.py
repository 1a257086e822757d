"""The BLEU behind Table 2's EN-DE figures: tokenized BLEU with compound splitting.

The paper's 27.3 and 28.4 come from tensor2tensor's get_ende_bleu.sh (Moses tokenization, every
hyphen between two non-spaces rewritten as `` ##AT##-##AT## ``, multi-bleu.perl). The checker
scores a small corpus with repro's ``paper`` protocol (what ``repro bleu --protocol paper`` and the
cluster evaluation use) and with the same steps assembled independently here (the regular
expression of the script, sacreBLEU's BLEU without smoothing or tokenization); the sentences are
chosen so that leaving out the compound split changes the score.
"""

from __future__ import annotations

import re

from sacrebleu.metrics import BLEU
from sacremoses import MosesTokenizer

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.eval.bleu import score

HYPOTHESES = [
    "Die Donau-Dampfschifffahrt ist heute schön und ruhig .",
    "Das Rhein-Main-Gebiet wächst schnell, sagt der Bürgermeister.",
    "Er kam um 10 Uhr an und ging um 11 Uhr wieder.",
    "Die E-Mail-Adresse ist nicht korrekt , sagte sie.",
]
REFERENCES = [
    "Die Donau-Schifffahrt ist heute schön und ruhig .",
    "Das Rhein-Gebiet wächst sehr schnell, sagte der Bürgermeister.",
    "Er kam um 10 Uhr an und ging um 12 Uhr.",
    "Die E-Mail ist nicht korrekt , sagte sie.",
]


def _script_tokens(line: str) -> str:
    """tokenizer.perl -l de (escaping on), then perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'."""
    tokens = MosesTokenizer(lang="de").tokenize(line, return_str=True, escape=True, aggressive_dash_splits=False)
    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", tokens)


@checker("bleu.paper_protocol", audits=False)
def paper_protocol(claim: Claim, ctx: CheckContext) -> Measurement:
    """|repro's paper-protocol BLEU - the script's steps assembled here| on a corpus with compounds."""
    ours = score(HYPOTHESES, REFERENCES, "paper", lang="de").score
    independent = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(
        [_script_tokens(h) for h in HYPOTHESES], [[_script_tokens(r) for r in REFERENCES]]).score
    unsplit = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(
        [re.sub(r" ##AT##-##AT## ", "-", _script_tokens(h)) for h in HYPOTHESES],
        [[re.sub(r" ##AT##-##AT## ", "-", _script_tokens(r)) for r in REFERENCES]]).score
    diff = abs(ours - independent)
    return Measurement(round(diff, 4), detail=(
        f"repro {ours:.2f}, the script's steps {independent:.2f} (without the compound split: {unsplit:.2f})"))
