"""The BLEU behind Table 2's EN-DE figures: tokenized BLEU with compound splitting.

The paper's 27.3 and 28.4 come from tensor2tensor's get_ende_bleu.sh (Moses ``tokenizer.perl -l
de`` with its XML escaping, every hyphen between two non-spaces rewritten as `` ##AT##-##AT## ``
by a global, non-overlapping Perl substitution, then ``multi-bleu.perl``). The checker scores a
small corpus with repro's ``paper`` protocol (what ``repro bleu --protocol paper`` and the cluster
evaluation use) and sets it against a reference that shares no code with it: the token strings
the script produces for that corpus, written out here (:data:`SCRIPT_TOKENS`, from the script's
rules: German apostrophes split and escaped, ``& " ' < > [ ]`` escaped, ``3-4-5`` split once
only, a hyphen after a non-word character split as after a letter: ``U.S. ##AT##-##AT## Firmen``,
since the script's class is non-space, not word characters; German quotes and the ellipsis split off
and kept as they are: the 2017 script normalised no punctuation, on either side), scored by sacreBLEU's
own BLEU (no tokenization, no smoothing). The corpus is built so that the compound split, the escaping,
the non-overlapping substitution, the unicode punctuation, clipped counts and the brevity penalty (the
hypotheses are shorter than the references) each change the score.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path
from unittest import mock

from sacrebleu.metrics import BLEU

import repro.eval.translation as translation
from repro.checks.jobs import job_config
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.data.corpora import get_dataset
from repro.eval.bleu import paper_tokens, score
from repro.files.writer import atomic_write_text

HYPOTHESES = [
    "Die Donau-Dampfschifffahrt ist heute schön & ruhig .",
    'Das Rhein-Main-Gebiet wächst schnell, sagt der "Bürgermeister".',
    "Er kam um 10 Uhr an und ging um 11 Uhr wieder [laut Plan].",
    "Die E-Mail-Adresse ist nicht korrekt , sagte sie.",
    "Das ist der der der Grund für die 3-4-5 Regel.",
    "Sie sagte: Es ist ein x-y-z Fall und Müller's Idee <gut>.",
    "Die U.S.-Firmen und die z.B.-Regel sind da.",
    "Er sagte „Ja“ und ging … nach Hause.",
]
REFERENCES = [
    "Die Donau-Schifffahrt ist heute schön & sehr ruhig und still .",
    'Das Rhein-Gebiet wächst sehr schnell, sagte der "Bürgermeister" gestern.',
    "Er kam um 10 Uhr an und ging um 12 Uhr [laut Plan] wieder nach Hause.",
    "Die E-Mail ist leider nicht korrekt , sagte sie am Montag.",
    "Das ist der Grund für die neue 3-4-5 Regel in der Stadt.",
    "Sie sagte: Es ist ein x-y-z Fall und Müller's gute Idee <gut>.",
    "Die U.S.-Firmen und die neue z.B.-Regel sind heute da.",
    "Er sagte „Ja“ und ging … schnell nach Hause.",
]
#: What get_ende_bleu.sh's tokenization and compound split make of HYPOTHESES and REFERENCES.
SCRIPT_TOKENS = {
    "hypotheses": [
        "Die Donau ##AT##-##AT## Dampfschifffahrt ist heute schön &amp; ruhig .",
        "Das Rhein ##AT##-##AT## Main ##AT##-##AT## Gebiet wächst schnell , sagt der &quot; Bürgermeister &quot; .",
        "Er kam um 10 Uhr an und ging um 11 Uhr wieder &#91; laut Plan &#93; .",
        "Die E ##AT##-##AT## Mail ##AT##-##AT## Adresse ist nicht korrekt , sagte sie .",
        "Das ist der der der Grund für die 3 ##AT##-##AT## 4-5 Regel .",
        "Sie sagte : Es ist ein x ##AT##-##AT## y-z Fall und Müller &apos; s Idee &lt; gut &gt; .",
        "Die U.S. ##AT##-##AT## Firmen und die z.B. ##AT##-##AT## Regel sind da .",
        "Er sagte „ Ja “ und ging … nach Hause .",
    ],
    "references": [
        "Die Donau ##AT##-##AT## Schifffahrt ist heute schön &amp; sehr ruhig und still .",
        "Das Rhein ##AT##-##AT## Gebiet wächst sehr schnell , sagte der &quot; Bürgermeister &quot; gestern .",
        "Er kam um 10 Uhr an und ging um 12 Uhr &#91; laut Plan &#93; wieder nach Hause .",
        "Die E ##AT##-##AT## Mail ist leider nicht korrekt , sagte sie am Montag .",
        "Das ist der Grund für die neue 3 ##AT##-##AT## 4-5 Regel in der Stadt .",
        "Sie sagte : Es ist ein x ##AT##-##AT## y-z Fall und Müller &apos; s gute Idee &lt; gut &gt; .",
        "Die U.S. ##AT##-##AT## Firmen und die neue z.B. ##AT##-##AT## Regel sind heute da .",
        "Er sagte „ Ja “ und ging … schnell nach Hause .",
    ],
}


def _bleu(hyps: list[str], refs: list[str]) -> float:
    return BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(hyps, [refs]).score


#: A corpus with no 4-gram in common (its 1- to 3-grams match): multi-bleu.perl, which does not
#: smooth, scores it 0 (the log of a zero precision is -9999999999); already tokenized as the script would.
NO_FOURGRAM = (["the cat sat on the mat today"], ["the cat lay on the mat now"])


@checker("bleu.paper_protocol", audits=False)
def paper_protocol(claim: Claim, ctx: CheckContext) -> Measurement:
    """|repro's paper-protocol BLEU - sacreBLEU on the script's own token strings|, on a corpus
    where the compound split, escaping, clipping and the brevity penalty each matter, and on one
    with no 4-gram in common (:data:`NO_FOURGRAM`: the script gives 0, a geometric mean that leaves the
    zero precision out does not); every token string repro's protocol forms must equal the script's."""
    ours = finite(score(HYPOTHESES, REFERENCES, "paper", lang="de").score, "repro's paper-protocol BLEU")
    script = _bleu(SCRIPT_TOKENS["hypotheses"], SCRIPT_TOKENS["references"])
    unmatched = finite(score(*NO_FOURGRAM, "paper", lang="de").score, "repro's paper-protocol BLEU without 4-grams")
    unmatched_script = _bleu(*NO_FOURGRAM)
    formed = {"hypotheses": paper_tokens(HYPOTHESES, lang="de"), "references": paper_tokens(REFERENCES, lang="de")}
    wrong = [f"{side} {i + 1}: {got!r}" for side in formed for i, (got, want) in
             enumerate(zip(formed[side], SCRIPT_TOKENS[side])) if got != want]
    unsplit = _bleu(*(([re.sub(r" ##AT##-##AT## ", "-", line) for line in SCRIPT_TOKENS[side]])
                      for side in ("hypotheses", "references")))
    diff = max(abs(ours - script), abs(unmatched - unmatched_script))
    return Measurement(round(diff, 4), False if wrong else None, (
        f"repro {ours:.2f}, the script's tokens scored by sacreBLEU {script:.2f} (without the compound split: "
        f"{unsplit:.2f}); no 4-gram in common: repro {unmatched:.2f}, the script {unmatched_script:.2f}"
        + (f"; token strings that differ from the script's: {'; '.join(wrong[:3])}" if wrong else "")))


#: French text where Moses's French rules (the elided article stays with its apostrophe: ``l&apos;
#: homme``) and its German or English ones (``l &apos; homme``, ``l &apos;homme``) give other tokens.
FRENCH = {
    "hypotheses": ["L'homme qu'il a vu aujourd'hui n'est pas là.", "C'est l'idée d'un ami, dit Marie.",
                   "Jusqu'à demain, j'attends l'avion d'Air France."],
    "references": ["L'homme qu'elle a vu hier n'est plus là.", "C'est l'idée d'une amie, dit Marie hier.",
                   "Jusqu'à lundi, j'attends l'avion d'Air Canada."],
}
#: What ``tokenizer.perl -l fr`` makes of FRENCH (no hyphen: the compound split leaves it alone).
FRENCH_TOKENS = {
    "hypotheses": ["L&apos; homme qu&apos; il a vu aujourd&apos; hui n&apos; est pas là .",
                   "C&apos; est l&apos; idée d&apos; un ami , dit Marie .",
                   "Jusqu&apos; à demain , j&apos; attends l&apos; avion d&apos; Air France ."],
    "references": ["L&apos; homme qu&apos; elle a vu hier n&apos; est plus là .",
                   "C&apos; est l&apos; idée d&apos; une amie , dit Marie hier .",
                   "Jusqu&apos; à lundi , j&apos; attends l&apos; avion d&apos; Air Canada ."],
}
#: Each target language's corpus and the tokens the script's rules for that language make of it.
BY_LANGUAGE = {"de": ({"hypotheses": HYPOTHESES, "references": REFERENCES}, SCRIPT_TOKENS), "fr": (FRENCH, FRENCH_TOKENS)}


@checker("bleu.target_language", audits=False)
def target_language(claim: Claim, ctx: CheckContext) -> Measurement:
    """The paper protocol's tokenizer follows the job's target language: each experiment's
    evaluation (:func:`repro.eval.translation.evaluate_bleu`, the search replaced by fixed
    hypotheses) scores a corpus in its dataset's target language, against sacreBLEU on the tokens
    ``tokenizer.perl -l <target>`` makes of it (written out here). Measured: the worst |difference|."""
    rows, worst = [], 0.0
    for experiment in claim.params["experiments"]:
        dataset = get_dataset(job_config(experiment).dataset)
        if dataset.tgt_lang not in BY_LANGUAGE:
            raise ValueError(f"{experiment}: no corpus for target language '{dataset.tgt_lang}' (add one to BY_LANGUAGE)")
        corpus, tokens = BY_LANGUAGE[dataset.tgt_lang]
        with tempfile.TemporaryDirectory(prefix="repro-bleu-lang-") as tmp:
            src, tgt = Path(tmp) / "test.src", Path(tmp) / "test.tgt"
            atomic_write_text(src, "x\n" * len(corpus["references"]), within=tmp)
            atomic_write_text(tgt, "".join(r + "\n" for r in corpus["references"]), within=tmp)
            local = dataclasses.replace(dataset, splits={"test": (src, tgt)}, tokenized=False)
            with mock.patch.object(translation, "translate", lambda *a, **k: list(corpus["hypotheses"])):
                ours = finite(translation.evaluate_bleu(None, None, local, "test").paper.score,
                              f"{experiment}'s paper-protocol BLEU")
        want = _bleu(tokens["hypotheses"], tokens["references"])
        worst = max(worst, abs(ours - want))
        rows.append(f"{experiment} ({dataset.src_lang}-{dataset.tgt_lang}): evaluation {ours:.2f}, the "
                    f"'{dataset.tgt_lang}' script's tokens {want:.2f}")
    return Measurement(round(worst, 4), detail="; ".join(rows))
