"""The one rule for turning a file's bytes into text: UTF-8, and nothing that only looks like it.

- **UTF-16 and UTF-32 are named and refused**, with a byte-order mark or without one: text of
  those encodings has NUL bytes at fixed places (every second byte of Latin text in UTF-16, three
  of four in UTF-32), which no UTF-8 text has. Decoded as UTF-8 it would read as garbage with NULs
  between the letters and score as such; converted (``iconv -f UTF-16 -t UTF-8``) it is fine.
- **A NUL byte** anywhere else is binary data, not text: refused naming the line.
- **A UTF-8 byte-order mark** (U+FEFF) is not text. At the start of a file it is dropped, as every
  reference tool drops it; anywhere else (two files joined with ``cat``: the second one's mark is
  now at the start of a line in the middle) it is removed with a warning naming the first line it
  was on, so that it cannot glue itself to a word and cost that sentence its n-grams.
- **Bytes that are not UTF-8** are refused naming the line and the byte, except where the caller
  says ``undecodable="keep"`` (``repro evalb``: EVALB compares bytes, so a treebank in Latin-1 is
  scored as EVALB scores it; the bytes are kept as surrogates and written back unchanged).
- **Lines** end at ``\\n`` only, a trailing ``\\r`` dropped (:func:`split_lines`): never at the other
  characters ``str.splitlines`` breaks on (U+0085, U+2028, ...), which occur inside real sentences.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from repro.errors import ReproError

BOM = "\ufeff"
_UTF8_BOM = BOM.encode("utf-8")
#: How much of a file's start is looked at to tell UTF-16/32 from UTF-8.
SAMPLE_BYTES = 4096

Warn = Callable[[str], None]


def printable(text: str) -> str:
    """``text`` with what no terminal can print (an input's bytes kept as surrogates, control
    characters but tab and newline) escaped as ``\\xNN``/``\\udcNN``: a message quoting a file prints whole."""
    text = text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")
    return "".join(c if c.isprintable() or c in "\t\n" else c.encode("unicode_escape").decode("ascii") for c in text)


def one_line(text: str) -> str:
    """:func:`printable` ``text`` on one line: a newline or carriage return in it (a file name that
    holds one) is shown as ``\\n``/``\\r``, so that an error stays the one line it is."""
    return printable(text).replace("\n", "\\n")


def unprintable(text: str) -> str | None:
    """The first character of ``text`` that is not printable (a control character, a line or paragraph
    separator, a zero-width or other format character pasted from a web page), or None: what goes into a
    job script (a SLURM job name, a partition) holds printable text only."""
    return next((c for c in text if not c.isprintable()), None)


def warn(message: str) -> None:
    """A warning about an input that was read anyway, on stderr (one line, naming the file)."""
    print(one_line(f"repro: WARNING: {message}"), file=sys.stderr)


def wide_encoding(head: bytes) -> str | None:
    """``"UTF-16"``/``"UTF-32"`` (with the byte order) when ``head``, a file's first bytes, is text
    in one of them, by its byte-order mark or by where its NUL bytes are; else None."""
    for mark, name in ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
                       (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE")):
        if head.startswith(mark):
            return f"{name} (with a byte-order mark)"
    if b"\x00" not in head:
        return None
    sample = head[:SAMPLE_BYTES]

    def zeros(period: int, offset: int) -> float:
        picked = sample[offset::period]
        return picked.count(0) / len(picked) if picked else 0.0
    if len(sample) >= 4:
        if zeros(4, 2) > 0.9 and zeros(4, 3) > 0.9 and zeros(4, 0) < 0.5:
            return "UTF-32LE (without a byte-order mark)"
        if zeros(4, 0) > 0.9 and zeros(4, 1) > 0.9 and zeros(4, 3) < 0.5:
            return "UTF-32BE (without a byte-order mark)"
    if zeros(2, 1) > 0.6 and zeros(2, 0) < 0.2:
        return "UTF-16LE (without a byte-order mark)"
    if zeros(2, 0) > 0.6 and zeros(2, 1) < 0.2:
        return "UTF-16BE (without a byte-order mark)"
    return None


def refuse_wide(head: bytes, source: str, error: type[ReproError]) -> None:
    """Raise ``error`` naming ``source`` when ``head`` is UTF-16 or UTF-32 text (:func:`wide_encoding`)."""
    name = wide_encoding(head)
    if name is not None:
        raise error(f"{source}: text in {name}, not UTF-8; convert it first "
                    f"(iconv -f {name.split()[0]} -t UTF-8)")


def _line_at(data: bytes | str, index: int) -> int:
    newline = b"\n" if isinstance(data, bytes) else "\n"
    return data.count(newline, 0, index) + 1  # type: ignore[arg-type]


def decode(data: bytes, source: str, *, error: type[ReproError], undecodable: str = "refuse",
           on_warning: Warn = warn) -> str:
    """``data`` (a whole file's bytes) as text by the rules above; ``error`` names ``source`` and the line."""
    refuse_wide(data[:SAMPLE_BYTES], source, error)
    nul = data.find(b"\x00")
    if nul >= 0:
        raise error(f"{source}:{_line_at(data, nul)}: a NUL byte: binary data, not text")
    try:
        text = data.decode("utf-8", errors="strict" if undecodable == "refuse" else "surrogateescape")
    except UnicodeDecodeError as err:
        line = _line_at(data, err.start)
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise error(f"{source}:{line}: not valid UTF-8 ({err.reason} at byte {column} of the line; "
                    "if the file is in another encoding, convert it to UTF-8 first)") from None
    return drop_marks(text, source, on_warning=on_warning)


def drop_marks(text: str, source: str, *, on_warning: Warn = warn) -> str:
    """``text`` without byte-order marks: one at its very start silently, any other with a warning
    naming the first line it was on and how many more there were."""
    if text.startswith(BOM):
        text = text[len(BOM):]
    at = text.find(BOM)
    if at < 0:
        return text
    on_warning(mark_warning(source, sorted({_line_at(text, i) for i in _all(text, BOM)})))
    return text.replace(BOM, "")


def mark_warning(source: str, lines: list[int]) -> str:
    """The warning for byte-order marks removed from ``lines`` of ``source``."""
    more = f" (and on {len(lines) - 1} more line(s))" if len(lines) > 1 else ""
    return (f"{source}:{lines[0]}: a byte-order mark (U+FEFF) inside the text{more} removed: two files joined? "
            "It is no part of a word")


def _all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def decode_line(raw: bytes, lineno: int, source: str, *, error: type[ReproError], undecodable: str = "refuse") -> str:
    """One line's bytes (as read, with its ``\\n``) as text, without its line ending; the first line's
    leading byte-order mark dropped. Marks elsewhere are left for the caller (:func:`drop_marks`)."""
    if b"\x00" in raw:
        raise error(f"{source}:{lineno}: a NUL byte: binary data, not text")
    try:
        line = raw.decode("utf-8", errors="strict" if undecodable == "refuse" else "surrogateescape")
    except UnicodeDecodeError as err:
        raise error(f"{source}:{lineno}: not valid UTF-8 ({err.reason} at byte {err.start + 1} of the line; if the "
                    "file is in another encoding, convert it to UTF-8 first)") from None
    if lineno == 1 and line.startswith(BOM):
        line = line[len(BOM):]
    line = line[:-1] if line.endswith("\n") else line
    return line[:-1] if line.endswith("\r") else line


def split_lines(text: str) -> list[str]:
    """``text``'s lines: split at ``\\n`` only, a final ``\\n`` ending the last line, a trailing
    ``\\r`` dropped, a leading byte-order mark dropped."""
    text = text.removeprefix(BOM)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
