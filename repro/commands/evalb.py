"""``repro evalb GOLD TEST``: labelled bracket F1 like ``evalb -p COLLINS.prm`` (Table 4, Section 6.3)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro.argtypes import non_negative_int, text_input
from repro.files.text_decoding import printable
from repro.eval.evalb import EvalbResult, evalb_files
from repro.eval.evalb_report import format_report
from repro.eval.evalb_params import COLLINS, SAMPLE, EvalbParams, read_prm

_BUILTIN = {"collins": COLLINS, "sample": SAMPLE}
#: What evalb.c prints when GOLD and TEST have different numbers of lines.
_LINES_UNMATCH = "Number of lines unmatch"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evalb", help="score one-tree-per-line parses against gold trees (EVALB, COLLINS.prm)",
        description="Score TEST against GOLD (one bracketed tree per line) exactly as evalb -p COLLINS.prm "
                    "does. Prints EVALB's report, or with --json the 'All' summary.")
    parser.add_argument("gold", type=text_input, help="gold trees, one per line")
    parser.add_argument("test", type=text_input, help="parser output, one tree per line, same order")
    parser.add_argument("--param", "-p", metavar="FILE",
                        help="EVALB .prm file, or a built-in: COLLINS (default) or SAMPLE (EVALB's sample.prm)")
    parser.add_argument("--max-error", "-e", type=non_negative_int, metavar="N",
                        help="stop after more than N error sentences (overrides MAX_ERROR)")
    parser.add_argument("--cutoff", "-c", type=non_negative_int, metavar="N",
                        help="length cut-off of the second summary (overrides CUTOFF_LEN)")
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="exit 0 even when GOLD and TEST have different numbers of lines, GOLD has no trees, or "
                             "sentences are left out of the scores (malformed trees, words that differ, empty test "
                             "lines: EVALB's behaviour); by default the report is printed and the exit code is 2")
    parser.set_defaults(func=run)


def _params(args: argparse.Namespace) -> EvalbParams:
    if args.param is None:
        params = COLLINS
    elif not Path(args.param).exists() and args.param.lower() in _BUILTIN:
        params = _BUILTIN[args.param.lower()]
    else:
        params = read_prm(args.param)
    if args.max_error is not None:
        params = params.replace(max_error=args.max_error)
    if args.cutoff is not None:
        params = params.replace(cutoff_len=args.cutoff)
    return params


def _incomplete(args: argparse.Namespace, result: EvalbResult) -> str | None:
    """Why the scores do not cover every sentence of GOLD and TEST (unequal line counts, no gold
    trees, malformed trees, sentences whose words differ, test lines without words), or None. EVALB reports this only on stderr and exits 0; a script would take the scores
    of part of its output for the whole."""
    unmatched = [m for m in result.messages if _LINES_UNMATCH in m]
    if unmatched:
        return (f"{args.gold}, {args.test}: the files have different numbers of lines ({unmatched[0]}); "
                "the scores above cover only the lines both have (--allow-mismatch accepts this)")
    if not result.rows:
        return f"{args.gold}: no gold trees to score (--allow-mismatch accepts this)"
    summary = result.all
    left_out = summary.error_sentences + summary.skipped_sentences
    if left_out:
        first = (f"line {result.messages[0]}" if result.messages else
                 f"line {next(r.line for r in result.rows if r.status == 2)}: a test line without words")
        return (f"{args.gold}, {args.test}: {left_out} of {summary.sentences} sentences are not scored "
                f"({summary.error_sentences} malformed or not matching gold/test, {summary.skipped_sentences} "
                f"skipped; first: {first}); the scores above cover the other {summary.valid_sentences} only "
                "(--allow-mismatch accepts this)")
    return None


def run(args: argparse.Namespace) -> int:
    result = evalb_files(args.gold, args.test, _params(args))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))   # JSON escapes what is not UTF-8 (\udcXX)
    else:
        sys.stdout.write(printable(format_report(result)))   # an input's bytes that are not UTF-8 as \xNN
        for message in result.messages:
            print(printable(message), file=sys.stderr)
    problem = _incomplete(args, result)
    if problem and not args.allow_mismatch:
        sys.stdout.flush()
        print(printable(f"repro: error: {problem}"), file=sys.stderr)
        return 2
    return 0
