"""Synthetic claims and result sets for the reporter's tests."""

from __future__ import annotations

import dataclasses

from pathlib import Path

import pytest

from repro.results import Provenance, Result, ResultStore

XSS = "<script>alert(1)</script>"

CLAIMS_TOML = f'''
[[claim]]
id = "t.reproduced"
source = "Synthetic, Table 2"
statement = "27.3 BLEU."
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 27.3
tolerance = {{ abs = 0.5 }}

[[claim]]
id = "t.within"
source = "Synthetic"
statement = "27.3 BLEU, measured 27.0."
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 27.3
tolerance = {{ abs = 0.5 }}

[[claim]]
id = "t.deviates"
source = "Synthetic"
statement = "27.3 BLEU, measured 25."
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 27.3
tolerance = {{ abs = 0.5 }}

[[claim]]
id = "t.inconsistent"
source = "Synthetic"
statement = "41.8 BLEU (41.0 elsewhere)."
kind = "metric"
scale = "cluster"
checker = "metric.result"
expected = 41.8
tolerance = {{ abs = 0.5 }}
inconsistency = "41.8 in the abstract, 41.0 in Section 6.1."
inconsistency_bound = {{ abs = 1.3 }}

[[claim]]
id = "t.needs-cluster"
source = "Synthetic"
statement = "A cluster claim with no result."
kind = "metric"
scale = "cluster"
checker = "metric.result"
expected = 4.92
tolerance = {{ abs = 0.1 }}

[[claim]]
id = "t.cluster-with-local-result"
source = "Synthetic"
statement = "A cluster claim measured only at local scale."
kind = "metric"
scale = "cluster"
checker = "metric.result"
expected = 4.92
tolerance = {{ abs = 0.1 }}

[[claim]]
id = "t.not-run"
source = "Synthetic"
statement = "A local claim with no result."
kind = "hyperparameter"
scale = "local"
checker = "recipe.value"
expected = 4000
tolerance = {{ abs = 0 }}

[[claim]]
id = "t.error"
source = "Synthetic"
statement = "A check that broke."
kind = "equation"
scale = "local"
checker = "attention.eq1"
expected = 0.0
tolerance = {{ abs = 1e-5 }}

[[claim]]
id = "t.escape"
source = "Synthetic {XSS}"
statement = "A value that is markup: {XSS}"
kind = "hyperparameter"
scale = "local"
checker = "recipe.value"
expected = "{XSS}"
'''

#: claim id -> (measured, provenance scale, checker status); the status each must get.
SYNTHETIC = {
    "t.reproduced": (27.34, "local: synthetic", None, "reproduced"),
    "t.within": (27.0, "local: synthetic", None, "within tolerance"),
    "t.deviates": (25.0, "local: synthetic", None, "deviates"),
    "t.inconsistent": (41.0, "cluster: synthetic 8 GPUs", None, "paper inconsistent"),
    "t.cluster-with-local-result": (4.92, "local: 2-core CPU", None, "needs cluster"),
    "t.error": (None, "local: synthetic", "error", "error"),
    "t.escape": (XSS, "local: synthetic", "pass", "reproduced"),
}
#: 95% intervals of the metric results: the paper's 27.3 lies in the first, not in the second.
INTERVALS = {"t.reproduced": (26.98, 27.71), "t.within": (26.5, 27.24)}
EXPECTED_STATUS = {**{k: v[3] for k, v in SYNTHETIC.items()}, "t.needs-cluster": "needs cluster", "t.not-run": "not run"}


def provenance(scale: str = "local: synthetic", date: str = "2026-01-01T00:00:00+00:00", **extra) -> Provenance:
    return Provenance(commit="0123456789abcdef", config_hash="cafe", hardware="synthetic CPU", dataset="synthetic",
                      date=date, scale=scale, bleu_signature="nrefs:1|tok:13a", extra=extra)


@pytest.fixture
def claims_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "claims"
    folder.mkdir()
    (folder / "synthetic.toml").write_text(CLAIMS_TOML, encoding="utf-8")
    return folder


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    store = ResultStore(tmp_path / "results")
    for claim_id, (measured, scale, status, _) in SYNTHETIC.items():
        store.write(Result(claim_id, measured, provenance(scale), status=status,
                           detail="broke" if status == "error" else "", ci95=INTERVALS.get(claim_id)))
    return store.root


@pytest.fixture
def make_provenance():
    return provenance


def paper_job_provenance(claim_id: str, scale: str, **extra) -> Provenance:
    """Provenance of a result of the paper's job for ``claim_id``: its recipe's config hash and, where the
    claim has one, the paper's test set scored (repro.observed.gate counts it for the claim)."""
    from repro.checks import select_claims
    from repro.observed.counterpart import claim_job, claim_test_set

    claim = next(c for c in select_claims() if c.id == claim_id)
    paper = claim_test_set(claim_id, claim.params.get("split"))
    scored = {} if paper is None else {"test_set": {
        side: {"lines": paper.lines, "content_sha256": content}
        for side, content in (("source", paper.source_content), ("reference", paper.reference_content))}}
    measured_as = {"measure": claim.params["measure"]} if "measure" in claim.params else {}
    return dataclasses.replace(provenance(scale, **scored, **measured_as, **extra),
                               config_hash=claim_job(claim_id).recipe_hash)


@pytest.fixture
def make_paper_provenance():
    return paper_job_provenance


@pytest.fixture
def expected_status() -> dict[str, str]:
    return dict(EXPECTED_STATUS)
