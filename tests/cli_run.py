"""``repro ARGV`` run in-process by the tests of refusals: the exit code, what it printed, its one line."""

from __future__ import annotations

from repro.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``repro ARGV`` in-process: (exit code, stdout, stderr); argparse's refusals included."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def refusal(err: str) -> str:
    """The one line that refuses the input (and no traceback)."""
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


class _Uncaptured:
    """A stand-in for pytest's capsys where none is at hand (a module-scoped fixture): nothing captured."""

    def readouterr(self) -> tuple[str, str]:
        return "", ""


def succeed(*argv: str) -> None:
    """``repro ARGV`` in-process, which must exit 0 (for the fixtures that build runs through the CLI)."""
    rc, _, err = run(_Uncaptured(), *argv)
    assert rc == 0, err
