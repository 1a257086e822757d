"""Every command's flags are parsed strictly (repro/argtypes.py): a value the flag cannot mean is
refused by argparse in one line naming the flag, exit 2, before the command runs."""

from __future__ import annotations

import pytest

from repro.cli import build_parser, main

MISSING = "/surely/not/here"

BAD = [
    (["train", "--max-steps", "0"], "--max-steps"),
    (["train", "--max-steps", "ten"], "--max-steps"),
    (["train", "--threads", "-1"], "--threads"),
    (["train", "--config", MISSING], "--config"),
    (["check", "--seed", "-1"], "--seed"),
    (["check", "--claims-dir", MISSING], "--claims-dir"),
    (["audit", "--seed", "-5", "x:y"], "--seed"),
    (["audit", "--claims-dir", MISSING, "x:y"], "--claims-dir"),
    (["audit", "--device", "gpu0", "x:y"], "--device"),
    (["check", "--device", "cuda:x"], "--device"),
    (["claims", "--claims-dir", MISSING, "list"], "--claims-dir"),
    (["report", "--claims-dir", MISSING], "--claims-dir"),
    (["average", MISSING], "run_dir"),
    (["average", "--last", "0", "."], "--last"),
    (["average", "--checkpoints", MISSING, "-o", "x.pt"], "--checkpoints"),
    (["data", "show", "multi30k-en-de", "--max-len", "-3"], "--max-len"),
    (["evalb", MISSING, MISSING], "gold"),
    (["evalb", "--max-error", "-1", ".", "."], "--max-error"),
    (["evalb", "--cutoff", "x", ".", "."], "--cutoff"),
    (["evaluate", "--checkpoint", MISSING], "--checkpoint"),
    (["translate", "--checkpoint", MISSING], "--checkpoint"),
    (["translate", "--checkpoint", __file__, "--beam", "0"], "--beam"),
    (["translate", "--checkpoint", __file__, "--alpha", "-0.5"], "--alpha"),
    (["translate", "--checkpoint", __file__, "--alpha", "nan"], "--alpha"),
    (["translate", "--checkpoint", __file__, "--max-len-offset", "-1"], "--max-len-offset"),
    (["translate", "--checkpoint", __file__, "--max-tokens", "0"], "--max-tokens"),
    (["reproduce", "--max-steps", "-1"], "--max-steps"),
    (["reproduce", "--test-limit", "0"], "--test-limit"),
    (["submit", "smoke", "--cluster", "x", "--timeout-min", "0"], "--timeout-min"),
]


@pytest.mark.parametrize("argv, flag", BAD, ids=[" ".join(a[:1] + [f]) for a, f in BAD])
def test_bad_flag_value_is_refused_in_one_line(capsys, argv, flag):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"error: argument {flag}" in lines[0], err


def test_good_values_still_parse():
    parser = build_parser()
    args = parser.parse_args(["train", "--max-steps", "5", "--threads", "0", "--config", __file__])
    assert args.max_steps == 5 and args.threads == 0 and args.config == __file__
    args = parser.parse_args(["translate", "--checkpoint", __file__, "--beam", "1", "--alpha", "0", "--max-len-offset", "0"])
    assert (args.beam, args.alpha, args.max_len_offset, args.checkpoint) == (1, 0.0, 0, __file__)
    assert parser.parse_args(["check", "--seed", "0"]).seed == 0


def test_status_refuses_a_missing_state_dir(tmp_path, capsys):
    assert main(["status", "--state-dir", str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'typo'}: state directory (--state-dir) does not exist" in err


BENCH_BAD = [   # issue 39: every count a benchmark takes is at least 1; --out is a file that can be written
    (["bench", "train_speed", "--steps", "0"], "--steps"),
    (["bench", "precision_speed", "--steps", "0"], "--steps"),
    (["bench", "gpu", "--steps", "0"], "--steps"),
    (["bench", "decode_speed", "--rounds", "0"], "--rounds"),
    (["bench", "matmul_peak", "--n", "0"], "--n"),
    (["bench", "matmul_peak", "--seconds", "0"], "--seconds"),
    (["bench", "check_time", "--repeats", "0"], "--repeats"),
    (["bench", "train_speed", "--sentences", "-2"], "--sentences"),
    (["bench", "attention", "--batch", "0"], "--batch"),
    (["bench", "attention", "--rounds", "0"], "--rounds"),
]


@pytest.mark.parametrize("argv, flag", BENCH_BAD, ids=[" ".join(a[1:3]) for a, _ in BENCH_BAD])
def test_bench_counts_must_be_positive(capsys, argv, flag):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err


def test_bench_out_under_a_regular_file_is_refused(tmp_path, capsys):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["bench", "matmul_peak", "--n", "8", "--seconds", "0.01", "--out", str(plain / "out.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --out" in err and str(plain) in err
