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
