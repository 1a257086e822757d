"""The JSON schema every claim in ``claims/*.toml`` must satisfy."""

from __future__ import annotations

from repro.claims.claim import BASES, KINDS, SCALES

_VALUE = {"type": ["number", "string", "boolean", "array", "object"]}

CLAIM_SCHEMA: dict = {
    "type": "object",
    "required": ["id", "source", "statement", "kind", "scale", "checker"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"},
        "source": {"type": "string", "minLength": 1},
        "statement": {"type": "string", "minLength": 1},
        "kind": {"enum": list(KINDS)},
        "scale": {"enum": list(SCALES)},
        "checker": {"type": "string", "pattern": r"^[a-z0-9_]+(\.[a-z0-9_\-]+)+$"},
        "expected": _VALUE,
        "tolerance": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {"abs": {"type": "number", "minimum": 0}, "rel": {"type": "number", "minimum": 0}},
        },
        "rounding": {"type": "number", "exclusiveMinimum": 0},
        "unit": {"type": "string"},
        "params": {"type": "object"},
        "bound": {"enum": ["at_least", "at_most"]},
        "notes": {"type": "string"},
        "inconsistency": {"type": "string"},
        "inconsistency_bound": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {"abs": {"type": "number", "minimum": 0}, "rel": {"type": "number", "minimum": 0}},
        },
        "basis": {"enum": list(BASES)},
        "target": {"type": "boolean"},
    },
    "allOf": [
        # A numeric paper value needs a stated tolerance or the paper's rounding.
        {
            "if": {"properties": {"expected": {"type": "number"}}, "required": ["expected"]},
            "then": {"anyOf": [{"required": ["tolerance"]}, {"required": ["rounding"]}, {"required": ["bound"]}]},
        },
        # A tolerance or rounding only makes sense against a numeric paper value.
        {
            "if": {"anyOf": [{"required": ["tolerance"]}, {"required": ["rounding"]}, {"required": ["bound"]}]},
            "then": {
                "required": ["expected"],
                "properties": {"expected": {"type": ["number", "array"], "items": {"type": "number"}}},
            },
        },
        # The size of the paper's inconsistency needs the inconsistency (a numeric claim that records
        # an inconsistency without its size is loaded, but a failure of it is a failure: no size).
        {"if": {"required": ["inconsistency_bound"]}, "then": {"required": ["inconsistency", "expected"]}},
        # Metric claims need a run; their expected value is the paper's number.
        {
            "if": {"properties": {"kind": {"const": "metric"}}},
            "then": {"required": ["expected"]},
        },
    ],
}

FILE_SCHEMA: dict = {
    "type": "object",
    "required": ["claim"],
    "additionalProperties": False,
    "properties": {
        "part": {"type": "string"},
        "claim": {"type": "array", "minItems": 1, "items": {"type": "object"}},
    },
}
