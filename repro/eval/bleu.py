"""BLEU two ways (Section 6.1, Table 2), so a measured figure can be set beside the paper's like for like.

``paper``: the tokenized, compound-split BLEU the paper's 27.3 / 28.4 (EN-DE) were measured with,
tensor2tensor's ``utils/get_ende_bleu.sh`` (2017):

1. Moses ``tokenizer.perl -l de`` on the hypotheses (default options, so Moses's XML escaping of
   ``& | < > ' " [ ]`` is on); the gold references there were already tokenized the same way
   (``newstest2013.tok.de``), so raw references are tokenized here with the same call;
2. ``perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'`` on both sides. The substitution is global
   but non-overlapping, exactly like Python's ``re.sub``: in ``a-b-c`` the ``b`` is consumed by the
   first match, so only the first hyphen is split. That quirk is reproduced, not "fixed";
3. Moses ``multi-bleu.perl``: corpus-level, case-sensitive, 1-4-grams with clipped counts, the
   reference length closest to each hypothesis (ties to the shorter), BP = exp(1 - r/c) when c < r,
   and no smoothing (any zero n-gram precision gives 0).

Tokenization uses ``sacremoses``, the Python port of ``tokenizer.perl``. Later versions of the script
also run ``replace-unicode-punctuation.perl`` first: ``normalize_punct=True`` does that.

``sacrebleu``: sacreBLEU on detokenized text with its standard signature: the figure to report
alongside. ``nltk_bleu`` recomputes the paper protocol's score with NLTK as an independent check.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import metadata
from typing import Any

from nltk.translate.bleu_score import corpus_bleu
from sacrebleu.metrics import BLEU
from sacremoses import MosesPunctNormalizer, MosesTokenizer
from sacremoses.corpus import NonbreakingPrefixes

import repro
from repro.data import text_lines
from repro.errors import DataError, UsageError

PROTOCOLS = ("sacrebleu", "paper")
_COMPOUND = re.compile(r"(\S)-(\S)")


@dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score (0-100) and the signature naming how it was computed."""

    score: float
    signature: str
    protocol: str
    precisions: list[float] = field(default_factory=list)  # n-gram precisions, percent
    brevity_penalty: float = 1.0
    hyp_len: int = 0
    ref_len: int = 0

    @property
    def ratio(self) -> float:
        return self.hyp_len / self.ref_len if self.ref_len else 0.0

    def format(self) -> str:
        """multi-bleu.perl's output line (for ``paper``) or sacreBLEU's style (otherwise)."""
        p = "/".join(f"{x:.1f}" for x in self.precisions)
        return (f"BLEU = {self.score:.2f}, {p} (BP={self.brevity_penalty:.3f}, ratio={self.ratio:.3f}, "
                f"hyp_len={self.hyp_len}, ref_len={self.ref_len})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


# -- the paper's protocol ---------------------------------------------------------------------------
def compound_split(line: str) -> str:
    """tensor2tensor's ``##AT##`` compound splitting (step 2 above), with Perl's non-overlapping matches."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


#: The languages ``tokenizer.perl -l`` (sacremoses) has non-breaking prefixes for; another code it
#: tokenizes as English without a word, so a language the user names (``repro bleu --lang``) is one of
#: these, never written into a signature it did not run.
MOSES_LANGUAGES = frozenset(NonbreakingPrefixes().available_langs.values())


def moses_language(lang: str) -> str:
    """``lang`` when Moses tokenizes it as itself; else a :class:`UsageError` listing the languages."""
    if lang not in MOSES_LANGUAGES:
        raise UsageError(f"Moses has no tokenization for language {lang!r} (it would tokenize it as English); "
                         f"one of {', '.join(sorted(MOSES_LANGUAGES))}")
    return lang


def dataset_language(dataset: Any) -> str:
    """The language a data set's references are tokenized as (its target side's, named by its files:
    ``test.de``); one Moses has no tokenization for is refused naming the data set and its file, as
    ``--lang`` is, before any translation: it would be tokenized as English under a signature naming it."""
    lang = dataset.tgt_lang
    if lang not in MOSES_LANGUAGES:
        where = next(iter(dataset.splits.values()), (None, None))[1]
        raise DataError(f"{where or dataset.name}: dataset '{dataset.name}' has target language {lang!r}, which Moses "
                        f"has no tokenization for (the paper protocol would tokenize it as English); name its files "
                        f"for one of {', '.join(sorted(MOSES_LANGUAGES))} (e.g. test.de)")
    return lang


@lru_cache(maxsize=8)
def _moses(lang: str) -> Any:
    return MosesTokenizer(lang=lang)


def moses_tokenize(line: str, lang: str = "de", *, normalize_punct: bool = False) -> str:
    """``tokenizer.perl -l LANG`` with its defaults (escaping on, no aggressive hyphen splitting)."""
    if normalize_punct:
        line = MosesPunctNormalizer(lang=lang).replace_unicode_punct(line)
    return _moses(lang).tokenize(line, return_str=True, escape=True, aggressive_dash_splits=False)


@dataclass
class NgramStats:
    """multi-bleu.perl's corpus totals: clipped matches and hypothesis n-grams for n = 1..4, lengths."""

    correct: list[int] = field(default_factory=lambda: [0] * 4)
    total: list[int] = field(default_factory=lambda: [0] * 4)
    hyp_len: int = 0
    ref_len: int = 0


def multi_bleu_stats(hyps: Sequence[str], refs: Sequence[Sequence[str]], max_n: int = 4) -> NgramStats:
    """Counts as multi-bleu.perl gathers them. ``refs[k][i]`` is reference ``k`` of sentence ``i``."""
    stats = NgramStats(correct=[0] * max_n, total=[0] * max_n)
    for i, hyp in enumerate(hyps):
        words = hyp.split()
        ref_words = [r[i].split() for r in refs]
        closest = min(ref_words, key=lambda r: (abs(len(r) - len(words)), len(r)))
        stats.hyp_len += len(words)
        stats.ref_len += len(closest)
        for n in range(1, max_n + 1):
            hyp_ngrams = Counter(tuple(words[k : k + n]) for k in range(len(words) - n + 1))
            max_ref: Counter[tuple[str, ...]] = Counter()
            for r in ref_words:
                for gram, count in Counter(tuple(r[k : k + n]) for k in range(len(r) - n + 1)).items():
                    max_ref[gram] = max(max_ref[gram], count)
            stats.total[n - 1] += sum(hyp_ngrams.values())
            stats.correct[n - 1] += sum(min(c, max_ref[g]) for g, c in hyp_ngrams.items())
    return stats


def multi_bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> tuple[float, list[float], float]:
    """(BLEU in percent, precisions in percent, brevity penalty), computed as multi-bleu.perl does."""
    s = multi_bleu_stats(hyps, refs)
    precisions = [c / t if t else 0.0 for c, t in zip(s.correct, s.total)]
    if s.hyp_len == 0 or s.ref_len == 0:
        return 0.0, [100 * p for p in precisions], 0.0
    bp = math.exp(1 - s.ref_len / s.hyp_len) if s.hyp_len < s.ref_len else 1.0
    # multi-bleu's my_log(0) = -9999999999: one empty precision zeroes the score.
    log_mean = sum(math.log(p) if p > 0 else -9999999999 for p in precisions) / len(precisions)
    return 100 * bp * math.exp(log_mean), [100 * p for p in precisions], bp


def _versions() -> str:
    """The tokenizer's and repro's versions for the signature; a source checkout on PYTHONPATH has no
    installed metadata for repro, so its own ``__version__`` is used."""
    return f"sacremoses:{metadata.version('sacremoses')}|repro:{repro.__version__}"


def paper_bleu(
    hyps: Sequence[str],
    refs: Sequence[str],
    *,
    lang: str = "de",
    refs_tokenized: bool = False,
    hyps_tokenized: bool = False,
    normalize_punct: bool = False,
) -> BleuResult:
    """get_ende_bleu.sh on detokenized hypotheses (set ``*_tokenized`` for text already Moses-tokenized)."""
    _check_lengths(hyps, refs)
    hyp_tok = [h if hyps_tokenized else moses_tokenize(h, lang, normalize_punct=normalize_punct) for h in hyps]
    ref_tok = [r if refs_tokenized else moses_tokenize(r, lang) for r in refs]
    hyp_at = [compound_split(h) for h in hyp_tok]
    ref_at = [compound_split(r) for r in ref_tok]
    stats = multi_bleu_stats(hyp_at, [ref_at])
    score, precisions, bp = multi_bleu(hyp_at, [ref_at])
    tok = "none" if hyps_tokenized and refs_tokenized else f"moses-{lang}+escape" + ("+normpunct" if normalize_punct else "")
    signature = (f"protocol:paper|script:t2t-get_ende_bleu.sh|tok:{tok}|split:##AT##|metric:multi-bleu.perl"
                 f"|case:mixed|nrefs:1|{_versions()}")
    return BleuResult(score, signature, "paper", precisions, bp, stats.hyp_len, stats.ref_len)


# -- sacreBLEU and the NLTK cross-check --------------------------------------------------------------
def sacre_bleu(hyps: Sequence[str], refs: Sequence[str], *, tokenize: str | None = None) -> BleuResult:
    """sacreBLEU's corpus BLEU of detokenized text, with its signature (13a tokenization by default)."""
    _check_lengths(hyps, refs)
    metric = BLEU(tokenize=tokenize) if tokenize else BLEU()
    res = metric.corpus_score(list(hyps), [list(refs)])
    signature = f"protocol:sacrebleu|{metric.get_signature()}"
    return BleuResult(res.score, signature, "sacrebleu", list(res.precisions), res.bp, res.sys_len, res.ref_len)


def nltk_bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """NLTK's corpus BLEU (percent) of whitespace-tokenized text, no smoothing.

    Equals multi-bleu's whenever every hypothesis has at least 4 tokens; NLTK counts a sentence
    shorter than n as one (unmatched) n-gram, multi-bleu.perl counts it as none.
    """
    _check_lengths(hyps, refs)
    hyp_words = [h.split() for h in hyps]
    if sum(map(len, hyp_words)) == 0:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns when an n-gram order has no match; the score is then 0
        return 100 * corpus_bleu([[r.split()] for r in refs], hyp_words)


def paper_tokens(lines: Sequence[str], *, lang: str = "de", tokenized: bool = False) -> list[str]:
    """The exact token strings the paper protocol scores (for cross-checks)."""
    return [compound_split(line if tokenized else moses_tokenize(line, lang)) for line in lines]


def score(hyps: Sequence[str], refs: Sequence[str], protocol: str, **kwargs: Any) -> BleuResult:
    if protocol == "sacrebleu":
        return sacre_bleu(hyps, refs, **kwargs)
    if protocol == "paper":
        return paper_bleu(hyps, refs, **kwargs)
    raise DataError(f"unknown BLEU protocol '{protocol}' (choose from {', '.join(PROTOCOLS)})")


def read_lines(path: str | os.PathLike[str], what: str | None = None) -> list[str]:
    """The lines of ``path`` as sacreBLEU reads them (:mod:`repro.data.text_lines`: ``\n`` only, BOM
    dropped); with ``what``, an empty file is refused naming it."""
    return text_lines.read_lines(path, what)


def read_references(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a reference file (:func:`read_lines`); one of blank lines only is refused naming it
    (every hypothesis would score 0 against it). A hypothesis of blank lines is a model's output, and scored."""
    return text_lines.with_words(read_lines(path, "reference file"), path, "reference file")


def score_files(hyp_path: str | os.PathLike[str], ref_path: str | os.PathLike[str], protocol: str,
                **kwargs: Any) -> BleuResult:
    """Score a hypothesis file against a reference file, line by line."""
    hyps, refs = read_lines(hyp_path, "hypothesis file"), read_references(ref_path)
    if len(hyps) != len(refs):
        raise DataError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}; "
                        f"line {min(len(hyps), len(refs)) + 1} has no partner")
    return score(hyps, refs, protocol, **kwargs)


def _check_lengths(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references")
