"""The measurements a job takes of what it trained, by the names metric claims give them.

:mod:`repro.measures.measure_registry` holds the registry (name -> code) and the types a job hands it;
the modules below fill it, one kind of measurement each; :mod:`repro.measures.recording` stores
what was measured; :mod:`repro.measures.claimed` reads what a job's claims ask for.
"""

from repro.measures import parse_f1, step_seconds, translation_quality  # noqa: F401  (they fill the registry)
from repro.measures.claimed import claim_requests
from repro.measures.over_seeds import combine_seeds
from repro.measures.recording import EVALUATIONS, keep_in_run, record, result_of
from repro.measures.measure_registry import MEASUREMENTS, Measured, Request, Trained, measure, measurement

__all__ = ["EVALUATIONS", "MEASUREMENTS", "Measured", "Request", "Trained", "claim_requests", "combine_seeds",
           "keep_in_run", "measure", "measurement", "record", "result_of"]
