"""pytest plugin: ``pytest --repro-target module:factory`` runs the paper's claims as tests.

Installed with repro (entry point ``pytest11``), it does nothing unless ``--repro-target`` is
given. Then it adds one test per claim that measures an implementation (the claims of
``repro audit``), whatever test files the project has, or none: they are added after
collection, so ``pytest --repro-target mymod:factory`` in one's own project runs them beside
its own tests (select them alone with ``-m repro_claim``). A claim that passes is a passed
test; one that fails (an absent part included), whose comparison was inconclusive, or whose
adapter method raised or returned a wrongly shaped value, a failed test that shows measured
against expected, the reason, or the method at fault; a claim whose part the adapter does not
expose is skipped with the reason; a figure on which the paper contradicts itself
is an expected failure (xfail).

repro is imported only when ``--repro-target`` is given: the plugin is loaded by every pytest
run in an environment where repro is installed, and must cost nothing there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repro.argtypes import non_negative_int

ADAPTER_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("repro")
    group.addoption(
        "--repro-target",
        action="store",
        default=None,
        metavar="MODULE:FACTORY",
        help="audit the Transformer implementation returned by this adapter factory against the paper's claims",
    )
    group.addoption(
        "--repro-claims-dir", action="store", default=None, metavar="DIR",
        help="directory of claims files for --repro-target (default: repro's claims/)",
    )
    group.addoption("--repro-seed", action="store", type=non_negative_int, default=0, help="seed of the claims' random inputs")
    group.addoption("--repro-device", action="store", default="cpu", metavar="DEVICE",
                    help="where the implementation's parts are built and run: cpu (default), auto, cuda or cuda:N "
                         "(repro audit --device)")


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("repro_target")
    if not target:
        return
    config.addinivalue_line("markers", "repro_claim(id): a claim of the paper audited against --repro-target")
    from repro.audit.load import load_adapter
    from repro.errors import ReproError

    from repro.audit.on_device import on_device
    from repro.runtime import Runtime

    try:
        config.stash[ADAPTER_KEY] = load_adapter(target)
    except ReproError as err:
        raise pytest.UsageError(f"--repro-target: {err}") from None
    try:
        runtime = Runtime.resolve(config.getoption("repro_device"), "fp32")
    except ReproError as err:
        raise pytest.UsageError(f"--repro-device: {err}") from None
    config.stash[ADAPTER_KEY] = on_device(config.stash[ADAPTER_KEY], runtime)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, so that they select among the claims too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if ADAPTER_KEY not in config.stash:
        return
    from repro.audit.audit import auditable_claims
    from repro.errors import ReproError

    try:
        claims = auditable_claims(config.getoption("repro_claims_dir"))
    except ReproError as err:
        raise pytest.UsageError(f"--repro-target: {err}") from None
    for claim in claims:
        item = ClaimItem.from_parent(
            session, name=claim.id, nodeid=f"repro-audit/{Path(claim.file).name}::{claim.id}", claim=claim
        )
        item.add_marker(pytest.mark.repro_claim(claim.id))
        items.append(item)


class ClaimBroken(Exception):
    """An applicable claim that failed or erred; carries its record."""

    def __init__(self, record: Any) -> None:
        super().__init__(record.why)
        self.record = record


class ClaimItem(pytest.Item):
    """One claim of the paper, checked against the adapter of ``--repro-target``."""

    def __init__(self, *, claim: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.claim = claim

    def runtest(self) -> None:
        from repro.audit.audit import audit_claim
        from repro.claims import Outcome

        record = audit_claim(self.claim, self.config.stash[ADAPTER_KEY], self.config.getoption("repro_seed"))
        self.user_properties.extend([("repro_status", record.status.value), ("repro_why", record.why)])
        if record.status == Outcome.PASS:
            return
        if record.status in (Outcome.NOT_APPLICABLE, Outcome.NOT_RUN):
            # Reported at the claim's line in its claims file, as a skip marker would be.
            raise pytest.skip.Exception(f"{self.claim.id}: {record.status}: {record.why}", _use_item_location=True)
        if record.status == Outcome.INCONSISTENT:
            pytest.xfail(f"{self.claim.id}: {record.why}")
        raise ClaimBroken(record)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if not isinstance(excinfo.value, ClaimBroken):
            return str(super().repr_failure(excinfo, style))
        from repro.audit.audit import tolerance_text
        from repro.claims import Outcome
        from repro.claims.table import format_value

        record = excinfo.value.record
        c = record.claim
        verdict = {Outcome.FAIL: "FAILED", Outcome.INCONCLUSIVE: "INCONCLUSIVE"}.get(record.status, "ERROR")
        lines = [f"claim {c.id} ({c.source}) {verdict} against {record.target}", f"  statement: {c.statement}"]
        if record.status == Outcome.FAIL:
            unit = f" [{record.check.unit or c.unit}]" if (record.check.unit or c.unit) else ""
            lines += [
                f"  expected:  {format_value(c.expected, 80)}{tolerance_text(c)}{unit}",
                f"  measured:  {format_value(record.check.measured, 80)}",
                f"  detail:    {record.check.detail}",
            ]
        elif record.status == Outcome.INCONCLUSIVE:
            lines.append(f"  why:       {record.check.detail} (never a pass)")
        else:
            lines.append(f"  error:     {record.check.detail}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.claim.file), _line_of(self.claim), f"repro claim {self.claim.id}"


def _line_of(claim: Any) -> int:
    """The 0-based line of the claim's ``id = "..."`` in its claims file (0 if not found)."""
    from repro.errors import ReproError
    from repro.files.reader import read_text

    try:
        lines = read_text(claim.file, "claims file").splitlines()
    except ReproError:
        return 0
    return next((i for i, line in enumerate(lines) if line.replace(" ", "") == f'id="{claim.id}"'), 0)
