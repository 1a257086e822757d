"""The params table (repro/claims/params.py) against the checkers: every registered checker has an
entry, every key a checker reads is in its entry, and every shipped claim's params pass it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repro.checks import CHECKERS
from repro.claims.loader import load_claims
from repro.claims.params import PARAMS, REQUIRED
from repro.errors import ClaimFileError

CHECKS = Path(__file__).resolve().parents[2] / "repro" / "checks"


def keys_read(fn: ast.FunctionDef, functions: dict[str, ast.FunctionDef], seen: set[str]) -> set[str]:
    """The ``claim.params`` keys a checker reads: ``params.get("k")``, ``params["k"]``, also through an alias
    (``p = claim.params``) and in helpers of its module it hands the claim to."""
    if fn.name in seen:
        return set()
    seen.add(fn.name)
    aliases = {"claim.params"} | {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign)
                                  and ast.unparse(n.value) == "claim.params" for t in n.targets if isinstance(t, ast.Name)}
    keys = set()
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and ast.unparse(node.func.value) in aliases and node.args and isinstance(node.args[0], ast.Constant)):
            keys.add(node.args[0].value)
        elif (isinstance(node, ast.Subscript) and ast.unparse(node.value) in aliases
              and isinstance(node.slice, ast.Constant)):
            keys.add(node.slice.value)
        elif isinstance(node, ast.Compare) and "claim.params.items()" in ast.unparse(fn):
            keys |= {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions
              and any(ast.unparse(a) == "claim" for a in node.args)):
            keys |= keys_read(functions[node.func.id], functions, seen)
    return keys


def read_by_checker() -> dict[str, set[str]]:
    found = {}
    for path in sorted(CHECKS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        for fn in functions.values():
            for deco in fn.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "checker":
                    found[deco.args[0].value] = keys_read(fn, functions, set())
    return found


def test_every_checker_has_a_params_entry_and_every_key_it_reads_is_in_it():
    read = read_by_checker()
    assert set(read) == set(CHECKERS)  # the scan finds every registered checker
    assert sorted(set(CHECKERS) - set(PARAMS)) == [] and sorted(set(PARAMS) - set(CHECKERS)) == []
    missing = {name: sorted(keys - set(PARAMS[name])) for name, keys in read.items() if keys - set(PARAMS[name])}
    assert missing == {}
    assert all(set(keys) <= set(PARAMS[name]) for name, keys in REQUIRED.items())


def test_the_shipped_claims_pass_their_params_schemas():
    assert len(load_claims(checkers=CHECKERS)) > 150


@pytest.mark.parametrize("params, named", [
    ("{ d_model = 64, heads = true }", "params.heads"),
    ("{ d_model = 64.5 }", "params.d_model"),
    ("{ d_model = 64, head = 4 }", "params.head"),
])
def test_a_wrong_param_is_refused_naming_it(tmp_path, params, named):
    (tmp_path / "x.toml").write_text(f"""[[claim]]
id = "x.post-norm"
source = "test"
statement = "post-norm"
kind = "equation"
scale = "local"
checker = "layers.post_norm"
expected = 0.0
tolerance = {{ abs = 1e-4 }}
params = {params}
""")
    with pytest.raises(ClaimFileError, match=rf"x\.toml: claim 'x\.post-norm': .*{named}"):
        load_claims(tmp_path, checkers=CHECKERS)
