"""A relation claim's expression (``params.expression``): arithmetic and comparisons over other
claims, written ``{claim.id}``, and named constants (``params.constants``). Read by the relation
checker (:mod:`repro.checks.relations`) and by Section 6.2's verdicts at a scale
(:mod:`repro.scaled.verdicts`).

Allowed in expressions: numbers, ``{claim.id}``, constant names, ``+ - * /``, comparisons,
``and``/``or``/``not``, ``abs``, ``min`` and ``max``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from typing import Any

from repro.claims.claim import Claim

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


__all__ = ["RelationError", "evaluate", "operands"]
