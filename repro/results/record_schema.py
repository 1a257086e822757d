"""The JSON schema every result record must satisfy, and what it must say about its claim.

A record (``ROOT/<claim id>/<name>.json``, :mod:`repro.results.store`) is refused, naming its
file and field, when it breaks the schema (an unknown field, a ``status`` that is not an
outcome, a ``date`` that is not ISO 8601, a ``claim_id`` that is not text), and, when the reader
knows the claims, when its ``claim_id`` names no claim (nor one of the measurements the local
runs store without a claim, nor a cluster run's ``run.<job>`` record, nor a seed's record of Table 3 at a
named scale, ``table3-<scale>.<ppl|bleu>.<row>``), when it lies in another
claim's folder, or when its ``measured`` is of another kind than the claim's paper value (text
for a number). A finite number outside what its unit can be (:data:`UNIT_RANGES`: a BLEU or F1
score in [0, 100], a perplexity at least 1; a difference of scores has no range), in ``measured`` or
in ``ci95``, is refused too: no search or scorer gives it, so the record is corrupt, and "at least
30" would certify BLEU 1.7e308. With the claims' units (:func:`repro.claims.loader.known_values`), a
record whose unit contradicts its claim's (sacreBLEU stored for the paper's tokenized BLEU, a test-set
perplexity for a dev one: :func:`claim_unit_problem`) is refused as well. The validator is :mod:`repro.validation`, the same one the claims
go through.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from repro.claims.outcome import Outcome
from repro.validation import problem

_TEXT = {"type": "string", "minLength": 1}

PROVENANCE_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["commit", "config_hash", "hardware", "dataset", "date", "scale"],
    "properties": {
        "commit": _TEXT, "config_hash": _TEXT, "hardware": _TEXT, "dataset": _TEXT, "scale": _TEXT,
        "date": {"type": "string", "minLength": 1, "format": "date-time"},
        "bleu_signature": {"type": ["string", "null"]},
        "extra": {"type": "object"},
    },
}

RESULT_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["claim_id", "measured", "provenance"],
    "properties": {
        "claim_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"},
        "measured": {"type": ["number", "string", "boolean", "array", "object", "null"]},
        "unit": {"type": ["string", "null"]},
        "status": {"enum": [o.value for o in Outcome] + [None]},
        "detail": {"type": ["string", "null"]},
        "extra": {"type": ["object", "null"]},
        "ci95": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        "provenance": PROVENANCE_SCHEMA,
    },
}

#: Measurements the local runs store under ids no claim has: shown in the report without a status.
UNCLAIMED = ("local.multi30k.ppl", "local.multi30k.step-time", "local.ptb-sample.f1")
#: A cluster job's record of its run (``run.<job name>``, :mod:`repro.cluster.job`).
RUN_RECORD_PREFIX = "run."
#: Table 3 at a named scale (:mod:`repro.scaled.rows`): one record per seed under ``table3-<scale>.<ppl|bleu>.<row>``.
SCALED_TABLE3 = re.compile(r"^table3-(?P<scale>[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*?)\.(?P<metric>ppl|bleu)"
                           r"\.(?P<row>[A-Za-z0-9_.\-]+)$")


#: What a score in each unit can be: (lowest, highest), by the score's name.
UNIT_RANGES: dict[str, tuple[float, float]] = {
    "BLEU": (0.0, 100.0), "sacreBLEU": (0.0, 100.0), "F1": (0.0, 100.0), "PPL": (1.0, math.inf),
}
#: A unit that is a score itself, qualified at most by "per wordpiece" and one parenthesis ("BLEU
#: (tokenized, compound splitting)", "PPL per wordpiece (dev)", "F1 (EVALB, COLLINS.prm)"); a unit such
#: as "BLEU difference from ..." or "BLEU above the best earlier model" is a difference, of either sign.
_SCORE_UNIT = re.compile(r"^(?P<score>BLEU|sacreBLEU|F1|PPL)(?: per wordpiece)?(?: \([^()]*\))?$")


def unit_problem(data: Mapping[str, Any]) -> str | None:
    """Whether the record's finite ``measured`` and ``ci95`` lie where its unit allows (None if so, or
    if the unit has no range); a non-finite value is a failed measurement, judged elsewhere."""
    unit = data.get("unit")
    score = _SCORE_UNIT.match(unit.strip()) if isinstance(unit, str) else None
    if score is None:
        return None
    low, high = UNIT_RANGES[score["score"]]
    values = [("measured", data.get("measured"))] + [("ci95", v) for v in data.get("ci95") or ()]
    for field, value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and not low <= value <= high:
            return (f"field '{field}': {value!r} is no {score['score']} (a measurement in '{unit}' lies in "
                    f"[{low:g}, {high:g}])")
    return None


def kind_of(value: Any) -> str:
    """The JSON kind of ``value``: number, string, boolean, array, object or null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", tuple: "array", dict: "object"}.get(type(value), "null")


def record_problem(data: Any, folder: str | None = None, expected: Mapping[str, Any] | None = None) -> str | None:
    """What is wrong with the record ``data`` (None if nothing): the schema, then, with ``folder``
    (the claim folder it lies in), where it lies, and with ``expected`` (claim id -> the paper's
    value), its claim and the kind of its ``measured``."""
    error = problem(data, RESULT_SCHEMA, nan_allowed_in=("measured", "extra", "provenance"))
    if error is None:
        error = unit_problem(data)
    if error is not None:
        return error
    claim_id = data["claim_id"]
    if folder is not None and folder != claim_id:
        return f"field 'claim_id': '{claim_id}', but the record lies in the folder of '{folder}'"
    if expected is None:
        return None
    if claim_id not in expected:
        if claim_id in UNCLAIMED or claim_id.startswith(RUN_RECORD_PREFIX) or SCALED_TABLE3.match(claim_id):
            return None
        return (f"field 'claim_id': no claim has the id '{claim_id}' (nor is it a measurement stored without a "
                f"claim: {', '.join(UNCLAIMED)}, {RUN_RECORD_PREFIX}<job>, table3-<scale>.<ppl|bleu>.<row>)")
    paper, measured = expected[claim_id], data["measured"]
    measured_outcome = data.get("status") in (None, *(o.value for o in Outcome if o.measured))
    if paper is not None and measured_outcome and kind_of(measured) != kind_of(paper):
        return (f"field 'measured' must be a {kind_of(paper)}, as the paper's value of '{claim_id}' is "
                f"(got {measured!r})")
    claim_unit = (getattr(expected, "units", None) or {}).get(claim_id)
    return claim_unit_problem(data.get("unit"), claim_unit, claim_id) if claim_unit else None


#: the splits a unit's parenthesis may name ("PPL per wordpiece (dev)")
_SPLITS = ("train", "dev", "test")


def claim_unit_problem(unit: Any, claim_unit: str, claim_id: str) -> str | None:
    """Whether a record's ``unit`` contradicts its claim's: both scores, but other scores (sacreBLEU
    stored for the paper's tokenized BLEU, a perplexity for a BLEU); one detokenized, the other
    tokenized (the 0.7-1.5 BLEU the protocols differ by); or both naming a split, but another one (a
    test-set perplexity for Table 3's dev PPL). Units that are not scores, or qualify them otherwise
    ("BLEU (dev)" against "BLEU (tokenized, compound splitting)"), are not compared."""
    record = _SCORE_UNIT.match(unit.strip()) if isinstance(unit, str) else None
    claim = _SCORE_UNIT.match(claim_unit.strip())
    if record is None or claim is None:
        return None
    why = None
    if record["score"] != claim["score"]:
        why = "another score"
    elif _protocol(unit) and _protocol(claim_unit) and _protocol(unit) != _protocol(claim_unit):
        why = "another BLEU protocol"
    elif _split(unit) and _split(claim_unit) and _split(unit) != _split(claim_unit):
        why = "another split"
    if why is None:
        return None
    return f"field 'unit': {unit!r} is not what the claim '{claim_id}' measures ({claim_unit!r}): {why}"


def _protocol(unit: str) -> str | None:
    words = set(re.findall(r"[a-z]+", unit.lower()))
    return "detokenized" if "detokenized" in words else "tokenized" if "tokenized" in words else None


def _split(unit: str) -> str | None:
    inside = re.search(r"\(([^()]*)\)", unit)
    return inside[1].strip() if inside and inside[1].strip() in _SPLITS else None
