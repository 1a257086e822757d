"""``repro bleu HYP REF --protocol {sacrebleu,paper} [--json]``: corpus BLEU of two line-aligned files."""

from __future__ import annotations

import argparse
import json

from repro import limits
from repro.argtypes import integer, text_input
from repro.errors import DataError, UsageError
from repro.eval.bleu import (PROTOCOLS, moses_language, nltk_bleu, paper_tokens, read_lines, read_references,
                              score_files)
from repro.eval.bootstrap import DEFAULT_RESAMPLES, Interval, paper_interval, sacrebleu_interval


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "bleu", help="score a translation file against a reference file",
        description="sacrebleu: sacreBLEU on detokenized text (report this with its signature). "
        "paper: the tokenized, ##AT##-compound-split multi-bleu of tensor2tensor's get_ende_bleu.sh, "
        "the protocol behind the paper's Table 2.",
    )
    parser.add_argument("hyp", type=text_input, help="hypotheses, one sentence per line (detokenized)")
    parser.add_argument("ref", type=text_input, help="references, line-aligned with HYP")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="sacrebleu")
    parser.add_argument("--lang", default="de", type=_language,
                        help="target language for Moses tokenization (paper protocol)")
    parser.add_argument("--ref-tokenized", action="store_true",
                        help="REF is already Moses-tokenized (paper protocol: do not tokenize it again)")
    parser.add_argument("--hyp-tokenized", action="store_true", help="HYP is already Moses-tokenized (paper protocol)")
    parser.add_argument("--normalize-punct", action="store_true",
                        help="paper protocol: run Moses replace-unicode-punctuation on HYP first (later t2t versions)")
    parser.add_argument("--nltk", action="store_true", help="also report NLTK's corpus BLEU on the paper's tokens")
    parser.add_argument("--json", action="store_true", help="print one JSON object (score, signature, ...)")
    parser.add_argument("--confidence", action="store_true",
                        help="add a 95%% bootstrap interval (sacreBLEU's own: seed $SACREBLEU_SEED or 12345; "
                        "--json gains ci95, confidence_mean, resamples, seed)")
    parser.add_argument("--confidence-n", type=integer, default=DEFAULT_RESAMPLES, metavar="N",
                        help="bootstrap resamples for --confidence (default: %(default)s, as sacreBLEU; at most "
                             f"{limits.CONFIDENCE_N.soft}, with --force {limits.CONFIDENCE_N.hard})")
    parser.add_argument("--force", action="store_true",
                        help=f"allow more than {limits.CONFIDENCE_N.soft} --confidence-n resamples")
    parser.set_defaults(func=run)


def _language(text: str) -> str:
    try:
        return moses_language(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    if args.confidence_n < 2:
        raise DataError(f"--confidence-n must be at least 2 (got {args.confidence_n})")
    limits.CONFIDENCE_N.check(args.confidence_n, force=args.force)
    kwargs = {}
    if args.protocol == "paper":
        kwargs = dict(lang=args.lang, refs_tokenized=args.ref_tokenized, hyps_tokenized=args.hyp_tokenized,
                      normalize_punct=args.normalize_punct)
    result = score_files(args.hyp, args.ref, args.protocol, **kwargs)
    out = result.to_dict()
    if args.nltk:
        hyps = paper_tokens(read_lines(args.hyp, "hypothesis file"), lang=args.lang, tokenized=args.hyp_tokenized)
        refs = paper_tokens(read_references(args.ref), lang=args.lang, tokenized=args.ref_tokenized)
        out["nltk_score"] = nltk_bleu(hyps, refs)
    if args.confidence:
        interval = confidence(args)
        out.update(interval.to_dict())
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(result.format())
        if args.confidence:
            low, high = interval.ci95
            print(f"95% interval [{low:.2f}, {high:.2f}] (bootstrap μ = {interval.mean:.2f} ± {interval.half_width:.2f}, "
                  f"{interval.resamples} resamples, seed {interval.seed})")
        print(result.signature)
        if args.nltk:
            print(f"nltk corpus_bleu (same tokens) = {out['nltk_score']:.2f}")
    return 0


def confidence(args: argparse.Namespace) -> Interval:
    """sacreBLEU's bootstrap over sentences, on the text the chosen protocol scores."""
    hyps, refs = read_lines(args.hyp, "hypothesis file"), read_references(args.ref)
    if args.protocol == "paper":
        hyp_tok = paper_tokens(hyps, lang=args.lang, tokenized=args.hyp_tokenized)
        ref_tok = paper_tokens(refs, lang=args.lang, tokenized=args.ref_tokenized)
        return paper_interval(hyp_tok, ref_tok, args.confidence_n)
    return sacrebleu_interval(hyps, refs, args.confidence_n)
