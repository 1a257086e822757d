"""How much of the paper the claims cover: ``claims/statements.csv`` lists every checkable
statement of the paper (one per row: its section, the statement, the claims that check it, the
kind of evidence they give, and a note where it is a proxy or none), and this module sets it
against the claims.

The ``evidence`` column says what a reader can trust:

- ``code path``: a claim measures the code that produces the paper's numbers (the model, the loop,
  the search and averaging of the evaluation, each job's settings as they run);
- ``proxy``: a claim measures something that stands in for it (Table 1's reference layers, a
  scripted model, a small model of the same code; the note says which);
- ``run``: a claim is the result of a run (a metric, or a relation over such results);
- ``setting``: the claims only read configuration (the note says why nothing can be measured);
- ``paper arithmetic``: the claims compute on the paper's own numbers, no code measured;
- ``none``: no claim checks it (the note says why).

The column is checked against the claims' ``basis``: a statement whose claims are all settings
cannot say ``code path`` (nor can one checked by paper arithmetic alone), and one measured by a
claim of basis ``behaviour`` or ``result`` cannot say ``setting``.

Apart from that column, a statement is *observed on a run* when one of its claims has the basis
``run``: it is checked on the records of a run that happened (``repro check --run DIR``), whatever
the code shows (:func:`observed_on_a_run`; their own column in the counts of docs/claims.md).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from repro.claims.claim import Claim
from repro.errors import ClaimFileError
from repro.files.reader import read_text
from repro.limits import RECORD_BYTES

STATEMENTS_FILE = "statements.csv"
COLUMNS = ["id", "section", "statement", "claims", "evidence", "note"]
#: The evidence a statement's claims give, strongest first (module docstring).
EVIDENCE = ("code path", "proxy", "run", "setting", "paper arithmetic", "none")


@dataclass(frozen=True)
class Statement:
    id: str
    section: str
    statement: str
    claims: tuple[str, ...]
    note: str = ""
    evidence: str = ""
    where: str = field(default=STATEMENTS_FILE, compare=False)   # the file and line it was read from

    def observed_on_a_run(self, claims: dict[str, Claim]) -> bool:
        """Whether a claim of this statement is checked on a run's own records (basis ``run``)."""
        return any(claims[c].basis == "run" for c in self.claims)

    def coverage(self, claims: dict[str, Claim]) -> str:
        """``behaviour`` (a claim measures code or a run), ``paper arithmetic`` (claims compute on the
        paper's numbers), ``setting`` (claims only read settings) or ``none``, from the claims' bases."""
        bases = {claims[c].basis for c in self.claims} - {"run"}   # a run's records: their own column
        if bases & {"behaviour", "result"}:
            return "behaviour"
        if "paper arithmetic" in bases:
            return "paper arithmetic"
        return "setting" if bases else "none"

    def consistent(self, claims: dict[str, Claim]) -> str | None:
        """Why the ``evidence`` column overstates or understates the claims, or ``None``."""
        found = self.coverage(claims)
        allowed = {"behaviour": ("code path", "proxy", "run"), "paper arithmetic": ("paper arithmetic",),
                   "setting": ("setting",), "none": ("none",)}[found]
        if self.evidence not in allowed:
            return (f"statement {self.id} says '{self.evidence}' but its claims give {found} evidence "
                    f"(allowed: {', '.join(allowed)})")
        if self.evidence == "run" and not any(claims[c].basis == "result" for c in self.claims):
            return f"statement {self.id} says 'run' but none of its claims is the result of a run"
        if self.evidence == "code path" and not any(claims[c].basis == "behaviour" for c in self.claims):
            return f"statement {self.id} says 'code path' but none of its claims measures behaviour"
        return None


def load_statements(claims_dir: str | Path) -> list[Statement]:
    path = Path(claims_dir) / STATEMENTS_FILE
    text = read_text(path, "statements file", limit=RECORD_BYTES.hard, error=ClaimFileError)
    try:
        table = csv.DictReader(io.StringIO(text, newline=""))
        if table.fieldnames != COLUMNS:
            raise ClaimFileError(f"{path}: expected the columns {', '.join(COLUMNS)}, got {table.fieldnames}")
        rows = list(table)
    except csv.Error as err:
        raise ClaimFileError(f"{path}:{table.line_num}: not readable CSV ({err})") from None
    if not rows:   # "0 checkable statements", exit 0: a coverage of nothing
        raise ClaimFileError(f"{path}: holds no statement, only its header")
    first_line: dict[str, int] = {}
    for line, r in enumerate(rows, start=2):
        if any(r.get(c) is None for c in COLUMNS) or None in r:
            raise ClaimFileError(f"{path}:{line}: a row of {len(COLUMNS)} fields ({', '.join(COLUMNS)}) expected")
        if not r["id"].strip():
            raise ClaimFileError(f"{path}:{line}: field 'id' is empty")
        if r["id"] in first_line:
            raise ClaimFileError(f"{path}:{line}: statement {r['id']} given twice (first on line {first_line[r['id']]})")
        first_line[r["id"]] = line
        if r["evidence"] not in EVIDENCE:
            raise ClaimFileError(f"{path}:{line}: field 'evidence' must be one of {', '.join(EVIDENCE)}, "
                                 f"got {r['evidence']!r}")
    return [Statement(r["id"], r["section"], r["statement"], tuple(r["claims"].split()), r["note"], r["evidence"],
                      f"{path}:{line}") for line, r in enumerate(rows, start=2)]


def coverage(statements: list[Statement], claims: list[Claim]) -> dict[str, list[Statement]]:
    """The statements by the evidence the claims give them (:data:`EVIDENCE`); a statement naming
    an unknown claim, or whose ``evidence`` the claims do not bear out, is an error."""
    known = {c.id: c for c in claims}
    groups: dict[str, list[Statement]] = {e: [] for e in EVIDENCE}
    for st in statements:
        unknown = [c for c in st.claims if c not in known]
        if unknown:
            raise ClaimFileError(f"{st.where}: statement {st.id} names unknown claim(s) {', '.join(unknown)}")
        wrong = st.consistent(known)
        if wrong:
            raise ClaimFileError(f"{st.where}: {wrong}")
        groups[st.evidence].append(st)
    return groups
