"""Claims files: schema validation, clear errors naming file and claim, exit code 2."""

from __future__ import annotations

import json

import pytest

from repro.claims import KINDS, load_claims
from repro.cli import main
from repro.errors import ClaimFileError

GOOD = """
[[claim]]
id = "x.one"
source = "Section 3.4"
statement = "a statement"
kind = "equation"
scale = "local"
checker = "embedding.scale"
expected = 8.0
tolerance = { rel = 1e-5 }
params = { d_model = 64 }
"""


def write(tmp_path, text, name="part.toml"):
    (tmp_path / name).write_text(text)
    return tmp_path


def test_the_project_claims_load_and_cover_every_kind(repo_root):
    claims = load_claims(repo_root / "claims")
    assert {c.kind for c in claims} == set(KINDS)
    assert len({c.id for c in claims}) == len(claims)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.replace('statement = "a statement"\n', ""), "'statement' is a required property"),
        (lambda t: t.replace('kind = "equation"', 'kind = "vibe"'), "field 'kind'"),
        (lambda t: t.replace("expected = 8.0", 'expected = "eight"'), "field 'expected'"),
        (lambda t: t.replace("rel = 1e-5", "rel = -0.1"), "'tolerance.rel' must not be negative"),
        (lambda t: t.replace("rel = 1e-5", 'rel = "tight"'), "field 'tolerance.rel' must be of type number"),
        (lambda t: t.replace('scale = "local"', 'scale = "galaxy"'), "field 'scale'"),
        (lambda t: t.replace("tolerance = { rel = 1e-5 }\n", ""), "tolerance"),
    ],
)
def test_malformed_claim_names_file_and_claim(tmp_path, mutate, message):
    write(tmp_path, mutate(GOOD))
    with pytest.raises(ClaimFileError) as err:
        load_claims(tmp_path)
    text = str(err.value)
    assert "part.toml" in text and "x.one" in text and message in text


def test_duplicate_id_names_both_files(tmp_path):
    write(tmp_path, GOOD, "a.toml")
    write(tmp_path, GOOD, "b.toml")
    with pytest.raises(ClaimFileError, match=r"b\.toml: claim 'x\.one': duplicate id \(first defined in .*a\.toml\)"):
        load_claims(tmp_path)


def test_broken_toml_names_the_file(tmp_path):
    write(tmp_path, GOOD + "\n[[claim]\n")
    with pytest.raises(ClaimFileError, match=r"part\.toml: not valid TOML"):
        load_claims(tmp_path)


def test_cli_exits_2_on_a_malformed_file(tmp_path, capsys):
    write(tmp_path, GOOD.replace('kind = "equation"', 'kind = "vibe"'))
    assert main(["claims", "--claims-dir", str(tmp_path), "list"]) == 2
    assert "part.toml" in capsys.readouterr().err


def test_claims_list_json_has_the_documented_fields(repo_root, capsys):
    assert main(["claims", "list", "--json"]) == 0
    claims = json.loads(capsys.readouterr().out)
    for field in ("id", "source", "kind", "scale", "statement", "expected"):
        assert all(field in c for c in claims)


def test_claims_show(capsys):
    assert main(["claims", "show", "sec3.eq1.scaled-dot-product"]) == 0
    assert "Eq. 1" in capsys.readouterr().out
    assert main(["claims", "show", "no.such.claim"]) == 2  # an unknown id is bad input (docs/exit-codes.md)
