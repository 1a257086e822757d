"""Benchmark plumbing: cases alternate round by round, ratios pair cases of the same round."""

from repro.benchmarks.machine import alternate, environment, ratio_spread, spread
from repro.benchmarks.matmul_peak import sustained_matmul


def test_cases_alternate_and_warmup_rounds_are_dropped():
    order = []
    seconds = alternate({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, rounds=3, warmup=1)
    assert order == ["a", "b"] * 4
    assert [len(v) for v in seconds.values()] == [3, 3]


def test_ratios_are_per_round_with_median_and_spread():
    # round 2 is slow for both cases (machine load): per-round ratios stay 2, a ratio of medians would too,
    # but a ratio of unpaired values would not
    r = ratio_spread([2.0, 20.0, 4.0], [1.0, 10.0, 2.0])
    assert r["values"] == [2.0, 2.0, 2.0] and r["median"] == 2.0 and r["min"] == r["max"] == 2.0
    s = spread([3.0, 1.0, 2.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)


def test_sustained_matmul_reports_median_over_several_products():
    out = sustained_matmul(64, seconds=0.01, min_runs=3)
    assert out["gflops"]["n"] >= 3 and out["gflops"]["min"] <= out["gflops"]["median"] <= out["gflops"]["max"]
    assert out["dtype"] == "float32"


def test_environment_names_the_cpu_and_commit():
    env = environment("under the lock")
    assert env["cpu"] and env["commit"] and env["conditions"] == "under the lock"
