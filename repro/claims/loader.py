"""Loading ``claims/*.toml``: validate each claim against the schema (its ``params`` against its
checker's, :mod:`repro.claims.params`; no NaN or infinity anywhere), name the file and claim on error."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from repro.claims.claim import Claim
from repro.claims.params import params_schema
from repro.claims.schema import CLAIM_SCHEMA, FILE_SCHEMA
from repro.errors import ClaimFileError, UsageError
from repro.files.reader import read_toml
from repro.paths import existing_dir
from repro.shipped import shipped_dir
from repro.validation import problem

ENV_CLAIMS_DIR = "REPRO_CLAIMS_DIR"


#: The files of a claims folder repro reads: the claims files, and the paper's statements (``claims coverage``).
FOLDER_FILES = ("*.toml", "statements.csv")


def as_input(claims_dir: str | os.PathLike[str] | None) -> tuple[Path, str, tuple[str, ...]]:
    """The claims folder a command reads (``claims_dir`` or the default), as :func:`repro.paths.outside_inputs`
    takes it: an output there must not be one of these files."""
    return (Path(claims_dir) if claims_dir else default_claims_dir(), "claims folder", FOLDER_FILES)


def default_claims_dir() -> Path:
    """``$REPRO_CLAIMS_DIR``, else the ``claims/`` folder of the checkout, else the claims the
    installed package carries."""
    env = os.environ.get(ENV_CLAIMS_DIR)
    return Path(env) if env else shipped_dir("claims", "claims_data")


def _claim_schema(checker: object) -> dict:
    """The claim schema with the ``params`` its checker takes (:mod:`repro.claims.params`)."""
    schema = dict(CLAIM_SCHEMA)
    if isinstance(checker, str):
        schema["properties"] = {**CLAIM_SCHEMA["properties"], "params": params_schema(checker)}
    return schema


def load_file(path: Path, checkers: Collection[str] | None = None) -> list[Claim]:
    """The claims of one file; with ``checkers``, a claim naming another checker is refused."""
    data = read_toml(path, "claims file", error=ClaimFileError)
    file_error = problem(data, FILE_SCHEMA, nan_allowed_in=("claim",))  # each claim is checked below
    if file_error is not None:
        raise ClaimFileError(f"{path}: {file_error} (a claims file holds [[claim]] tables)")
    claims = []
    for index, raw in enumerate(data["claim"], start=1):
        name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{index}"
        error = problem(raw, _claim_schema(raw.get("checker")))
        if error:
            raise ClaimFileError(f"{path}: claim '{name}': {error}")
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
        source = f" (${ENV_CLAIMS_DIR})" if os.environ.get(ENV_CLAIMS_DIR) == str(directory) else ""
        try:
            existing_dir(directory, f"claims directory{source}")
        except UsageError as err:
            raise ClaimFileError(str(err)) from None
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


class PaperValues(dict):
    """Claim id -> the paper's value (a plain dict), and ``units``: claim id -> the claim's unit, which a
    record of the claim must not contradict (:func:`repro.results.record_schema.claim_unit_problem`)."""

    def __init__(self, claims: list[Claim]) -> None:
        super().__init__((c.id, c.expected) for c in claims)
        self.units: dict[str, str] = {c.id: c.unit for c in claims if c.unit}


def known_values(claims_dir: str | os.PathLike[str] | None = None) -> PaperValues:
    """Claim id -> the paper's value (and each claim's unit), for every claim a result record may name:
    those under ``claims_dir`` and the project's own (:func:`default_claims_dir`), so that a store
    holding records of the shipped claims is not refused when another claims folder is checked."""
    shipped = load_claims(None)
    by_id = {c.id: c for c in shipped}
    if claims_dir is not None:
        by_id.update({c.id: c for c in load_claims(claims_dir)})
    return PaperValues(list(by_id.values()))
