"""Loading ``claims/*.toml``: validate each claim against the schema, name the file and claim on error."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection
from pathlib import Path

import jsonschema

from repro.claims.claim import Claim
from repro.claims.schema import CLAIM_SCHEMA, FILE_SCHEMA
from repro.errors import ClaimFileError
from repro.shipped import shipped_dir

ENV_CLAIMS_DIR = "REPRO_CLAIMS_DIR"


def default_claims_dir() -> Path:
    """``$REPRO_CLAIMS_DIR``, else the ``claims/`` folder of the checkout, else the claims the
    installed package carries."""
    env = os.environ.get(ENV_CLAIMS_DIR)
    return Path(env) if env else shipped_dir("claims", "claims_data")


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        return error.message
    if error.validator == "minimum" and where.startswith("tolerance."):
        return f"field '{where}' must not be negative (got {error.instance})"
    if error.validator == "anyOf" and not where:
        return "a numeric 'expected' needs a 'tolerance', a 'rounding' or a 'bound'"
    if error.validator == "type":
        return f"field '{where}' must be of type {error.validator_value} (got {error.instance!r})"
    return f"field '{where or '<claim>'}': {error.message}"


def load_file(path: Path, checkers: Collection[str] | None = None) -> list[Claim]:
    """The claims of one file; with ``checkers``, a claim naming another checker is refused."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ClaimFileError(f"{path}: cannot read claims file ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise ClaimFileError(f"{path}: not valid TOML ({err})") from None
    file_error = next(iter(jsonschema.Draft202012Validator(FILE_SCHEMA).iter_errors(data)), None)
    if file_error is not None:
        raise ClaimFileError(f"{path}: {_describe(file_error)} (a claims file holds [[claim]] tables)")
    validator = jsonschema.Draft202012Validator(CLAIM_SCHEMA)
    claims = []
    for index, raw in enumerate(data["claim"], start=1):
        name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{index}"
        errors = sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
        if errors:
            raise ClaimFileError(f"{path}: claim '{name}': {_describe(errors[0])}")
        if checkers is not None and raw["checker"] not in checkers:
            raise ClaimFileError(f"{path}: claim '{name}': field 'checker': no checker named '{raw['checker']}' "
                                 f"(known: {', '.join(sorted(checkers))})")
        claims.append(Claim(file=str(path), **raw))
    return claims


def load_claims(directory: str | os.PathLike[str] | None = None,
                checkers: Collection[str] | None = None) -> list[Claim]:
    """Every claim under ``directory`` (default: :func:`default_claims_dir`), ids unique; with
    ``checkers`` (the names of the registered checkers), a claim naming an unknown one is refused."""
    directory = Path(directory) if directory else default_claims_dir()
    if not directory.is_dir():
        raise ClaimFileError(f"{directory}: claims directory does not exist")
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise ClaimFileError(f"{directory}: no claims files (*.toml) found")
    claims: list[Claim] = []
    seen: dict[str, str] = {}
    for path in files:
        for claim in load_file(path, checkers):
            if claim.id in seen:
                raise ClaimFileError(f"{path}: claim '{claim.id}': duplicate id (first defined in {seen[claim.id]})")
            seen[claim.id] = str(path)
            claims.append(claim)
    return claims
