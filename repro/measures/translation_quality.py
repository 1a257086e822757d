"""BLEU of the recipe's beam search under two protocols, and perplexity per wordpiece (Sections 6.1 and 6.2).

- ``bleu.tokenized-compound-split``: the paper's protocol (Table 2 and 3), Moses-tokenized multi-bleu
  with compound splitting, with the bootstrap of that protocol; sacreBLEU kept in the provenance;
- ``bleu.sacrebleu``: sacreBLEU on detokenized text with sacreBLEU's own bootstrap; the paper's
  protocol kept in the record's ``extra``;
- ``perplexity.wordpiece``: exp of the mean NLL per target wordpiece (Table 3's PPL), with a
  bootstrap over sentences when the job asks for intervals; the token accuracy of the same pass
  beside it (``extra.token_accuracy``: Section 5.4's "improves accuracy").

Both BLEUs score one decode of the split (made by the first of them to run, kept on ``Trained``)
with the job's search settings (beam 4, alpha 0.6, input + 50 for the paper's recipes), on the job's
runtime, split over its ranks (:mod:`repro.eval.sharding`), and record the search their decode ran
(``provenance.extra.decode``: :func:`repro.decode.translate.search_of`,
not the settings asked for). ``*_of`` score a decode (or a perplexity pass) already made, for a
command that scores one decode both ways (``repro evaluate``).
Every record says which files were scored (``provenance.extra.test_set``: the split's source and
reference, each by name, line count and content hash, :mod:`repro.data.test_sets`; BLEU's written
translations too), so that a result counts for the paper only when it scored the paper's test set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.data.test_sets import identity
from repro.eval.bleu import paper_tokens
from repro.eval.bootstrap import paper_interval, perplexity_interval, sacrebleu_interval
from repro.eval.perplexity import Perplexity
from repro.eval.translation import BleuEvaluation, evaluate_bleu, evaluate_perplexity
from repro.measures.measure_registry import Measured, Request, Trained, measurement


def _search(bleu: BleuEvaluation) -> str:
    """The search the decode ran, in words."""
    s = bleu.settings
    return f"{s['search']} search, beam {s['beam_size']}, alpha {s['alpha']}, max length input + {s['max_len_offset']}"


def scored_files(trained: Trained, split: str, sentences: int | None = None,
                 hypotheses: Path | None = None) -> dict[str, Any]:
    """The identity of what a measurement on ``split`` scored (module docstring); ``sentences``: how many
    it scored (default: every line of the split). Taken on the main rank, which writes the record."""
    if not trained.runtime.is_main:
        return {}
    src, tgt = trained.dataset.split(split)
    files = {"dataset": trained.dataset.name, "split": split, "source": identity(src), "reference": identity(tgt)}
    files["sentences"] = files["reference"]["lines"] if sentences is None else sentences
    if hypotheses is not None and hypotheses.is_file():
        files["hypotheses"] = identity(hypotheses)
    return files


def _translate(trained: Trained, request: Request) -> BleuEvaluation:
    """The recipe's search over ``request.split``: decoded once per model, split and search, and scored
    by both protocols (a job that asks for both BLEUs decodes its test split once)."""
    key = ("bleu", request.split, str(trained.files.get("hypotheses")))
    made = trained.decodes.get(key)
    if made is None or made[0] is not trained.model or made[1] is not trained.search:
        made = trained.decodes[key] = (trained.model, trained.search, evaluate_bleu(
            trained.model, trained.vocab, trained.dataset, request.split, trained.search,
            output=trained.files.get("hypotheses"), runtime=trained.runtime))
    return made[2]


@measurement("bleu.tokenized-compound-split")
def paper_protocol_bleu(trained: Trained, request: Request) -> Measured:
    """The paper's BLEU of the recipe's search on ``request.split``, with its bootstrap interval (rank 0)."""
    return paper_bleu_of(trained, request, _translate(trained, request))


def paper_bleu_of(trained: Trained, request: Request, bleu: BleuEvaluation) -> Measured:
    """:func:`paper_protocol_bleu` of translations already made (``bleu``: one decode scored both ways)."""
    dataset = trained.dataset
    interval = None
    if trained.runtime.is_main:
        interval = paper_interval(paper_tokens(bleu.hypotheses, lang=dataset.tgt_lang),
                                  paper_tokens(bleu.references, lang=dataset.tgt_lang, tokenized=dataset.tokenized))
    return Measured(
        round(bleu.paper.score, 2), "BLEU (tokenized, compound splitting)",
        f"{_search(bleu)} on {dataset.name} {request.split}, {trained.checkpoints_averaged} checkpoint(s) "
        f"averaged; sacreBLEU {bleu.sacrebleu.score:.2f} ({bleu.sacrebleu.signature})",
        f"{dataset.name} {request.split} ({bleu.sentences} pairs)", 2,
        ci95=interval.ci95 if interval else None, bleu_signature=bleu.paper.signature,
        provenance={"decode": bleu.settings, "sacrebleu": round(bleu.sacrebleu.score, 2),
                    "sacrebleu_signature": bleu.sacrebleu.signature,
                    **({"bootstrap": interval.to_dict()} if interval else {}),
                    "test_set": scored_files(trained, request.split, bleu.sentences, trained.files.get("hypotheses"))},
        raw=bleu, seconds={"decode": bleu.seconds})


@measurement("bleu.sacrebleu")
def sacrebleu(trained: Trained, request: Request) -> Measured:
    """sacreBLEU of the recipe's search on ``request.split``, with sacreBLEU's bootstrap (rank 0)."""
    return sacrebleu_of(trained, request, _translate(trained, request))


def sacrebleu_of(trained: Trained, request: Request, bleu: BleuEvaluation) -> Measured:
    """:func:`sacrebleu` of translations already made (``bleu``: one decode scored both ways)."""
    dataset = trained.dataset
    interval = sacrebleu_interval(bleu.hypotheses, bleu.references) if trained.runtime.is_main else None
    how = (f"95% interval: sacreBLEU's bootstrap ({interval.resamples} resamples, seed {interval.seed}); "
           if interval else "")
    return Measured(
        round(bleu.sacrebleu.score, 2), "sacreBLEU (detokenized)",
        f"{_search(bleu)}, average of the last {trained.checkpoints_averaged} checkpoints; {how}"
        f"paper protocol (tokenized, compound-split) BLEU {bleu.paper.score:.2f}; decoding took {bleu.seconds:.0f} s",
        f"{dataset.name} {request.split} ({bleu.sentences} pairs{'' if dataset.tokenized else ', raw'})", 2,
        ci95=interval.ci95 if interval else None, bleu_signature=bleu.sacrebleu.signature,
        provenance={"decode": bleu.settings,
                    "test_set": scored_files(trained, request.split, bleu.sentences, trained.files.get("hypotheses"))},
        extra={"paper_protocol_bleu": round(bleu.paper.score, 2), "paper_signature": bleu.paper.signature,
               "sacrebleu": bleu.sacrebleu.to_dict(), "decode_seconds": round(bleu.seconds, 1),
               **({"bootstrap": interval.to_dict()} if interval else {})},
        raw=bleu, seconds={"decode": bleu.seconds})


@measurement("perplexity.wordpiece")
def perplexity_per_wordpiece(trained: Trained, request: Request) -> Measured:
    """Perplexity per target wordpiece on ``request.split``; with ``trained.intervals``, a bootstrap over sentences."""
    return perplexity_of(trained, request, evaluate_perplexity(trained.model, trained.vocab, trained.dataset,
                                                               request.split, runtime=trained.runtime,
                                                               per_sentence=trained.intervals))


def perplexity_of(trained: Trained, request: Request, ppl: Perplexity) -> Measured:
    """:func:`perplexity_per_wordpiece` of a pass already made (``ppl``)."""
    dataset = trained.dataset
    interval = perplexity_interval(ppl.sentences) if trained.intervals and trained.runtime.is_main else None
    return Measured(
        round(ppl.ppl, 3), f"PPL per wordpiece ({request.split})",
        f"exp(mean NLL) over {ppl.tokens} target wordpieces of {dataset.name} {request.split} incl. EOS, no label "
        f"smoothing, {trained.checkpoints_averaged} checkpoint(s) averaged"
        + ("; 95% interval: bootstrap over sentences" if interval else ""),
        f"{dataset.name} {request.split}", 3, ci95=interval.ci95 if interval else None,
        provenance={**({"bootstrap": interval.to_dict()} if interval else {}),
                    "test_set": scored_files(trained, request.split)},
        extra={"tokens": ppl.tokens, "nll_per_token": round(ppl.nll_per_token, 5),
               "token_accuracy": round(ppl.accuracy, 5)}, raw=ppl)
