"""``repro translate``: translate raw text line by line with beam search (Section 6.1) or greedily."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repro.argtypes import existing_file, non_negative_float, non_negative_int, positive_int
from repro.atomic import atomic_write_text
from repro.cli_flags import add_device_argument, runtime_for_loaded, runtime_from_args
from repro.cli_flags import add_precision_argument as _add_precision_argument
from repro.data.corpus import _lines
from repro.decode.settings import TRANSLATION, DecodeSettings
from repro.decode.translate import find_vocab, load_model, translate
from repro.model import Transformer
from repro.model.precision import Precision, resolve_precision


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam", type=positive_int, default=TRANSLATION.beam_size,
                        help=f"beam size (Section 6.1: {TRANSLATION.beam_size})")
    parser.add_argument("--alpha", type=non_negative_float, default=TRANSLATION.alpha,
                        help=f"GNMT length penalty (Section 6.1: {TRANSLATION.alpha})")
    parser.add_argument("--max-len-offset", type=non_negative_int, default=TRANSLATION.max_len_offset,
                        help=f"max output length = input + this (Section 6.1: {TRANSLATION.max_len_offset})")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of beam search")
    parser.add_argument("--max-tokens", type=positive_int, default=2000, help="source tokens x beam per decoding batch")
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


def search_settings(args: argparse.Namespace) -> DecodeSettings:
    """The decoding settings the search flags give."""
    return DecodeSettings(beam_size=args.beam, alpha=args.alpha, max_len_offset=args.max_len_offset)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("translate", help="translate text with a checkpoint (beam 4, alpha 0.6)")
    parser.add_argument("--checkpoint", required=True, type=existing_file, help="a training or averaged checkpoint")
    parser.add_argument("--vocab", type=existing_file, help="vocab.json (default: the one in the checkpoint's run directory)")
    parser.add_argument("--input", default="-", help="raw source text, one sentence a line (default stdin)")
    parser.add_argument("--output", default="-", help="where to write translations (default stdout)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole prefix each step (slow)")
    add_search_arguments(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    runtime = runtime_from_args(args, "translate", resolve_precision=False)
    model, _ = load_model(args.checkpoint, runtime=runtime)
    runtime = runtime_for_loaded(runtime, model, args, "translate")
    vocab = find_vocab(args.checkpoint, args.vocab)
    lines = [line.rstrip("\r\n") for line in sys.stdin] if args.input == "-" else list(_lines(Path(args.input)))
    hyps = translate(model, vocab, lines, search_settings(args), greedy=args.greedy, max_tokens=args.max_tokens,
                     use_cache=not args.no_cache, runtime=runtime)
    text = "".join(h + "\n" for h in hyps)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(args.output), text)
    return 0
