"""Scoring a translation model on a dataset split: BLEU of its beam-search translations
(Section 6.1) and per-wordpiece perplexity (Table 3's PPL)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed as dist

from repro.files.writer import atomic_write_text
from repro.data.corpus import read_parallel
from repro.data.corpora import Dataset
from repro.data.vocab import SharedVocab
from repro.decode.settings import TRANSLATION, DecodeSettings
from repro.decode.translate import search_of, translate
from repro.eval.bleu import BleuResult, dataset_language, score
from repro.eval.perplexity import Perplexity, perplexity
from repro.eval.sharding import grouped, map_sharded, sum_over_ranks
from repro.model import Transformer
from repro.model.precision import Precision
from repro.runtime import Runtime
from repro.train.data import encode_pairs


@dataclass
class BleuEvaluation:
    """A split's translations and their BLEU under both protocols; ``settings``: the search the decode
    ran (:func:`repro.decode.translate.search_of`) and its batch budget."""

    split: str
    sacrebleu: BleuResult
    paper: BleuResult
    hypotheses: list[str]
    seconds: float
    sentences: int
    settings: dict[str, Any] = field(default_factory=dict)
    references: list[str] = field(default_factory=list)


def evaluate_bleu(model: Transformer, vocab: SharedVocab, dataset: Dataset, split: str,
                  settings: DecodeSettings = TRANSLATION, *, greedy: bool = False,
                  max_tokens: int | None = None, output: Path | None = None,
                  precision: Precision | None = None, runtime: Runtime | None = None) -> BleuEvaluation:
    """Translate ``split``'s source side with ``settings`` (or greedily) and score it against the
    target side with sacreBLEU and the paper's tokenized protocol; on ``runtime`` (default: where
    the model is, in ``precision``). A runtime of several ranks splits the sentences over them
    (:mod:`repro.eval.sharding`); every rank gets the whole result."""
    dataset_language(dataset)   # before the decode: a target language Moses cannot tokenize is refused
    src_path, tgt_path = dataset.split(split)
    corpus = read_parallel(src_path, tgt_path)
    start = time.monotonic()
    hyps = map_sharded(lambda sentences: translate(model, vocab, sentences, settings, greedy=greedy,
                                                   max_tokens=max_tokens, precision=precision, runtime=runtime),
                       [s for s, _ in corpus.pairs], runtime)
    seconds = time.monotonic() - start
    refs = [t for _, t in corpus.pairs]
    if output is not None:
        atomic_write_text(output, "".join(h + "\n" for h in hyps))
    paper_kwargs = {"lang": dataset.tgt_lang}
    if dataset.tokenized:
        paper_kwargs["refs_tokenized"] = True
    return BleuEvaluation(
        split=split, sacrebleu=score(hyps, refs, "sacrebleu"), paper=score(hyps, refs, "paper", **paper_kwargs),
        hypotheses=hyps, seconds=seconds, sentences=len(hyps), references=refs,
        settings={**search_of(settings, greedy), "max_tokens": settings.max_tokens},
    )


def evaluate_perplexity(model: Transformer, vocab: SharedVocab, dataset: Dataset, split: str,
                        precision: Precision | None = None, *, runtime: Runtime | None = None,
                        per_sentence: bool = False) -> Perplexity:
    """Per-wordpiece perplexity on ``split``, on ``runtime`` (default: where the model is); split
    over the ranks of a runtime of several (their NLL and token counts summed). ``per_sentence``
    keeps each sentence's NLL and count (gathered from every rank), for the bootstrap."""
    src_path, tgt_path = dataset.split(split)
    examples, _ = encode_pairs(vocab, read_parallel(src_path, tgt_path).pairs)
    if not grouped(runtime):
        return perplexity(model, examples, precision=precision, runtime=runtime, per_sentence=per_sentence)
    mine = examples[runtime.rank::runtime.world_size]
    part = (perplexity(model, mine, precision=precision, runtime=runtime, per_sentence=per_sentence) if mine
            else Perplexity(1.0, 0.0, 0, 0, [] if per_sentence else None))
    nll, tokens, correct = sum_over_ranks([part.nll, part.tokens, part.correct], runtime)
    sentences = None
    if per_sentence:
        gathered: list[list | None] = [None] * runtime.world_size
        dist.all_gather_object(gathered, part.sentences or [])
        sentences = [pair for rank_part in gathered for pair in (rank_part or [])]
    return Perplexity(math.exp(nll / max(tokens, 1)), nll, int(tokens), int(correct), sentences)
