"""Section 6.2's conclusions on Table 3 at a named scale: ``holds``, ``reversed`` or ``inconclusive``.

Each conclusion is a relation claim of ``claims/relations.toml`` (``sec6.2.*``: its expression
over Table 3's ``{table3.bleu.<row>}`` and ``{table3.ppl.<row>}``), read here over the rows
measured at a scale (:mod:`repro.scaled.rows`) and split into parts, each a difference of rows:

- a comparison ``{a} < {b}`` (``>``, ``<=``, ``>=``; a chain ``a < b < c`` gives one part per
  neighbouring pair) is ``b - a``, expected positive;
- ``abs({a} - {b}) <= k`` ("nearly identical", row E) is an equivalence: ``a - b`` within ±k;
- a number, such as ``max(...) - {table3.bleu.A-h1}`` (single-head attention 0.9 BLEU below the
  best setting), is a difference expected to have the sign of the paper's own figure; ``max`` and
  ``min`` pick the row with the best mean (the interval does not count that choice);
- ``and`` joins parts (``or`` and ``not`` have no reading as intervals and are refused).

Each part's difference has a 95% interval (:func:`repro.eval.seeds.combination`: Welch's t over the
seeds of the rows it involves, with their bootstraps, the rows taken as independent, which is
conservative: they share the dev set). A part **holds** when the interval lies wholly on the
paper's side of zero (within ±k for an equivalence), is **reversed** when it lies wholly on the
other side (wholly outside ±k), and is **inconclusive** when it crosses zero (or ±k), or is not a
number. A conclusion holds when every part holds, is reversed when any part is reversed, and is
inconclusive otherwise; it is ``not run`` while a row it names has no measurement at the scale.
Beside each part is the paper's own figure: the same difference of Table 3's values (the claims'
``expected``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from repro.claims.relation_expression import RelationError, operands
from repro.claims.relation_expression import evaluate as on_values
from repro.claims.claim import Claim
from repro.eval.seeds import combination
from repro.scaled.rows import ScaledTable

HOLDS, REVERSED, INCONCLUSIVE, NOT_RUN = "holds", "reversed", "inconclusive", "not run"
VERDICTS = (HOLDS, REVERSED, INCONCLUSIVE, NOT_RUN)
#: The claims read as conclusions: Section 6.2's relations over Table 3.
PREFIX = "sec6.2."
_METRIC_NAMES = {"ppl": "PPL", "bleu": "BLEU"}

Key = tuple[str, str]   # (metric, row)


@dataclass(frozen=True)
class Linear:
    """``sum coef · value(key) + const``: a difference of Table 3's cells."""

    terms: tuple[tuple[Key, float], ...] = ()
    const: float = 0.0

    def __add__(self, other: "Linear") -> "Linear":
        merged: dict[Key, float] = dict(self.terms)
        for key, coef in other.terms:
            merged[key] = merged.get(key, 0.0) + coef
        return Linear(tuple((k, c) for k, c in merged.items() if c != 0.0), self.const + other.const)

    def scaled(self, factor: float) -> "Linear":
        return Linear(tuple((k, c * factor) for k, c in self.terms), self.const * factor)

    def value(self, values: Mapping[Key, float]) -> float:
        return math.fsum(c * values[k] for k, c in self.terms) + self.const

    @property
    def is_constant(self) -> bool:
        return not self.terms

    def text(self) -> str:
        """``BLEU base − BLEU A-h1`` (positive terms first)."""
        pieces = []
        for (metric, row), coef in sorted(self.terms, key=lambda t: -t[1]):
            name = f"{_METRIC_NAMES[metric]} {row}"
            name = name if abs(coef) == 1 else f"{abs(coef):g}·{name}"
            pieces.append(("−" if coef < 0 else "+", name))
        if self.const:
            pieces.append(("−" if self.const < 0 else "+", f"{abs(self.const):g}"))
        if not pieces:
            return "0"
        first_sign, first = pieces[0]
        return ("−" if first_sign == "−" else "") + first + "".join(f" {sign} {name}" for sign, name in pieces[1:])


@dataclass(frozen=True)
class _Abs:
    inner: Linear


@dataclass(frozen=True)
class Part:
    """One difference a conclusion expects: positive, within ±``within``, or (``signed``: a relation
    that is a number) of the sign of the paper's own figure."""

    difference: Linear
    within: float | None = None
    signed: bool = False

    def text(self) -> str:
        if self.within is not None:
            return f"|{self.difference.text()}| ≤ {self.within:g}"
        return f"{self.difference.text()} > 0"


@dataclass(frozen=True)
class PartVerdict:
    text: str
    paper: float
    estimate: float
    ci95: tuple[float, float]
    verdict: str
    within: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.text, "paper": _round(self.paper), "measured": _round(self.estimate),
                "ci95": [_round(x) for x in self.ci95], "verdict": self.verdict, "within": self.within}


@dataclass(frozen=True)
class Verdict:
    """A conclusion of Section 6.2 at one scale."""

    claim: Claim
    scale: str
    verdict: str
    parts: list[PartVerdict] = field(default_factory=list)
    paper_figure: Any = None       # the relation on the paper's own Table 3 values
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.claim.id, "statement": self.claim.statement, "scale": self.scale, "verdict": self.verdict,
                "paper": _round(self.paper_figure), "parts": [p.to_dict() for p in self.parts], "note": self.note}


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) and math.isfinite(value) else value


def conclusions(claims: Iterable[Claim]) -> list[Claim]:
    """Section 6.2's relations that name only Table 3's PPL and BLEU cells (the claims' order)."""
    return [c for c in claims if c.id.startswith(PREFIX) and c.checker == "relation.expression"
            and operands(c) and all(_key(cid) is not None for cid in operands(c))]


def _key(claim_id: str) -> Key | None:
    parts = claim_id.split(".")
    if len(parts) >= 3 and parts[0] == "table3" and parts[1] in _METRIC_NAMES:
        return parts[1], ".".join(parts[2:])
    return None


def paper_values(claims: Iterable[Claim]) -> dict[Key, float]:
    """Table 3's PPL and BLEU as the paper prints them (the metric claims' ``expected``)."""
    out = {}
    for c in claims:
        key = _key(c.id)
        if key is not None and isinstance(c.expected, (int, float)) and not isinstance(c.expected, bool):
            out[key] = float(c.expected)
    return out


def parts(claim: Claim, means: Mapping[Key, float]) -> list[Part]:
    """The conclusion's parts; ``means`` decide which row ``max``/``min`` pick."""
    ids = operands(claim)
    names = {cid: f"_v{i}" for i, cid in enumerate(ids)}
    keys = {names[cid]: _key(cid) for cid in ids}
    source = claim.params["expression"]
    for cid in sorted(ids, key=len, reverse=True):
        source = source.replace("{" + cid + "}", names[cid])
    constants = {k: float(v) for k, v in claim.params.get("constants", {}).items()}
    tree = ast.parse(source, mode="eval").body
    walker = _Walker(keys, constants, means)
    if isinstance(tree, (ast.BoolOp, ast.Compare)):
        return walker.conditions(tree)
    return [Part(walker.linear(tree), signed=True)]   # a number: its sign is the paper's (see evaluate)


class _Walker:
    def __init__(self, keys: Mapping[str, Key], constants: Mapping[str, float], means: Mapping[Key, float]) -> None:
        self.keys, self.constants, self.means = keys, constants, means

    def conditions(self, node: ast.AST) -> list[Part]:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return [p for value in node.values for p in self.conditions(value)]
        if isinstance(node, ast.Compare):
            out, left = [], self.term(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.term(right_node)
                out.append(self.compare(left, op, right, node))
                left = right
            return out
        raise RelationError(f"no reading as intervals: {ast.unparse(node)} (only comparisons joined by 'and')")

    def compare(self, left: Linear | _Abs, op: ast.cmpop, right: Linear | _Abs, node: ast.AST) -> Part:
        bounded = isinstance(right, Linear) and right.is_constant and isinstance(op, (ast.Lt, ast.LtE))
        if isinstance(left, _Abs) and bounded:
            return Part(left.inner, within=right.const)
        if isinstance(left, Linear) and isinstance(right, Linear):
            if isinstance(op, (ast.Lt, ast.LtE)):
                return Part(right + left.scaled(-1.0))
            if isinstance(op, (ast.Gt, ast.GtE)):
                return Part(left + right.scaled(-1.0))
        raise RelationError(f"no reading as intervals: {ast.unparse(node)}")

    def term(self, node: ast.AST) -> Linear | _Abs:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs" \
                and len(node.args) == 1:
            return _Abs(self.linear(node.args[0]))
        return self.linear(node)

    def linear(self, node: ast.AST) -> Linear:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Linear(const=float(node.value))
        if isinstance(node, ast.Name):
            if node.id in self.keys:
                return Linear(((self.keys[node.id], 1.0),))
            if node.id in self.constants:
                return Linear(const=self.constants[node.id])
            raise RelationError(f"unknown name '{node.id}'")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.linear(node.operand).scaled(-1.0)
        if isinstance(node, ast.BinOp):
            left, right = self.linear(node.left), self.linear(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left + right.scaled(-1.0)
            if isinstance(node.op, ast.Mult) and (left.is_constant or right.is_constant):
                return right.scaled(left.const) if left.is_constant else left.scaled(right.const)
            if isinstance(node.op, ast.Div) and right.is_constant and right.const:
                return left.scaled(1.0 / right.const)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min") \
                and node.args:
            options = [self.linear(a) for a in node.args]
            pick = max if node.func.id == "max" else min
            return pick(options, key=lambda lin: lin.value(self.means))
        raise RelationError(f"no reading as intervals: {ast.unparse(node)}")


def _part_verdict(low: float, high: float, within: float | None) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    if within is not None:
        if -within <= low and high <= within:
            return HOLDS
        return REVERSED if low > within or high < -within else INCONCLUSIVE
    if low > 0:
        return HOLDS
    return REVERSED if high < 0 else INCONCLUSIVE


def evaluate(claim: Claim, table: ScaledTable, paper: Mapping[Key, float]) -> Verdict:
    """The conclusion ``claim`` on the rows of ``table``, beside the paper's figures ``paper``."""
    ids = operands(claim)
    keys = [_key(cid) for cid in ids]
    figure = on_values(claim, {cid: paper[k] for cid, k in zip(ids, keys)}) if all(k in paper for k in keys) else None
    missing = sorted({f"{_METRIC_NAMES[m]} {r}" for m, r in keys if table.measured(m, r) is None})
    if missing:
        return Verdict(claim, table.scale, NOT_RUN, [], figure, f"no measurement at scale {table.scale} of "
                                                                 f"{', '.join(missing)}")
    measured = {k: table.measured(*k) for k in keys}
    means = {k: m.mean for k, m in measured.items()}
    mine, theirs = parts(claim, means), parts(claim, {k: paper.get(k, math.nan) for k in keys})
    out = []
    for part, paper_part in zip(mine, theirs):
        paper_value = paper_part.difference.value(paper) if all(k in paper for k, _ in paper_part.difference.terms) \
            else math.nan
        diff = part.difference
        if part.signed and paper_value < 0:   # a number: expected to have the paper's sign
            diff, paper_value = diff.scaled(-1.0), -paper_value
        combo = combination([(coef, measured[key].summary) for key, coef in diff.terms])
        estimate = combo.estimate + diff.const
        low, high = estimate - combo.half_width, estimate + combo.half_width
        out.append(PartVerdict(Part(diff, part.within).text(), paper_value, estimate, (low, high),
                               _part_verdict(low, high, part.within), part.within))
    verdicts = {p.verdict for p in out}
    overall = REVERSED if REVERSED in verdicts else HOLDS if verdicts == {HOLDS} else INCONCLUSIVE
    nan = any(not math.isfinite(p.estimate) for p in out)
    return Verdict(claim, table.scale, overall, out, figure, "a measurement is not a number" if nan else "")


def evaluate_all(claims: list[Claim], tables: Mapping[str, ScaledTable]) -> list[Verdict]:
    """Every conclusion at every scale (claims in their order, then scales by name)."""
    paper = paper_values(claims)
    return [evaluate(c, tables[s], paper) for c in conclusions(claims) for s in sorted(tables)]
