"""The results store: every measured value, with the provenance that makes it citable."""

from repro.results.provenance import Provenance, collect_provenance
from repro.results.records import store_records
from repro.results.store import DEFAULT_RESULTS, Result, ResultStore

__all__ = ["DEFAULT_RESULTS", "Provenance", "Result", "ResultStore", "collect_provenance", "store_records"]
