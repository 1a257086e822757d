"""``report.json`` and ``claims.csv``: the report for machines.

The JSON keeps raw values (numbers stay numbers) and every provenance field; the CSV is the
claims table, one row per claim, with the same columns as :data:`repro.report.build.ROW_COLUMNS`.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from repro.report.build import ROW_COLUMNS
from repro.report.document import Document


def _jsonable(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def render(doc: Document) -> str:
    data = doc.data
    payload = {
        "generated": data.generated,
        "results_dirs": [str(d) for d in data.result_dirs],
        "summary": data.counts(),
        "summary_by_basis": data.counts_by_basis(),
        "statuses": doc.legend,
        "claims": [
            {**r.to_dict(), "statement": r.claim.statement, "kind": r.claim.kind,
             "inconsistency": r.claim.inconsistency or None,
             "provenance_extra": r.provenance.extra if r.provenance else None}
            for r in data.rows
        ],
        "tables": {s.title: _jsonable(s.table) for s in doc.sections[2:]},
        "figures": [{"name": f.name, "title": f.title, "caption": f.caption, "file": f"figures/{f.name}.png"}
                    for f in doc.figures.figures],
        "notes": doc.notes,
        "unmatched_results": data.unmatched,
    }
    return json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n"


def render_csv(doc: Document) -> str:
    rows = []
    for r in doc.data.rows:
        d = r.to_dict()
        rows.append({k: json.dumps(v, default=str) if isinstance(v, (dict, list)) else v for k, v in d.items()})
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS)).to_csv(index=False)
