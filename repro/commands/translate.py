"""``repro translate``: translate raw text line by line with beam search (Section 6.1) or greedily."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repro import limits, paths
from repro.argtypes import existing_file, non_negative_float, non_negative_int, output_file_or_stdout, positive_int
from repro.files.writer import atomic_write_text
from repro.cli_flags import add_device_argument, add_lineage_argument, runtime_for_loaded, runtime_from_args
from repro.cli_flags import add_precision_argument as _add_precision_argument
from repro.data.text_lines import read_lines, with_words
from repro.files.reader import read_standard_input
from repro.files.text_decoding import split_lines
from repro.decode.settings import TRANSLATION, DecodeSettings
from repro.decode.fit import check_output_lengths
from repro.errors import DataError
from repro.decode.translate import decode_settings_of, find_vocab, load_model, translate, vocab_path
from repro.model import Transformer
from repro.model.precision import Precision, resolve_precision


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The search flags; each, when not given, takes the checkpoint's recipe's value (a parser's
    checkpoint: Section 6.3's beam 21, alpha 0.3, +300), or Section 6.1's for an older checkpoint."""
    parser.add_argument("--beam", type=positive_int, default=None,
                        help=f"beam size (default: the checkpoint's recipe; Section 6.1: {TRANSLATION.beam_size})")
    parser.add_argument("--alpha", type=non_negative_float, default=None,
                        help=f"GNMT length penalty (default: the checkpoint's recipe; Section 6.1: {TRANSLATION.alpha})")
    parser.add_argument("--max-len-offset", type=non_negative_int, default=None,
                        help="max output length = input + this (default: the checkpoint's recipe; Section 6.1: "
                             f"{TRANSLATION.max_len_offset})")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of beam search")
    parser.add_argument("--max-tokens", type=positive_int, default=None,
                        help="source tokens x beam per decoding batch (default: the checkpoint's recipe's)")
    parser.add_argument("--force", action="store_true",
                        help=f"allow a --beam above {limits.BEAM.soft} (at most {limits.BEAM.hard}) and a "
                             f"--max-len-offset above {limits.MAX_LEN_OFFSET.soft}")
    add_device_argument(parser)
    add_precision_argument(parser)


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    _add_precision_argument(parser)


def precision_from_args(args: argparse.Namespace, model: Transformer, verb: str) -> Precision:
    """The precision ``--precision`` resolves to on the model's device, said on stderr
    (older callers; the verbs resolve a whole runtime with :func:`repro.cli_flags.runtime_from_args`)."""
    precision = resolve_precision(args.precision, next(model.parameters()).device)
    print(f"repro {verb}: {precision.describe()}", file=sys.stderr)
    return precision


def check_search_flags(args: argparse.Namespace) -> None:
    """The search flags given, within their limits (:mod:`repro.limits`), before anything is loaded."""
    if args.beam is not None:
        limits.BEAM.check(args.beam, force=args.force)
    if args.alpha is not None:
        limits.ALPHA.check(args.alpha)
    if args.max_len_offset is not None:
        limits.MAX_LEN_OFFSET.check(args.max_len_offset, force=args.force)


def search_settings(args: argparse.Namespace, state: dict | None = None, verb: str = "translate") -> DecodeSettings:
    """The checkpoint's own decoding settings (``state``: the loaded checkpoint; Section 6.1's when it
    has none), with the search flags given on the command line applied; said on stderr."""
    base = decode_settings_of(state or {})
    settings = base or TRANSLATION
    changes = {field: getattr(args, flag) for flag, field in (("beam", "beam_size"), ("alpha", "alpha"),
                                                              ("max_len_offset", "max_len_offset"),
                                                              ("max_tokens", "max_tokens"))
               if getattr(args, flag, None) is not None}
    settings = settings.replace(**changes) if changes else settings
    origin = f"recipe {state['recipe'].get('name')}" if base is not None else "Section 6.1 (no recipe in the checkpoint)"
    print(f"repro {verb}: beam {settings.beam_size}, alpha {settings.alpha}, input + {settings.max_len_offset} "
          f"(the checkpoint's {origin}{'; flags: ' + ', '.join(changes) if changes else ''})", file=sys.stderr)
    return settings


def _input_lines(source: str) -> list[str]:
    """The sentences to translate, split as :mod:`repro.data.text_lines` splits them; none is refused."""
    if source != "-":
        return with_words(read_lines(Path(source), "input to translate"), source, "input to translate")
    lines = split_lines(read_standard_input("the input to translate", error=DataError))
    if not lines:
        raise DataError("<stdin>: the input to translate is empty (no line to read)")
    return with_words(lines, "<stdin>", "input to translate")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("translate", help="translate text with a checkpoint (beam 4, alpha 0.6)")
    parser.add_argument("--checkpoint", required=True, type=existing_file, help="a training or averaged checkpoint")
    parser.add_argument("--vocab", type=existing_file, help="vocab.json (default: the one in the checkpoint's run directory)")
    parser.add_argument("--input", default="-", help="raw source text, one sentence a line (default stdin)")
    parser.add_argument("--output", default="-", type=output_file_or_stdout,
                        help="where to write translations (default stdout)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole prefix each step (slow)")
    add_search_arguments(parser)
    add_lineage_argument(parser, "translate with")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_search_flags(args)
    paths.not_an_input(args.output, [args.input, args.checkpoint, vocab_path(args.checkpoint, args.vocab)],
                       "output (--output)")
    runtime = runtime_from_args(args, "translate", resolve_precision=False)
    model, state = load_model(args.checkpoint, runtime=runtime, allow_no_lineage=args.allow_no_lineage)
    runtime = runtime_for_loaded(runtime, model, args, "translate")
    settings = search_settings(args, state)
    vocab = find_vocab(args.checkpoint, args.vocab, model, state)
    lines = _input_lines(args.input)
    check_output_lengths(model.cfg, vocab, lines, settings, "<stdin>" if args.input == "-" else args.input)
    hyps = translate(model, vocab, lines, settings, greedy=args.greedy, use_cache=not args.no_cache, runtime=runtime)
    text = "".join(h + "\n" for h in hyps)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(args.output), text)
    return 0
