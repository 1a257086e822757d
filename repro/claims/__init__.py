"""The claims engine: ``claims/*.toml`` are loaded, validated and run, one checker per claim.

- ``claim``    one claim and how a measurement is compared with the paper's value
- ``schema``   the JSON schema every claim satisfies
- ``loader``   reading and validating the claims files
- ``outcome``  what a checker returns (Measurement) or raises (NotRun, NotApplicable, Absent,
                Inconclusive); Outcome
- ``runner``   one checker per claim against one implementation, an error never stopping the rest
- ``table``    the terminal table of ``repro check``
"""

from repro.claims.claim import BASES, KINDS, SCALES, Claim
from repro.claims.loader import default_claims_dir, load_claims
from repro.claims.outcome import Absent, CheckContext, Inconclusive, Measurement, NotApplicable, NotRun, Outcome

__all__ = ["BASES", "KINDS", "SCALES", "Absent", "CheckContext", "Claim", "Inconclusive", "Measurement", "NotApplicable",
           "NotRun", "Outcome", "default_claims_dir", "load_claims"]
