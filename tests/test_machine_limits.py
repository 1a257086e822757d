"""Issue 45, item 5: work too large for the machine, and a reader that goes away, end in one line.

Under a memory limit (``ulimit -v``, here ``RLIMIT_AS`` of a child process), a model of 4.7e9
weights and a bootstrap of ten million resamples are refused before they allocate: "too large for
this machine", exit 2, no traceback. An allocation that fails anyway is reported the same way. A
closed output pipe (``repro claims list | head -1``) ends the command quietly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repro.cli import main
from tests.cli_run import refusal, run

REPO = Path(__file__).resolve().parents[1]
LIMIT = 6 * 2**30
BIG = '{"n_layers": 2, "d_model": 8192, "d_ff": 49152, "n_heads": 8}'   # 4.8e9 weights, within 10**10
CHILD = f"""
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))
from repro.cli import main
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    print(json.dumps({{"rc": rc, "err": err.getvalue()}}), flush=True)
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory) -> dict[str, dict]:
    """Each case run under a memory limit of 6 GiB, in one child process (one import of torch)."""
    root = tmp_path_factory.mktemp("limited")
    (root / "t.de").write_text("".join(f"Satz {i} ist hier\n" for i in range(200)))
    cases = {"model": ["train", "--recipe", "smoke", "--out-dir", "run", "--set", f"model_overrides={BIG}"],
             "bootstrap": ["bleu", "t.de", "t.de", "--confidence", "--confidence-n", "10000000", "--force"]}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(cases.values()))], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"root": root, **dict(zip(cases, results))}


def test_a_model_of_4_7e9_weights_is_too_large_for_this_machine(limited):
    rc, err = limited["model"]["rc"], limited["model"]["err"]
    assert rc == 2 and "too large for this machine" in refusal(err) and "4.83e+09" in refusal(err)
    assert not (limited["root"] / "run").exists()


def test_a_bootstrap_of_ten_million_resamples_is_too_large_for_this_machine(limited):
    rc, err = limited["bootstrap"]["rc"], limited["bootstrap"]["err"]
    assert rc == 2 and "too large for this machine" in refusal(err) and "--confidence-n" in refusal(err)


@pytest.mark.parametrize("failure", [MemoryError(), RuntimeError("[enforce fail at alloc_cpu.cpp:117] "
                                                                  "DefaultCPUAllocator: can't allocate memory")])
def test_an_allocation_that_fails_anyway_is_one_line(monkeypatch, capsys, failure):
    from repro.commands import claims

    def fail(_args):
        raise failure
    monkeypatch.setattr(claims, "list_claims", fail)
    rc, _, err = run(capsys, "claims", "list")
    assert rc == 2 and "too large for this machine" in refusal(err)


def test_a_closed_output_pipe_ends_quietly(monkeypatch, capsys):
    """``repro claims list | head -1``: the reader has gone when the listing is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    closed = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        rc = main(["claims", "list"])
    finally:
        monkeypatch.undo()
        closed.close()
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
