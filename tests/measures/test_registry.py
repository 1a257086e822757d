"""The measurement registry (repro.measures) against the claims and the jobs: every metric claim names a
registered measurement, every job measures exactly what its claims name, a claim naming an unknown one is
refused when the claims are loaded, and a measurement that gives NaN is never stored as a pass."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest

from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS
from repro.claims import Outcome
from repro.claims.loader import load_claims
from repro.claims.measure_names import MEASURES, MODEL_MEASURES, RUN_MEASURES
from repro.claims.params import PARAMS
from repro.claims.runner import run_claim
from repro.cli import main as cli_main
from repro.cluster.experiments import EXPERIMENTS, Plan, plan_jobs
from repro.cluster.profiles import load_profile
from repro.errors import ClaimFileError, ConfigError
from repro.decode.settings import TRANSLATION
from repro.measures import MEASUREMENTS, Measured, Request, Trained, claim_requests, combine_seeds, measure, record
from repro.pipeline import local, parsing
from repro.results import ResultStore
from repro.runtime import Runtime
from repro.train.step_clock import StepClock, compile_count

CLAIMS = {c.id: c for c in load_claims(checkers=CHECKERS)}
METRIC = {cid: c for cid, c in CLAIMS.items() if c.checker.startswith("metric.")}


def test_the_registry_implements_the_catalogue_and_the_params_schema_names_it():
    assert sorted(MEASUREMENTS) == sorted(MEASURES) and len(MEASURES) >= 6
    assert sorted(PARAMS["metric.result"]["measure"]["enum"]) == sorted(MODEL_MEASURES)
    assert sorted(PARAMS["metric.step_time"]["measure"]["enum"]) == sorted(RUN_MEASURES)


def test_every_metric_claim_names_a_registered_measurement():
    assert len(METRIC) == 49
    for cid, claim in METRIC.items():
        measure = claim.params.get("measure")
        assert measure in MEASUREMENTS, cid
        assert (claim.params.get("split") is None) == (measure in RUN_MEASURES), cid
    # what each kind of claim names: the paper's protocol for Tables 2 and 3, never sacreBLEU
    assert {METRIC[c].params["measure"] for c in METRIC if ".bleu." in c and c.startswith("table")} == \
        {"bleu.tokenized-compound-split"}
    assert {METRIC[c].params["split"] for c in METRIC if c.startswith("table2.")} == {"test"}
    assert {METRIC[c].params["split"] for c in METRIC if c.startswith("table3.")} == {"dev"}


def _every_job(tmp_path: Path):
    plan = Plan(load_profile("paper-p100"), tmp_path)
    for name in EXPERIMENTS:
        yield from plan_jobs(name, plan)
    yield from plan_jobs("table3", Plan(load_profile("local"), tmp_path, scale="small", seeds=2))


def test_every_cluster_job_measures_exactly_what_its_claims_name(tmp_path):
    jobs = list(_every_job(tmp_path))
    assert len(jobs) > 40 and any(j.scaled for j in jobs)
    served = set()
    for job in jobs:
        spec = job.to_dict()
        assert [m["result_id"] for m in spec["measures"]] == list(job.claims), job.name
        for m in spec["measures"]:
            # a seed's record of Table 3 at a scale is measured as the row's claim
            claim = METRIC[m["claim"]]
            assert m["result_id"] == claim.id or (job.scaled and m["result_id"] ==
                                                  f"table3-small.{claim.id.split('.', 1)[1]}")
            assert (m["measure"], m["split"]) == (claim.params["measure"], claim.params.get("split")), job.name
            served.add(m["claim"])
    # every metric claim of the paper is measured by some job (the local target by the main job)
    assert sorted(set(METRIC) - served) == ["local.multi30k.bleu"]


def test_the_local_jobs_measure_what_their_claim_names():
    [bleu, ppl, step] = local.job_requests()
    assert (bleu.result_id, bleu.measure, bleu.split) == ("local.multi30k.bleu", METRIC["local.multi30k.bleu"].params[
        "measure"], METRIC["local.multi30k.bleu"].params["split"])
    assert (ppl.measure, step.measure) == ("perplexity.wordpiece", "step-time.logged-median")
    assert (parsing.REQUEST.measure, parsing.REQUEST.split) == ("f1.evalb", "test")


def _claims_file(folder: Path, params: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "m.toml"
    path.write_text(f"""[[claim]]
id = "x.bleu"
source = "test"
statement = "a metric"
kind = "metric"
scale = "cluster"
checker = "metric.result"
expected = 27.3
tolerance = {{ abs = 0.5 }}
params = {params}
""")
    return path


@pytest.mark.parametrize("params, named", [
    ('{ measure = "bleu.multi-bleu", split = "test" }', r"field 'params\.measure' must be one of"),
    ('{ measure = "step-time.run-mean", split = "test" }', r"field 'params\.measure' must be one of"),
    ('{ measure = "perplexity.wordpiece", split = "newstest" }', r"field 'params\.split' must be one of"),
    ('{ measure = "perplexity.wordpiece" }', r"lacks field 'params\.split'"),
    ('{ split = "dev" }', r"lacks field 'params\.measure'"),
])
def test_a_claim_naming_an_unknown_measurement_is_refused_at_load(tmp_path, params, named):
    _claims_file(tmp_path / "claims", params)
    with pytest.raises(ClaimFileError, match=rf"m\.toml: claim 'x\.bleu': {named}"):
        load_claims(tmp_path / "claims", checkers=CHECKERS)
    assert cli_main(["check", "--claims-dir", str(tmp_path / "claims")]) == 2


def test_a_job_claim_without_a_measurement_is_refused_naming_it(tmp_path):
    _claims_file(tmp_path / "claims", '{ preset = "base" }')
    with pytest.raises(ConfigError, match=r"m\.toml: claim 'x\.bleu': field 'params\.measure'"):
        claim_requests(["x.bleu"], claims_dir=tmp_path / "claims")
    with pytest.raises(ConfigError, match="no claim has the id 'table9.bleu'"):
        claim_requests(["table9.bleu"])
    with pytest.raises(ConfigError, match="unknown measurement 'bleu'"):
        Request.from_dict({"result_id": "r", "measure": "bleu", "split": "test"}, source="job j")


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_measurement_of_nan_is_stored_as_a_failure_never_a_pass(tmp_path, bad):
    request = claim_requests(["table2.bleu.base-ende"])[0]
    measured = Measured(bad, "BLEU (tokenized, compound splitting)", "d", "newstest2014 test", 2,
                        ci95=(bad, bad), bleu_signature="protocol:paper|x")
    record(ResultStore(tmp_path), request, measured, config={"x": 1}, scale="cluster: test")
    [stored] = ResultStore(tmp_path).read_all()
    assert stored.status == "fail" and "not a finite number" in stored.detail and stored.ci95 is None
    claim = CLAIMS["table2.bleu.base-ende"]
    assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {claim.id: stored}).status == Outcome.FAIL


def _run(tmp_path: Path, summary: dict) -> Trained:
    (tmp_path / "metrics.csv").write_text("step,elapsed_s\n1,1.0\n2,1.5\n3,2.0\n4,3.0\n")
    return Trained(None, None, None, Runtime.resolve("cpu", "fp32"), TRANSLATION, tmp_path, summary=summary)


def test_step_times_of_the_run(tmp_path):
    run_mean, logged = (Request("sec5.step-time.base", "step-time.run-mean"),
                        Request("local.multi30k.step-time", "step-time.logged-median"))
    mean = measure(_run(tmp_path, {"steps": 12, "resumed_from": 2, "elapsed_s": 5.0}), run_mean)
    assert mean.value == 0.5 and mean.provenance["peak_flops"] > 0 and mean.provenance["spread"]["intervals"] == 3
    assert mean.ci95 is None   # the logged steps' interval is not the run mean's (an H200 run lay outside it)
    # a requeued job that resumed at its last step made no update: nothing to store
    assert measure(_run(tmp_path, {"steps": 12, "resumed_from": 12, "elapsed_s": 5.0}), run_mean) is None
    median = measure(_run(tmp_path, {}), logged)
    assert median.value == 0.5 and median.ci95[0] <= 0.5 <= median.ci95[1] and median.extra["spread"]["max_s"] == 1.0


def test_the_steady_state_step_leaves_out_what_is_not_an_update(tmp_path):
    """Section 5.2's step: the median of the steady updates, inside its own interval, with start-up,
    warm-up, compilation, evaluation and checkpoint writes stored beside it by name."""
    clock = iter(range(10**6)).__next__   # whole seconds, one per reading
    timing = StepClock(lambda: float(clock()), 0.0, compiles=lambda: 0)
    for _ in range(3):                     # start-up: the clock has run before the first update
        clock()
    seconds = [30, 2, 2, 2, 9, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]   # a compile, then one slow update
    graphs = iter([0, 1] + [1] * 60)
    timing.compiles = lambda: next(graphs)
    for s in seconds:
        timing.start_update()
        for _ in range(s - 1):
            clock()
        timing.end_update()
    timing.exclude("checkpoint_s", 40.0)
    summary = timing.summary()
    assert summary["updates"] == 22 and summary["warmup_updates"] == 1 and summary["startup_s"] == 3
    assert summary["steady_updates"] == 21 and summary["steady_s_per_update"] == 2
    assert summary["checkpoint_s"] == 40 and summary["ci95_s"][0] <= 2 <= summary["ci95_s"][1]
    # the one compile fell in the warm-up: compiled once in all, none past the warm-up
    assert (summary["compiled_updates_total"], summary["compile_updates"]) == (1, 0)
    request = Request("sec5.step-time.base", "step-time.steady-state")
    found = measure(_run(tmp_path, {"steps": 22, "elapsed_s": 999.0, "step_time": summary}), request)
    assert found.value == 2 and found.ci95[0] <= found.value <= found.ci95[1]
    assert found.extra["step_time"]["checkpoint_s"] == 40 and "checkpoint 40.0 s" in found.detail
    # no steady update (a run of one update, or a resumed job that made none): nothing stored
    assert measure(_run(tmp_path, {"step_time": {"updates": 1, "steady_updates": 0}}), request) is None
    assert measure(_run(tmp_path, {"steps": 3}), request) is None


def test_seeds_are_combined_into_their_mean_with_an_interval():
    one = Measured(10.0, "u", "d", "x", 2, ci95=(9.0, 11.0), extra={"k": 1})
    assert combine_seeds({1: one}) is one
    both = combine_seeds({1: one, 2: dataclasses.replace(one, value=12.0, ci95=(11.0, 13.0))})
    assert both.value == 11.0 and both.ci95[0] < 10.0 and both.ci95[1] > 12.0
    assert both.extra["over_seeds"]["seeds"] == {"1": 10.0, "2": 12.0} and both.extra["k"] == 1


def test_a_process_that_never_loaded_dynamo_has_compiled_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    assert compile_count() == 0
