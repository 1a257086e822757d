"""The results store: every measured value, with the provenance that makes it citable."""

from repro.results.provenance import Provenance, collect_provenance
from repro.results.store import Result, ResultStore

__all__ = ["Provenance", "Result", "ResultStore", "collect_provenance"]
