"""claims/statements.csv: every checkable statement of the paper, set against the claims."""

from __future__ import annotations

from repro.checks import select_claims
from repro.claims import default_claims_dir
from repro.claims.coverage import coverage, load_statements

CLAIMS = select_claims()
STATEMENTS = load_statements(default_claims_dir())


def test_every_statement_names_claims_that_exist_or_says_why_none():
    groups = coverage(STATEMENTS, CLAIMS)  # raises on an unknown claim id
    for st in groups["none"]:
        assert st.note, f"{st.id}: a statement no claim checks must say why"
    assert len({st.id for st in STATEMENTS}) == len(STATEMENTS)


def test_every_claim_of_the_paper_answers_to_a_statement():
    listed = {c for st in STATEMENTS for c in st.claims}
    own = {c.id for c in CLAIMS if c.id.startswith(("local.", "impl.")) or c.kind == "invariant"}
    missing = sorted(c.id for c in CLAIMS if c.id not in listed and c.id not in own)
    assert missing == [], "claims not mapped to a statement of the paper in claims/statements.csv"


def test_most_statements_are_measured_not_read():
    groups = coverage(STATEMENTS, CLAIMS)
    assert len(groups["behaviour"]) >= 140
    assert len(groups["setting"]) + len(groups["none"]) <= len(STATEMENTS) - 140
