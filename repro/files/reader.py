"""The one reader: every file repro reads is opened here, and refused here by name when it is not one.

A file is read only when it is

- **a regular file**, or a pipe where a stream is expected (``stream=True``: the text inputs of
  ``bleu``, ``evalb`` and ``translate``, so that ``<(zcat ref.gz)`` works). A directory, a character
  device (``/dev/zero``, ``/dev/urandom``), a socket, a pipe where a file is expected, and a symbolic
  link to any of them are refused before a byte is read. Symbolic links to regular files are
  followed (a data set linked into place is a data set);
- **within its size bound** (:mod:`repro.limits`: 64 MiB for records, configs, claims and
  vocabularies, 4 GiB for text read whole, 1 MiB for one line of text); a pipe is counted as it is
  read, so a stream without end stops at the bound;
- **text by the one decoding rule** (:mod:`repro.files.text_decoding`: UTF-8; UTF-16/32 named and
  refused; NUL bytes refused; byte-order marks dropped, with a warning naming the line when one is
  not at the start);
- **JSON and TOML parsed strictly and nested at most** :data:`repro.limits.NESTING` deep
  (:mod:`repro.files.strict_json`);
- **checkpoints and arrays without pickle** (``torch.load(weights_only=True)``, ``allow_pickle=False``),
  no larger than the memory this machine has free; a checkpoint's bytes are checked against the CRC-32
  its archive records for each entry (torch does not check them: a flipped byte inside a tensor would
  load as a wrong weight).

Every refusal is one line naming the file (and the line, where there is one), raised as the
caller's :class:`~repro.errors.ReproError` class (exit 2), never a traceback.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import numpy as np
import torch

from repro.errors import ReproError, UsageError
from repro.files import strict_json
from repro.files.text_decoding import (BOM, SAMPLE_BYTES, decode, decode_line, drop_marks, mark_warning,
                                      refuse_wide, warn)
from repro.limits import LINE_BYTES, NESTING, RECORD_BYTES, TEXT_BYTES

Pathish = str | os.PathLike[str]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (``a regular file``, ``a pipe``, ...)."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file")


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def inspect(path: Pathish, what: str = "file", *, stream: bool = False,
            error: type[ReproError] = UsageError) -> os.stat_result:
    """The status of ``path`` (links followed) if it may be read as ``what``: a regular file, or a
    pipe when ``stream``; else ``error`` naming it. Nothing is opened."""
    try:
        st = os.stat(path)
    except ValueError:   # a NUL character in the name
        raise error(f"{path!r}: {what}: a path cannot hold a NUL character") from None
    except FileNotFoundError:
        if os.path.islink(path):
            raise error(f"{path}: {what} is a symbolic link to {os.readlink(path)}, which does not exist") from None
        raise error(f"{path}: {what} not found") from None
    except OSError as err:
        raise _cannot(path, what, err, error) from None
    return _allowed(path, st, what, stream, error)   # its refusal may be a ValueError too (ConfigError)


def present(path: Pathish, what: str = "file", *, error: type[ReproError] = UsageError) -> bool:
    """Whether ``path``, a file that may be absent (a run's record, log or vocabulary), is there to be
    read: False when nothing is at that name; True when a regular file is (links followed); anything
    else there (a directory, a device, a dangling link or a loop of links) is refused as :func:`inspect`
    refuses it, never taken for "not there"."""
    if not os.path.lexists(path):
        return False
    inspect(path, what, error=error)
    return True


def folder_present(path: Pathish, what: str = "folder", *, error: type[ReproError] = UsageError) -> bool:
    """Whether ``path``, a folder that may be absent (a run's ``checkpoints/`` or ``evaluations/``), is
    there to be listed: False when nothing is at that name; True when a directory is (links followed);
    a file, a device, a dangling link or a loop of links there is refused by name, never taken for an
    empty folder (a run whose checkpoints read as "none" would be checked, or resumed, as another run)."""
    if not os.path.lexists(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise _cannot(path, what, err, error) from None
    if not stat.S_ISDIR(mode):
        raise error(f"{path}: {what} is not a directory ({kind_of(mode)})")
    return True


def _cannot(path: Pathish, what: str, err: OSError, error: type[ReproError]) -> ReproError:
    why = {errno.ELOOP: "a loop of symbolic links", errno.ENOTDIR: "a part of the path is a file, not a folder",
           errno.ENAMETOOLONG: "the name is too long"}.get(err.errno or 0, err.strerror or type(err).__name__)
    return error(f"{path}: cannot read the {what} ({why})")


def _allowed(path: Pathish, st: os.stat_result, what: str, stream: bool, error: type[ReproError]) -> os.stat_result:
    kind = kind_of(st.st_mode)
    if kind == "a regular file" or (stream and kind == "a pipe"):
        return st
    if kind == "a directory":
        raise error(f"{path}: {what} is a directory, not a file")
    link = f" (a symbolic link to {os.path.realpath(path)})" if os.path.islink(path) else ""
    wanted = "a regular file or a pipe" if stream else "a regular file"
    raise error(f"{path}: {what} is {kind}{link}, not {wanted}")


@contextmanager
def opened(path: Pathish, what: str = "file", *, stream: bool = False,
           error: type[ReproError] = UsageError) -> Iterator[tuple[IO[bytes], os.stat_result]]:
    """``path`` open for reading in binary, with its status, if :func:`inspect` allows it. The file
    opened is checked again (it may have been replaced between the look and the open)."""
    st = inspect(path, what, stream=stream, error=error)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | (0 if stat.S_ISFIFO(st.st_mode) else os.O_NONBLOCK)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise _cannot(path, what, err, error) from None
    try:
        opened_st = _allowed(path, os.fstat(fd), what, stream, error)
        if stat.S_ISREG(opened_st.st_mode):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh, opened_st


def _read_bounded(fh: IO[bytes], size: int, path: Pathish, what: str, limit: int, error: type[ReproError]) -> bytes:
    """At most ``limit`` bytes of ``fh`` (a file of ``size`` bytes; 0: unknown, a pipe or a kernel file),
    read in chunks: no buffer of ``limit`` bytes is asked for up front (under ``ulimit -v`` it would fail)."""
    if size > limit:
        raise error(f"{path}: {what} is {_size(size)}, more than the {_size(limit)} repro reads from one")
    chunks, total = [], 0
    want = size + 1 if size else 1 << 20
    try:
        while chunk := fh.read(min(want, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{path}: {what} holds more than the {_size(limit)} repro reads from one")
            want = 1 << 20
    except OSError as err:
        raise _cannot(path, what, err, error) from None
    return b"".join(chunks)


def read_bytes(path: Pathish, what: str = "file", *, limit: int = RECORD_BYTES.hard, stream: bool = False,
               error: type[ReproError] = UsageError) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them."""
    with opened(path, what, stream=stream, error=error) as (fh, st):
        return _read_bounded(fh, st.st_size if stat.S_ISREG(st.st_mode) else 0, path, what, limit, error)


def read_text(path: Pathish, what: str = "file", *, limit: int = TEXT_BYTES.hard, stream: bool = False,
              error: type[ReproError] = UsageError, undecodable: str = "refuse") -> str:
    """The text of ``path`` by the decoding rule of :mod:`repro.files.text_decoding`."""
    data = read_bytes(path, what, limit=limit, stream=stream, error=error)
    return decode(data, str(path), error=error, undecodable=undecodable)


def iter_lines(path: Pathish, what: str = "file", *, stream: bool = False, error: type[ReproError] = UsageError,
               undecodable: str = "refuse") -> Iterator[str]:
    """The lines of ``path`` one at a time (``\\n`` only ends a line; each at most
    :data:`repro.limits.LINE_BYTES`), decoded line by line so that an error names its line. For
    files of any size (a training corpus): only one line is held at a time."""
    source = str(path)
    marks: list[int] = []
    with opened(path, what, stream=stream, error=error) as (fh, _):
        head = fh.peek(SAMPLE_BYTES)[:SAMPLE_BYTES] if hasattr(fh, "peek") else b""
        refuse_wide(head, source, error)
        lineno = 0
        while True:
            try:
                raw = fh.readline(LINE_BYTES.hard + 1)
            except OSError as err:
                raise _cannot(path, what, err, error) from None
            if not raw:
                break
            lineno += 1
            if len(raw) > LINE_BYTES.hard and not raw.endswith(b"\n"):
                raise error(f"{source}:{lineno}: a line longer than {_size(LINE_BYTES.hard)} ({LINE_BYTES.why})")
            line = decode_line(raw, lineno, source, error=error, undecodable=undecodable)
            if BOM in line:
                marks.append(lineno)
                line = line.replace(BOM, "")
            yield line
    if marks:
        warn(mark_warning(source, marks))


def read_standard_input(what: str = "standard input", *, error: type[ReproError] = UsageError) -> str:
    """What standard input holds, as text by the decoding rule, at most :data:`repro.limits.TEXT_BYTES`."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:   # a text stream put in its place (tests): already text
        return drop_marks(sys.stdin.read(TEXT_BYTES.hard + 1), "<stdin>")
    head = buffer.read(SAMPLE_BYTES)   # binary data (``< /dev/zero``) is refused here, not after 4 GiB
    refuse_wide(head, "<stdin>", error)
    if b"\x00" in head:
        raise error("<stdin>: a NUL byte: binary data, not text")
    data = head + _read_bounded(buffer, 0, "<stdin>", what, TEXT_BYTES.hard - len(head), error)
    return decode(data, "<stdin>", error=error)


def read_json(path: Pathish, what: str = "file", *, error: type[ReproError] = UsageError, allow_nan: bool = False,
              limit: int = RECORD_BYTES.hard) -> Any:
    """The JSON in ``path``, parsed strictly (:func:`repro.files.strict_json.loads`)."""
    text = read_text(path, what, limit=limit, error=error)
    return strict_json.loads(text, str(path), error=error, allow_nan=allow_nan)


def read_toml(path: Pathish, what: str = "file", *, error: type[ReproError] = UsageError) -> dict[str, Any]:
    """The TOML table in ``path``; a syntax error, or nesting deeper than :data:`repro.limits.NESTING`,
    raises ``error`` naming the file."""
    text = read_text(path, what, limit=RECORD_BYTES.hard, error=error)
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise error(f"{path}: nested deeper than {NESTING.hard} levels ({NESTING.why})") from None
    except tomllib.TOMLDecodeError as err:
        raise error(f"{path}: not valid TOML ({err})") from None
    except ValueError as err:   # an integer of more than 4300 digits
        raise error(f"{path}: not valid TOML ({str(err).splitlines()[0][:200]})") from None
    depth = strict_json.nesting_depth(data)
    if depth > NESTING.hard:
        raise error(f"{path}: nested {depth} levels deep, more than {NESTING.hard} ({NESTING.why})")
    return data


def load_torch(path: Pathish, what: str = "checkpoint", *, map_location: Any = "cpu",
               error: type[ReproError] = UsageError) -> Any:
    """What ``torch.load(weights_only=True)`` reads from the regular file ``path`` (no pickle runs).
    Errors of torch's own (a truncated or foreign file) propagate for the caller to word."""
    with opened(path, what, error=error) as (fh, _):
        _check_crcs(fh, path, what, error)
        return torch.load(fh, map_location=map_location, weights_only=True)


def _check_crcs(fh: IO[bytes], path: Pathish, what: str, error: type[ReproError]) -> None:
    """Refuse a torch archive (a zip file) an entry of which does not match the CRC-32 recorded for it
    (an entry recorded without one, CRC 0, is passed over); a file that is no zip archive is left for
    torch to word. ``fh`` is back at its start afterwards."""
    try:
        if not zipfile.is_zipfile(fh):
            return
        with zipfile.ZipFile(fh) as archive:
            for entry in archive.infolist():
                if entry.CRC:
                    with archive.open(entry) as member:   # zipfile compares the CRC-32 at the entry's end
                        while member.read(1 << 24):
                            pass
    except (zipfile.BadZipFile, EOFError, NotImplementedError, ValueError) as err:
        raise error(f"{path}: {what} is corrupt ({str(err)[:200]}): its bytes are not those it was written "
                    "with; use another copy or an earlier checkpoint") from None
    except OSError as err:
        raise _cannot(path, what, err, error) from None
    finally:
        fh.seek(0)


def load_array(path: Pathish, what: str = "array", *, error: type[ReproError] = UsageError) -> Any:
    """The ``.npy`` array in the regular file ``path``, memory-mapped, without pickle."""
    inspect(path, what, error=error)
    return np.load(path, mmap_mode="r", allow_pickle=False)
