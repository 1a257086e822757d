"""How much of the paper the claims cover: ``claims/statements.csv`` lists every checkable
statement of the paper (one per row: its section, the statement, the claims that check it, and
a note where none does), and this module sets it against the claims.

A statement is covered by a *behavioural* check when at least one of its claims measures the code
or a run (basis ``behaviour`` or ``result``); by a *setting* only when all its claims read
configuration; or not at all (the note says why).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from repro.claims.claim import Claim
from repro.errors import ClaimFileError

STATEMENTS_FILE = "statements.csv"
COLUMNS = ["id", "section", "statement", "claims", "note"]


@dataclass(frozen=True)
class Statement:
    id: str
    section: str
    statement: str
    claims: tuple[str, ...]
    note: str = ""

    def coverage(self, claims: dict[str, Claim]) -> str:
        """``behaviour`` (a claim measures code or a run), ``setting`` (claims only read settings) or ``none``."""
        bases = {claims[c].basis for c in self.claims}
        if bases & {"behaviour", "result"}:
            return "behaviour"
        return "setting" if bases else "none"


def load_statements(claims_dir: str | Path) -> list[Statement]:
    path = Path(claims_dir) / STATEMENTS_FILE
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames != COLUMNS:
                raise ClaimFileError(f"{path}: expected the columns {', '.join(COLUMNS)}, got {reader.fieldnames}")
            rows = list(reader)
    except OSError as err:
        raise ClaimFileError(f"{path}: cannot read the statements ({err})") from None
    return [Statement(r["id"], r["section"], r["statement"], tuple(r["claims"].split()), r["note"]) for r in rows]


def coverage(statements: list[Statement], claims: list[Claim]) -> dict[str, list[Statement]]:
    """The statements by how they are covered; a statement naming an unknown claim is an error."""
    known = {c.id: c for c in claims}
    groups: dict[str, list[Statement]] = {"behaviour": [], "setting": [], "none": []}
    for st in statements:
        unknown = [c for c in st.claims if c not in known]
        if unknown:
            raise ClaimFileError(f"{STATEMENTS_FILE}: statement {st.id} names unknown claim(s) {', '.join(unknown)}")
        groups[st.coverage(known)].append(st)
    return groups
