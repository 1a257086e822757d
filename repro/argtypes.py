"""Strict argparse types for the ``repro`` flags: a value is parsed whole or refused by name.

``type=int`` alone takes ``--seed -3`` or ``--max-steps 0``; these types refuse what the
flag cannot mean (argparse then exits 2 naming the flag), so no command starts work on it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import NoReturn

from repro import limits, numerals, paths
from repro.errors import UsageError
from repro.files.text_decoding import one_line, unprintable


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (``repro train: error: argument --seed: ...``)
    and exits 2, like every other refusal of bad input; ``--help`` still shows the usage. Every
    parser of repro's, the entry points ``repro bench`` and ``repro diagnose`` run included, is one."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, one_line(f"{self.prog}: error: {message} (see '{self.prog} --help')") + "\n")


def integer(text: str) -> int:
    """An integer in ASCII digits, with an optional sign (``int()`` also takes ``1_0`` and ``١٠``:
    :mod:`repro.numerals`); its range the command checks."""
    value = numerals.integer(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected an integer in ASCII digits, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer > 0 (steps, beam width, token budgets, lengths)."""
    value = integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds, thread counts where 0 means the default, error limits)."""
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (the length penalty alpha of Section 6.1)."""
    value = numerals.real(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number in ASCII digits, got {text!r}")
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def existing_file(text: str) -> str:
    """A path to a regular file that exists (checkpoints, configs, vocabularies): what the one reader
    reads (:func:`repro.files.reader.inspect`); kept as the text given."""
    return _checked(paths.existing_file, text, "file")


def text_input(text: str) -> str:
    """A text file to read line by line (hypotheses, references, trees): a regular file or a pipe
    (``<(zcat ref.gz)``), never a device or a folder; kept as the text given."""
    return _checked(lambda path, what: paths.existing_file(path, what, stream=True), text, "text file")


def existing_dir(text: str) -> str:
    """A path to a directory that exists (run directories, claims and results directories); kept as given."""
    return _checked(paths.existing_dir, text, "directory")


def _checked(check, text: str, what: str) -> str:
    if not text:   # Path("") is ".": an unset shell variable named the working folder, or the default was taken
        raise argparse.ArgumentTypeError(f"an empty path names no {what} (leave the flag out for the default)")
    try:
        check(text, what)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _not_stdout(text: str, what: str) -> None:
    if text == "-":
        raise argparse.ArgumentTypeError(f"'-': this flag names an {what}; standard output is not one of its "
                                         "outputs (give a path, e.g. ./-)")


def output_file(text: str) -> str:
    """A path a file can be written to (not a directory; a writable folder that exists or can be
    made; not ``-``, which would be a file of that name; not one of a run's own records), checked when
    the flags are read; kept as the text given. Nothing is created."""
    _not_stdout(text, "output file")
    _checked(paths.not_a_run_record, text, "output file")
    return _checked(paths.output_file, text, "output file")


def positive_float(text: str) -> float:
    """A finite number > 0 (a duration to measure for)."""
    value = non_negative_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def output_path(text: str) -> Path:
    """An :func:`output_file`, as a Path (a benchmark's ``--out``)."""
    return Path(output_file(text))


def output_file_or_stdout(text: str) -> str:
    """``-`` (standard output) or an :func:`output_file`."""
    return text if text == "-" else output_file(text)


def output_dir(text: str) -> str:
    """A directory that exists or can be created, and can be written in (not ``-``); kept as given."""
    _not_stdout(text, "output directory")
    return _checked(paths.output_dir, text, "output directory")


def seed(text: str) -> int:
    """A random seed: an integer in 0 .. 2**31 - 1 (:data:`repro.limits.SEED`)."""
    value = non_negative_int(text)
    try:
        return limits.SEED.check(value)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("seed ")) from None


def sentence(text: str) -> str:
    """A sentence to encode (``report --attention-sentence``): some text besides white space (an empty
    one skipped its figure without a word; a blank one drew the map of a lone end-of-sentence)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must hold a sentence, got {text!r}")
    return text


def script_text(text: str) -> str:
    """Text that goes into a job script (a SLURM job name): printable characters only (a newline would
    start a line of its own in the script; a zero-width space makes a name SLURM does not know)."""
    bad = unprintable(text)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: holds the unprintable character {bad!r}; a job script takes "
                                         "printable text only")
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def not_blank(text: str) -> str:
    """A name whose absence has a default (``evaluate --dataset``, ``--data-dir``, ``status --experiment``):
    an empty or blank one, as an unset shell variable gives, took the default without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r} (leave the flag out for the default)")
    return text


def claim_prefix(text: str) -> str:
    """``--only PREFIX``: the start of a claim id; an empty or blank one would select every claim (each
    id starts with ``""``), so ``--only ""`` from an unset shell variable would run them all."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be the start of a claim id, got {text!r} (an empty prefix "
                                         "selects every claim; leave the flag out for all)")
    return text


def name_list(text: str) -> tuple[str, ...]:
    """``NAME,NAME``: names, each once (``--rows``, ``--stages``); an empty name (``base,,A-h1``, ``""``)
    or a name given twice (which would run, or be dropped, without a word) is refused."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty name in {text!r} (names are separated by single commas)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(repeated)} given more than once in {text!r}")
    return names
