"""EVALB parameter files (``.prm``) and the COLLINS.prm settings used for Table 4 (Section 6.3).

EVALB (Sekine & Collins, 1997) reads ``KEYWORD value`` lines; ``#`` starts a comment line and
lines shorter than three characters are ignored. The keywords and their meaning are those of
``evalb.c``:

- ``DEBUG``, ``MAX_ERROR`` (stop after this many errors), ``CUTOFF_LEN`` (second summary for
  sentences of at most this length), ``LABELED`` (0: unlabelled brackets);
- ``DELETE_LABEL X``: a pre-terminal ``X`` is removed with its word (punctuation), a
  non-terminal ``X`` is not scored (``TOP``);
- ``DELETE_LABEL_FOR_LENGTH X``: pre-terminals not counted in the sentence length;
- ``QUOTE_LABEL X``: pre-terminals whose quote word may be re-inserted on a length mismatch;
- ``EQ_LABEL A B`` / ``EQ_WORD A B``: pairs that compare equal, in both directions.

COLLINS.prm is not shipped with this repository, so its settings are built in as
:data:`COLLINS`, the default of ``repro evalb``. Unlike ``evalb.c``, which prints a warning and
goes on, an unknown keyword or a malformed value is an error here: a typo in a parameter file
would otherwise silently change the score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from repro.errors import ConfigError
from repro.files.reader import read_text
from repro.limits import RECORD_BYTES

_C_SPACE = " \t\n\v\f\r"  # C isspace() in the "C" locale


@dataclass(frozen=True)
class EvalbParams:
    """The settings of one EVALB run; the defaults are evalb.c's own (no parameter file)."""

    debug: int = 0
    max_error: int = 10
    cutoff_len: int = 40
    labeled: bool = True
    delete_labels: tuple[str, ...] = ()
    delete_labels_for_length: tuple[str, ...] = ()
    quote_labels: tuple[str, ...] = ()
    eq_labels: tuple[tuple[str, str], ...] = ()
    eq_words: tuple[tuple[str, str], ...] = field(default=())

    def replace(self, **changes) -> "EvalbParams":
        return replace(self, **changes)

    def label_equal(self, a: str, b: str) -> bool:
        """evalb.c ``label_comp``: identical, or an ``EQ_LABEL`` pair in either order."""
        return a == b or any((a, b) in ((x, y), (y, x)) for x, y in self.eq_labels)

    def word_equal(self, a: str, b: str) -> bool:
        """evalb.c ``word_comp``: identical, or an ``EQ_WORD`` pair in either order."""
        return a == b or any((a, b) in ((x, y), (y, x)) for x, y in self.eq_words)


#: COLLINS.prm, the parameter file behind the parsing F1 scores of Table 4: labelled brackets,
#: punctuation pre-terminals and TOP ignored, ADVP and PRT equal.
COLLINS = EvalbParams(
    debug=0,
    max_error=10,
    cutoff_len=40,
    labeled=True,
    delete_labels=("TOP", "-NONE-", ",", ":", "``", "''", "."),
    delete_labels_for_length=("-NONE-",),
    eq_labels=(("ADVP", "PRT"),),
)

#: EVALB's sample/sample.prm: as COLLINS.prm but "." is scored, T = TT and This = this.
SAMPLE = EvalbParams(
    debug=0,
    max_error=10,
    cutoff_len=40,
    labeled=True,
    delete_labels=("TOP", "-NONE-", ",", ":", "``", "''"),
    delete_labels_for_length=("-NONE-",),
    eq_labels=(("T", "TT"),),
    eq_words=(("This", "this"),),
)


def _split_c(text: str) -> list[str]:
    out, word = [], ""
    for ch in text:
        if ch in _C_SPACE:
            if word:
                out.append(word)
            word = ""
        else:
            word += ch
    return out + [word] if word else out


#: The keywords whose value counts something (``--max-error``, ``--cutoff`` take no negative either).
_COUNTS = ("MAX_ERROR", "CUTOFF_LEN")
_C_INT = re.compile(r"[+-]?[0-9]+")


def _c_int(value: str, keyword: str, where: str) -> int:
    """``value`` as evalb.c's ``atoi`` reads it, where the two agree: ASCII digits with an optional sign,
    within a C ``int``. Python's ``int`` also takes ``1_0`` (atoi: 1) and other scripts' digits (atoi:
    0), which would score by other settings than EVALB's; a count below 0 is refused as its flag is."""
    if not _C_INT.fullmatch(value):
        raise ConfigError(f"{where}: {keyword} needs an integer (ASCII digits), got {value!r}")
    number = int(value)
    low = 0 if keyword in _COUNTS else -2**31
    if not low <= number <= 2**31 - 1:
        raise ConfigError(f"{where}: {keyword} must lie in {low} .. {2**31 - 1} (a C int{', a count' if low == 0 else ''}), "
                          f"got {value[:40]}")
    return number


def parse_prm_text(text: str, source: str = "<prm>") -> EvalbParams:
    """Parse the text of an EVALB parameter file, starting from evalb.c's defaults."""
    values: dict[str, list] = {k: [] for k in ("DELETE_LABEL", "DELETE_LABEL_FOR_LENGTH", "QUOTE_LABEL",
                                               "EQ_LABEL", "EQ_WORD")}
    ints: dict[str, int] = {}
    given: dict[str, int] = {}   # the line each of ``ints`` was set on
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip(_C_SPACE)
        if line.startswith("#") or len(line) < 3:
            continue
        keyword = line
        for i, ch in enumerate(line):
            if ch in _C_SPACE:
                keyword = line[:i]
                break
        value = line[len(keyword):].lstrip(_C_SPACE)
        where = f"{source} line {number}"
        if not value:
            raise ConfigError(f"{where}: keyword {keyword} has no value")
        if keyword in ("DEBUG", "MAX_ERROR", "CUTOFF_LEN", "LABELED"):
            setting = _c_int(value, keyword, where)
            if keyword in ints and ints[keyword] != setting:   # evalb.c takes the last one silently
                raise ConfigError(f"{where}: {keyword} {setting} contradicts {keyword} {ints[keyword]} on "
                                  f"line {given[keyword]}: one file, one setting")
            ints[keyword], given[keyword] = setting, number
        elif keyword in ("EQ_LABEL", "EQ_WORD"):
            pair = _split_c(value)
            if len(pair) != 2:
                raise ConfigError(f"{where}: {keyword} requires two values, got {value!r}")
            values[keyword].append((pair[0], pair[1]))
        elif keyword in values:
            values[keyword].append(value)  # evalb.c keeps the whole rest of the line
        else:
            raise ConfigError(f"{where}: unknown keyword {keyword!r} in EVALB parameter file")
    return EvalbParams(
        debug=ints.get("DEBUG", 0),
        max_error=ints.get("MAX_ERROR", 10),
        cutoff_len=ints.get("CUTOFF_LEN", 40),
        labeled=ints.get("LABELED", 1) != 0,
        delete_labels=tuple(values["DELETE_LABEL"]),
        delete_labels_for_length=tuple(values["DELETE_LABEL_FOR_LENGTH"]),
        quote_labels=tuple(values["QUOTE_LABEL"]),
        eq_labels=tuple(values["EQ_LABEL"]),
        eq_words=tuple(values["EQ_WORD"]),
    )


def read_prm(path: str | Path) -> EvalbParams:
    """Read an EVALB ``.prm`` file; a missing file or a bad line is a :class:`ConfigError`."""
    path = Path(path)
    text = read_text(path, "EVALB parameter file", limit=RECORD_BYTES.hard, error=ConfigError, undecodable="keep")
    return parse_prm_text(text, str(path))


def to_prm_text(params: EvalbParams) -> str:
    """Write ``params`` as an EVALB parameter file (round-trips through :func:`parse_prm_text`)."""
    lines = [f"DEBUG {params.debug}", f"MAX_ERROR {params.max_error}", f"CUTOFF_LEN {params.cutoff_len}",
             f"LABELED {int(params.labeled)}"]
    lines += [f"DELETE_LABEL {x}" for x in params.delete_labels]
    lines += [f"DELETE_LABEL_FOR_LENGTH {x}" for x in params.delete_labels_for_length]
    lines += [f"QUOTE_LABEL {x}" for x in params.quote_labels]
    lines += [f"EQ_LABEL {a} {b}" for a, b in params.eq_labels]
    lines += [f"EQ_WORD {a} {b}" for a, b in params.eq_words]
    return "\n".join(lines) + "\n"
