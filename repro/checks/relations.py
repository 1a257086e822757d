"""Claims over other claims' measurements: the paper's comparisons (Sections 5.4, 6.1, 6.2, 6.3).

A relation claim's ``params.expression`` is arithmetic and comparisons over other claims, written
``{claim.id}``, and named constants (``params.constants``: figures the paper quotes for earlier
models, which are not this paper's measurements). It is evaluated on the newest stored result of
each claim it names, at the scale those were measured (cluster only when all are), and reads
"not run" until they all exist. :func:`evaluate` on the claims' own ``expected`` values shows
whether the paper's numbers satisfy the relation; where they do not, the claim records the
inconsistency.

Allowed in expressions: numbers, ``{claim.id}``, constant names, ``+ - * /``, comparisons,
``and``/``or``/``not``, ``abs``, ``min`` and ``max``.
"""

from __future__ import annotations

import ast
import datetime as _dt
import operator
import re
from collections.abc import Mapping
from typing import Any

from repro.checks.registry import checker
from repro.checks.step_time import comparable_results
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement, NotRun
from repro.results.provenance import Provenance
from repro.results.store import Result

_REF = re.compile(r"\{([A-Za-z0-9][A-Za-z0-9_.\-]*)\}")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCTIONS = {"abs": abs, "min": min, "max": max}


class RelationError(ValueError):
    """An expression that is not one of the allowed forms."""


def operands(claim: Claim) -> list[str]:
    """The claim ids a relation claim reads, in order of first mention."""
    return list(dict.fromkeys(_REF.findall(claim.params.get("expression", ""))))


def evaluate(claim: Claim, values: Mapping[str, float]) -> Any:
    """The relation's value with ``values`` for the claims it names (and its constants)."""
    ids = operands(claim)
    names = {cid: f"_v{i}" for i, cid in enumerate(ids)}
    source = _REF.sub(lambda m: names[m.group(1)], claim.params["expression"])
    scope = {**claim.params.get("constants", {}), **{names[cid]: values[cid] for cid in ids}}
    return _eval(ast.parse(source, mode="eval").body, scope)


def _eval(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in scope:
            raise RelationError(f"unknown name '{node.id}'")
        return scope[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, scope), _eval(node.right, scope))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        value = _eval(node.operand, scope)
        return -value if isinstance(node.op, ast.USub) else not value
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, scope) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, scope)
            if type(op) not in _COMPARE or not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_eval(a, scope) for a in node.args))
    raise RelationError(f"not allowed in a relation: {ast.unparse(node)}")


def _scale(results: list[Result]) -> str:
    kinds = {r.provenance.scale.strip().lower().startswith("cluster") for r in results}
    return "cluster" if kinds == {True} else "local"


def relation_result(claim: Claim, results: Mapping[str, Result]) -> Result | None:
    """The relation evaluated on stored results, as a result of its own (``None`` until every
    claim it names has one). Its scale is ``cluster`` only when every operand's is."""
    ids = operands(claim)
    if any(cid not in results for cid in ids):
        return None
    used = [results[cid] for cid in ids]
    value = evaluate(claim, {cid: finite(results[cid].measured, f"the stored value of {cid}") for cid in ids})
    newest = max(used, key=lambda r: r.provenance.date)
    scale = _scale(used)
    provenance = Provenance(
        commit=newest.provenance.commit, config_hash=newest.provenance.config_hash,
        hardware="; ".join(sorted({r.provenance.hardware for r in used})),
        dataset="; ".join(sorted({r.provenance.dataset for r in used})),
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        scale=f"{scale}: relation over {', '.join(ids)}",
        extra={"operands": {cid: results[cid].measured for cid in ids}},
    )
    return Result(claim.id, value, provenance, unit=claim.unit,
                  detail=", ".join(f"{cid} = {results[cid].measured}" for cid in ids))


@checker("relation.expression", audits=False, reads_results=True)
def relation(claim: Claim, ctx: CheckContext) -> Measurement:
    """The relation on the newest stored result of every claim it names."""
    results = comparable_results(ctx.results)
    missing = [cid for cid in operands(claim) if cid not in results]
    if missing:
        incomparable = [cid for cid in missing if cid in ctx.results]
        why = f" ({', '.join(incomparable)}: not comparable on this hardware)" if incomparable else ""
        raise NotRun(f"needs stored results of {', '.join(missing)}{why}")
    result = relation_result(claim, results)
    assert result is not None
    return Measurement(result.measured, detail=f"{result.detail} [{result.provenance.scale}]")
