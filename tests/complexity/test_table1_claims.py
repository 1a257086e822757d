"""claims/table1.toml: all twelve cells of Table 1, measured, and passing on the honest layers."""

from __future__ import annotations

from repro.checks import audits_implementation, run_checks, select_claims

CELLS = [
    f"table1.{row}.{column}"
    for row in ("self-attention", "recurrent", "convolutional", "restricted")
    for column in ("complexity", "sequential-ops", "path-length")
]


def table1_claims():
    return select_claims(only=["table1."])


def test_every_cell_is_a_local_complexity_claim() -> None:
    claims = {c.id: c for c in table1_claims()}
    assert set(CELLS) <= set(claims)
    for claim in claims.values():
        assert (claim.kind, claim.scale) == ("complexity", "local")
        assert claim.source.startswith(("Table 1", "Section 4"))
        assert not audits_implementation(claim.checker)  # they measure Table 1's layers, not the audited model


def test_all_table1_claims_pass() -> None:
    records = run_checks(table1_claims(), target=object())  # the target is never used
    failed = {r.claim.id: (r.status, r.detail) for r in records if r.status != "pass"}
    assert not failed
    assert sum(r.seconds for r in records) < 60
