"""``module:factory`` loading and ``repro audit TARGET [--json FILE]``."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from repro.audit.load import TargetError, load_adapter
from repro.cli import main

USER_MODULE = '''
import math
import torch
from repro.audit.adapter import Adapter

class Paper(Adapter):
    name = "user attention"
    def attention(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

class ScaledLate(Adapter):
    name = "user attention, scaled late"
    def attention(self, q, k, v, mask):
        s = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
        return s.softmax(-1) / math.sqrt(q.shape[-1]) @ v

def good():
    return Paper()

def bad():
    return ScaledLate()

def not_an_adapter():
    return 42

def explodes():
    raise RuntimeError("cannot build")

value = 3
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of the user's project, importable from the working directory only."""
    name = f"user_impl_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return name


def test_loads_a_factory_from_the_working_directory(user_module: str) -> None:
    assert load_adapter(f"{user_module}:good").name == "user attention"


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_colon", "must have the form 'module:factory'"),
        ("surely_not_a_module_xyz:f", "module 'surely_not_a_module_xyz' not found"),
        ("{m}:missing", "has no attribute 'missing'; it has"),
        ("{m}:not_an_adapter", "not_an_adapter() returned int, not an adapter"),
        ("{m}:explodes", "calling explodes() raised RuntimeError: cannot build"),
        ("{m}:value", "'value' is a int, not a factory"),
    ],
)
def test_load_errors_are_clear(user_module: str, target: str, message: str) -> None:
    with pytest.raises(TargetError) as err:
        load_adapter(target.format(m=user_module))
    assert message in str(err.value)
    assert err.value.exit_code == 2


def test_cli_prints_table_writes_json_and_exits_0_when_nothing_breaks(
    user_module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit.json"
    assert main(["audit", f"{user_module}:good", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["claim", "source", "status", "why"]
    assert "sec3.eq1.scaled-dot-product" in table and "user attention: 6 pass" in table  # Eq. 1, every path, weighted sum (through attention), Section 3.2.1's three
    records = json.loads(out.read_text())
    assert {"id", "status", "expected", "measured", "detail", "why"} <= set(records[0])
    by_id = {r["id"]: r for r in records}
    assert by_id["sec3.eq1.scaled-dot-product"]["status"] == "pass"
    na = by_id["sec3.sublayer.post-norm"]
    assert na["status"] == "not applicable" and "adapter method 'encoder_layer'" in na["why"]
    assert {r["status"] for r in records} == {"pass", "not applicable"}


def test_cli_exits_1_when_an_applicable_claim_fails(user_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", f"{user_module}:bad", "--only", "sec3.eq1"]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("sec3.eq1"))
    assert "fail" in row and "measured" in row


def test_cli_exits_1_when_an_adapter_errs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "repro.audit.variants:raising", "--only", "sec3.eq1"]) == 1
    assert "adapter method 'attention'" in capsys.readouterr().out


def test_cli_bad_target_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "surely_not_a_module_xyz:f"]) == 2
    assert "repro: error: target 'surely_not_a_module_xyz:f': module" in capsys.readouterr().err


def test_cli_exits_3_when_nothing_was_checked(user_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the adapter has attention only: the post-norm claim is "not applicable", so nothing ran (docs/exit-codes.md)
    assert main(["audit", f"{user_module}:good", "--only", "sec3.sublayer.post-norm"]) == 3
    assert "nothing was checked" in capsys.readouterr().err
