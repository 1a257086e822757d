"""claims/statements.csv: every checkable statement of the paper, set against the claims."""

from __future__ import annotations

import dataclasses

import pytest

from repro.checks import EVIDENCE, select_claims
from repro.claims import default_claims_dir
from repro.claims.coverage import coverage, load_statements
from repro.errors import ClaimFileError

CLAIMS = select_claims()
STATEMENTS = load_statements(default_claims_dir())


def test_every_statement_names_claims_that_exist_or_says_why_none():
    groups = coverage(STATEMENTS, CLAIMS)  # raises on an unknown claim id or an evidence the claims do not bear out
    for name in ("none", "setting", "proxy"):
        for st in groups[name]:
            assert st.note, f"{st.id}: a statement checked by {name} must say why"
    assert len({st.id for st in STATEMENTS}) == len(STATEMENTS)


def test_every_claim_of_the_paper_answers_to_a_statement():
    listed = {c for st in STATEMENTS for c in st.claims}
    own = {c.id for c in CLAIMS if c.id.startswith(("local.", "impl.")) or c.kind == "invariant"}
    missing = sorted(c.id for c in CLAIMS if c.id not in listed and c.id not in own)
    assert missing == [], "claims not mapped to a statement of the paper in claims/statements.csv"


def test_most_statements_are_measured_not_read():
    groups = coverage(STATEMENTS, CLAIMS)
    measured = len(groups["code path"]) + len(groups["run"])
    assert measured >= 160
    assert len(groups["setting"]) + len(groups["none"]) + len(groups["paper arithmetic"]) <= 10


def test_no_statement_counts_as_measured_on_a_setting_read():
    claims = {c.id: c for c in CLAIMS}
    for st in STATEMENTS:
        if st.evidence in ("code path", "proxy", "run"):
            assert any(claims[c].checker not in EVIDENCE and claims[c].basis in ("behaviour", "result")
                       for c in st.claims), st.id


def test_a_statement_that_overstates_its_evidence_is_refused():
    claims = {c.id: c for c in CLAIMS}
    setting_only = next(st for st in STATEMENTS if st.evidence == "setting")
    with pytest.raises(ClaimFileError, match="setting"):
        coverage([dataclasses.replace(setting_only, evidence="code path")], list(claims.values()))


def test_a_claim_calling_a_setting_read_behaviour_is_refused(tmp_path):
    (tmp_path / "c.toml").write_text('''
[[claim]]
id = "x.warmup"
source = "Section 5.3"
statement = "warmup_steps = 4000"
kind = "hyperparameter"
basis = "behaviour"
scale = "local"
checker = "recipe.value"
expected = 4000
tolerance = { abs = 0 }
params = { key = "warmup_steps" }
''')
    with pytest.raises(ClaimFileError, match="basis"):
        select_claims(claims_dir=tmp_path)
