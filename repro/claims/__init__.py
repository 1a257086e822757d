"""The claims engine: ``claims/*.toml`` are loaded, validated and run, one checker per claim."""

from repro.claims.claim import KINDS, SCALES, Claim
from repro.claims.loader import default_claims_dir, load_claims

__all__ = ["KINDS", "SCALES", "Claim", "default_claims_dir", "load_claims"]
