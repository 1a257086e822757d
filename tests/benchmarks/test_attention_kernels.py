"""``repro bench attention`` (Section 3.2, Eq. 1 per call kind) runs on the CPU in seconds, records
what a backend refuses instead of crashing, and never calls a wrong kernel the fastest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch.nn.attention import SDPBackend

from repro.benchmarks import attention_kernels
from repro.benchmarks.attention_kernels import MODEL, VARIANTS, forced

KINDS = {"encoder self (padding bias)", "decoder self (causal)", "cross (padding bias)"}
SMALL = ["--device", "cpu", "--precision", "fp32", "--batch", "3", "--length", "12", "--heads", "2",
         "--rounds", "2", "--calls", "1"]


def run(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "attention.json"
    attention_kernels.main([*SMALL, *extra, "--out", str(out)])
    return json.loads(out.read_text())


def test_every_kind_times_the_models_call_and_checks_it_against_eq1(tmp_path: Path) -> None:
    found = run(tmp_path)
    assert set(found["kinds"]) == KINDS
    assert found["shape"] == {"batch": 3, "length": 12, "heads": 2, "d_k": 64, "dtype": "torch.float32",
                              "model": "base"}
    for name, kind in found["kinds"].items():
        model = kind["variants"][MODEL]
        assert model["status"] == "ok" and model["s_per_call"] > 0 and model["spread"]["n"] == 2
        assert model["rel_err_out"] < 1e-5 and model["rel_err_dq"] < 1e-5
        assert ("efficient, explicit causal bias" in kind["variants"]) == kind["causal"]
        for compiled in ("math, compiled", "as the compiled model runs it"):
            assert kind["variants"][compiled]["status"] == "skipped"   # no compilation by default on a CPU
        assert kind["fastest"] in kind["variants"] and kind["variants"][kind["fastest"]]["status"] == "ok"
        assert kind["speedup_over_model"]["n"] == 2
        q = 3 * 2 * 12 * 64 * 4   # bytes of q (= k = v = o = dO) in fp32
        assert kind["floor_bytes"] == {"forward": 4 * q, "backward": 8 * q}
        if not kind["causal"]:
            assert 9 <= kind["key_lengths"]["min"] <= kind["key_lengths"]["max"] <= 12


def test_a_backend_that_is_not_eligible_is_recorded_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    def refuses(kind):
        def attend(q, k, v):
            raise RuntimeError("No available kernel. Aborting execution.\nsecond line")
        return attend
    monkeypatch.setitem(VARIANTS, "refusing", refuses)
    found = run(tmp_path)
    for kind in found["kinds"].values():
        refused = kind["variants"]["refusing"]
        assert refused["status"] == "error" and "s_per_call" not in refused
        assert refused["error"].startswith("RuntimeError: No available kernel") and "\n" not in refused["error"]
        # the CPU has no memory-efficient or cuDNN kernel: recorded the same way
        assert kind["variants"]["efficient (forced)"]["status"] == "error"
        assert kind["variants"]["cudnn (forced)"]["error"]


def test_a_variant_with_nan_is_wrong_untimed_and_never_the_fastest(tmp_path: Path, monkeypatch) -> None:
    math = forced(SDPBackend.MATH)

    def nan_math(kind):
        attend = math(kind)
        return lambda q, k, v: attend(q, k, v) * float("nan")

    def off_math(kind):   # finite, fast and wrong: past the tolerance
        attend = math(kind)
        return lambda q, k, v: attend(q, k, v) * 1.1

    monkeypatch.setitem(VARIANTS, "math (forced)", nan_math)
    monkeypatch.setitem(VARIANTS, "math, scaled", off_math)
    found = run(tmp_path)
    for kind in found["kinds"].values():
        nan = kind["variants"]["math (forced)"]
        assert nan["status"] == "wrong" and "NaN" in nan["error"] and "s_per_call" not in nan
        assert kind["variants"]["math, scaled"]["status"] == "wrong"
        assert kind["fastest"] not in ("math (forced)", "math, scaled")
        assert kind["variants"][kind["fastest"]]["status"] == "ok"


@pytest.mark.parametrize("flag", [["--batch", "0"], ["--rounds", "0"], ["--calls", "-1"], ["--model", "huge"]])
def test_bad_flags_exit_with_a_usage_error(flag: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        attention_kernels.main(["--device", "cpu", *flag])
    assert stop.value.code == 2
    assert flag[0] in capsys.readouterr().err
