"""The paper's cluster jobs, end to end, on a one-GPU profile: train, then rank 0's evaluation, on each device.

What ``repro submit table2-base-ende --cluster <one-GPU profile>`` runs in its task (the job object
itself, :class:`repro.cluster.job.TrainingJob`, called in this process), at tiny sizes: the Table 2
base job, one Table 3 row and the Table 4 (WSJ only) parser job. On the fake accelerator the model
lives off the CPU, so a tensor built on the CPU anywhere in training or in the evaluation (beam search
for BLEU, perplexity, the parser's F1) fails as it does on a real GPU. Every claim the job serves
must be stored, measured on the device the job trained on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cluster.experiments import Plan, plan_jobs
from repro.cluster.job import TrainingJob
from repro.cluster.profiles import parse_profile
from repro.measures.claimed import claim_requests
from repro.measures.run_dev import DEV_REQUEST, measures_dev
from repro.parsing.prepare import prepare, sample_groups
from repro.results import ResultStore

TINY = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2, "tokens_per_batch": 600,
        "max_tokens_per_device": 600, "max_steps": 4, "checkpoint_every_steps": 2, "warmup_steps": 2,
        "vocab_size": 400, "max_len": 120,
        "compile": "off"}   # dynamo cannot trace the fake device; compile is tested on the CPU (tests/train/test_compiled.py)
JOBS = {
    "table2-base-ende": ({"dataset": "multi30k-en-de", "average_last": 2, "keep_checkpoints": 2},
                         {"table2.bleu.base-ende", "sec5.step-time.base"}),
    "table3": ({"dataset": "multi30k-en-de"}, {"table3.ppl.A-h1", "table3.bleu.A-h1"}),
    "table4-wsj": ({"max_len_offset": 20, "max_len": 400}, {"table4.f1.wsj-only"}),
}


def one_gpu_profile(gpus: int):
    return parse_profile({"executor": "local", "nodes": 1, "gpus_per_node": gpus, "cpus_per_task": 1, "mem_gb": 8,
                          "time_limit_min": 30, "max_tokens_per_device": 25000}, Path("one-gpu.toml"))


@pytest.fixture(scope="module")
def job_data(tmp_path_factory, tiny_multi30k, data_dir) -> Path:
    """A data directory holding a cut of Multi30k and a small prepared ``wsj-parsing`` folder."""
    root = tmp_path_factory.mktemp("job-data")
    tiny_multi30k(root / "multi30k", {"train": 120, "dev": 6, "test": 6})
    for lang, src in (("en", "en"), ("de", "de")):   # the registry's multi30k layout: test_2016_flickr.*
        (root / "multi30k" / f"val.{lang}").write_text((root / "multi30k" / f"dev.{src}").read_text())
        (root / "multi30k" / f"test_2016_flickr.{lang}").write_text((root / "multi30k" / f"test.{src}").read_text())
    groups = sample_groups(data_dir)
    prepare({"train": groups["train"][:3], "dev": groups["dev"][:1], "test": groups["test"][:1]},
            root / "wsj-parsing", "a cut of the NLTK sample (test)")
    return root


@pytest.mark.parametrize("experiment", sorted(JOBS))
def test_job_trains_and_evaluates_on_the_device(device, experiment: str, job_data: Path, tmp_path: Path,
                                                registry_calls) -> None:
    overrides, claims = JOBS[experiment]
    profile = one_gpu_profile(0 if device.name == "cpu" else 1)
    specs = plan_jobs(experiment, Plan(profile, tmp_path / "runs", data_dir=str(job_data),
                                       overrides={**TINY, **overrides}))
    spec = next(s for s in specs if experiment != "table3" or s.name == "table3-A-h1").to_dict()
    assert spec["train"]["device"] == ("cpu" if device.name == "cpu" else "cuda")
    summary = TrainingJob(spec, str(tmp_path / "results"), max_requeues=0)()
    assert summary["steps"] == 4 and summary["device"] == ("cpu" if device.name == "cpu" else "cuda:0")
    stored = {r.claim_id: r for r in ResultStore(tmp_path / "results").read_all()}
    assert claims | {f"run.{spec['name']}"} == set(stored)
    # every claim measured by the registry (repro.measures), and the run's own dev evaluation (token
    # accuracy, issue 44) where no claim measures the dev split; each model measurement on the job's device
    assert {c[0] for c in registry_calls} - {DEV_REQUEST.result_id} == claims
    assert (DEV_REQUEST.result_id in {c[0] for c in registry_calls}) == (not measures_dev(
        claim_requests(sorted(claims))))
    assert {c[2] for c in registry_calls if c[2] is not None} == {summary["device"]}
    for claim in claims:
        result = stored[claim]
        assert result.measured is not None and result.measured == result.measured  # a number, not NaN
        assert result.provenance.scale.startswith("reduced:")
        assert result.provenance.extra["device"] == summary["device"]
    if device.fake is not None:   # the evaluation ran off the CPU, with no tensor left behind on it
        assert device.fake.count("host-to-device") > 0
    json.dumps(summary)
