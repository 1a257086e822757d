"""pytest plugin: ``pytest --repro-target module:factory`` runs the paper's claims as tests."""

from __future__ import annotations


def pytest_addoption(parser) -> None:  # type: ignore[no-untyped-def]
    group = parser.getgroup("repro")
    group.addoption(
        "--repro-target",
        action="store",
        default=None,
        metavar="MODULE:FACTORY",
        help="audit the Transformer implementation returned by this adapter factory against the paper's claims",
    )
