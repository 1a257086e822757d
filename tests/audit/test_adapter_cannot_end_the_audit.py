"""Issue 39, item 5: the implementation cannot end the audit.

An adapter method that calls ``sys.exit(0)`` (or raises SystemExit / KeyboardInterrupt itself) is
that claim's error, recorded, and the audit goes on and exits 1; the user's own Ctrl-C (a real
SIGINT) still stops the run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
import torch

from repro.audit.adapter import Adapter
from repro.cli import main
from repro.claims.runner import run_claim

USER_MODULE = '''
import sys
import torch
from repro.audit.adapter import Adapter

class Exits(Adapter):
    name = "exits"
    def attention(self, q, k, v, mask):
        sys.exit(0)

class Interrupts(Adapter):
    name = "interrupts"
    def attention(self, q, k, v, mask):
        raise KeyboardInterrupt

class Half(Adapter):
    name = "half"
    calls = 0
    def attention(self, q, k, v, mask):
        Half.calls += 1
        if Half.calls == 1:
            raise SystemExit("bye")
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

def exits():
    return Exits()

def interrupts():
    return Interrupts()

def half():
    return Half()

def factory_exits():
    sys.exit(0)
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"user_exit_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return name


@pytest.mark.parametrize("factory, raised", [("exits", "SystemExit"), ("interrupts", "KeyboardInterrupt")])
def test_an_adapter_that_exits_is_that_claims_error(user_module, tmp_path, capsys, factory, raised, default_sigint):
    out = tmp_path / "audit.json"
    assert main(["audit", f"{user_module}:{factory}", "--only", "sec3.eq1", "--json", str(out)]) == 1
    # the claims this adapter can serve (sec3.eq1.in-model needs a model it does not expose: not applicable)
    records = [r for r in json.loads(out.read_text()) if r["status"] != "not applicable"]
    assert records and {r["status"] for r in records} == {"error"}
    assert all(raised in r["detail"] and "adapter method 'attention" in r["detail"] for r in records)


def test_the_audit_goes_on_after_an_adapter_exits(user_module, tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert main(["audit", f"{user_module}:half", "--only", "sec3.eq1", "--json", str(out)]) == 1
    statuses = [r["status"] for r in json.loads(out.read_text())]
    assert statuses[0] == "error" and "pass" in statuses[1:]


def test_a_factory_that_exits_is_a_bad_target(user_module, capsys):
    assert main(["audit", f"{user_module}:factory_exits"]) == 2
    assert "SystemExit" in capsys.readouterr().err


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for the test, whatever the process inherited (a test run started with
    ``&`` by a script inherits SIGINT ignored), and the inherited one back after it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_raise_while_sigint_is_ignored_is_the_claims_error(user_module, tmp_path):
    """With SIGINT ignored no Ctrl-C can arrive: a KeyboardInterrupt is the adapter's, never the user's."""
    out = tmp_path / "audit.json"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert main(["audit", f"{user_module}:interrupts", "--only", "sec3.eq1", "--json", str(out)]) == 1
    finally:
        signal.signal(signal.SIGINT, before)
    assert {r["status"] for r in json.loads(out.read_text())} - {"not applicable"} == {"error"}


def test_the_users_ctrl_c_still_stops_the_run(default_sigint):
    from repro.checks import select_claims
    from repro.checks.registry import CHECKERS

    class SignalsItself(Adapter):
        name = "ctrl-c"

        def attention(self, q, k, v, mask):
            os.kill(os.getpid(), signal.SIGINT)   # as the user's Ctrl-C arrives: a signal, not a raise
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    claim = next(c for c in select_claims() if c.id.startswith("sec3.eq1"))
    with pytest.raises(KeyboardInterrupt):
        run_claim(claim, CHECKERS[claim.checker], SignalsItself())
