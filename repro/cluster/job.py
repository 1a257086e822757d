"""The SLURM job that trains one configuration: checkpointable, requeued a bounded number of times.

submitit runs :class:`TrainingJob` on every task of the allocation (a torchrun-style launcher
may run it too). Each task finds its place in the job (:mod:`repro.cluster.rendezvous`),
resolves its :class:`~repro.runtime.Runtime` (the GPU of its local rank, or the one SLURM bound
to it), joins ``torch.distributed`` (NCCL on GPUs, gloo on CPUs), checks and logs the
update-size invariant of Section 5.1 (:mod:`repro.train.update_plan`) and trains with repro.train's
loop; rank 0 prepares the data while the others wait (:mod:`repro.train.data`). On preemption or at the time limit SLURM sends
USR2; submitit calls :meth:`TrainingJob.checkpoint`, which hands back a copy of the job with
its requeue count raised, and the job is requeued; the copy resumes from the newest checkpoint
in its ``out_dir``. After ``max_requeues`` requeues it refuses, and the job ends as failed. Rank 0
holds the ``out_dir``'s lock (:mod:`repro.run_lock`) while it trains: a second job into the same
folder is refused.
When training ends, rank 0 writes the run's record to the results store, and every rank takes
its share of measuring the claims the job serves (:mod:`repro.cluster.job_evaluation`: the test set's
decoding is split over the ranks; rank 0 scores and writes).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from contextlib import nullcontext
from typing import Any

import submitit
import torch

from repro.argtypes import OneLineParser, non_negative_int
from repro.files import reader
from repro.cluster import rendezvous
from repro.cluster.job_evaluation import evaluate_claims
from repro.cluster.experiments import check_parser_data, finished
from repro.data.synthetic import SYNTHETIC, SyntheticCorpus
from repro.environment import env_int
from repro.errors import ConfigError
from repro.results import Result, ResultStore, collect_provenance
from repro.run_lock import run_dir_lock
from repro.runtime import Runtime
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data
from repro.train.loop import first_update_gradients, train
from repro.train.update_plan import plan_update

log = logging.getLogger("repro.cluster.job")


def start_task(train_config: dict[str, Any]) -> Runtime:
    """This task's runtime for the job's config, after joining the job's process group (if several tasks)."""
    place = rendezvous.find_place()
    model = TrainConfig.from_dict(train_config).model_config()
    runtime = Runtime.resolve(str(train_config.get("device", "auto")), str(train_config.get("precision", "auto")),
                              world_size=place.world_size, rank=place.rank, local_rank=place.local_rank,
                              dims=(model.d_model, model.d_ff))
    rendezvous.join(place, runtime.device)
    log.info("task: %s (%s)", runtime.describe(), place.source)
    return runtime


def init_distributed() -> tuple[int, int]:
    """Join the job's process group; (rank, world). Kept for callers of older repro: use :func:`start_task`."""
    place = rendezvous.find_place()
    rendezvous.join(place, torch.device("cpu") if not torch.cuda.is_available() else torch.device("cuda"))
    return place.rank, place.world_size


def _job_id() -> str:
    try:
        return str(submitit.JobEnvironment().job_id)
    except RuntimeError:
        return os.environ.get("SLURM_JOB_ID", "local")


def synthetic_corpus(synthetic: dict[str, Any] | None) -> SyntheticCorpus | None:
    """The smoke job's corpus from its spec's ``synthetic`` settings."""
    if synthetic is None:
        return None
    return SyntheticCorpus(int(synthetic.get("sentences", SyntheticCorpus.sentences)),
                           int(synthetic.get("length", SyntheticCorpus.length)))


def _train(spec: dict[str, Any], runtime: Runtime | None = None) -> dict[str, Any]:
    """Run the training the spec describes with repro.train's loop; returns the summary as a dict."""
    config = TrainConfig.from_dict(spec["train"], source=f"job {spec['name']}")
    check_parser_data(spec)
    hooks = _SmokeHooks(spec.get("synthetic") or {}, runtime.rank if runtime is not None else 0)
    recipe = {"name": spec.get("recipe") or spec["name"], "source": f"job {spec['name']} of {spec.get('experiment')}",
              "train": config.to_dict(), "decode": dict(spec.get("decode") or {}),
              "targets": spec.get("targets") or "symbols"}
    summary = train(config, synthetic=synthetic_corpus(spec.get("synthetic")), runtime=runtime, recipe=recipe,
                    on_step=hooks.on_step, on_built=hooks.on_built)
    return json.loads(json.dumps(summary.to_dict(), default=str))  # paths as strings: JSON for the results store


class _SmokeHooks:
    """The smoke job's test hooks (:data:`repro.cluster.experiments.SMOKE_SYNTHETIC`): a pause after
    every update, and a non-finite loss on one rank at one update (its weights made NaN the update before)."""

    def __init__(self, synthetic: dict[str, Any], rank: int) -> None:
        self.pause = float(synthetic.get("step_sleep_s", 0.0))
        nan_at = synthetic.get("nan_at") or {}
        self.nan_step = int(nan_at["step"]) if nan_at and int(nan_at.get("rank", 0)) == rank else None
        self.trainer = None

    def on_built(self, trainer) -> None:
        self.trainer = trainer
        if self.nan_step == 1:
            self._poison()

    def on_step(self, step: int) -> None:
        if self.pause:
            time.sleep(self.pause)
        if self.nan_step is not None and step == self.nan_step - 1:
            self._poison()

    def _poison(self) -> None:
        with torch.no_grad():
            next(self.trainer.model.parameters()).fill_(float("nan"))


def gradient_probe(train_config: dict[str, Any], synthetic: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job whose every task returns the first update's gradients, computed as training computes them.

    Submitted with several tasks, it checks on the cluster itself that DDP over the job's
    process group gives the gradients of one process on the same update.
    """
    torch.set_num_threads(env_int("SLURM_CPUS_PER_TASK", 1, minimum=1))
    runtime = start_task(train_config)
    try:
        cfg = TrainConfig.from_dict(train_config)
        data = prepare_training_data(cfg, synthetic_corpus(synthetic), rank=runtime.rank, world_size=runtime.world_size)
        return first_update_gradients(cfg, data.examples, data.vocab_size)
    finally:
        rendezvous.leave()


class TrainingJob(submitit.helpers.Checkpointable):
    """One training configuration as a requeueable submitit job."""

    def __init__(self, spec: dict[str, Any], results_dir: str | None, max_requeues: int, requeues: int = 0) -> None:
        self.spec = spec
        self.results_dir = results_dir
        self.max_requeues = max_requeues
        self.requeues = requeues

    def __call__(self) -> dict[str, Any]:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        threads = env_int("SLURM_CPUS_PER_TASK", minimum=1)
        if threads:
            torch.set_num_threads(threads)
        runtime = start_task(self.spec["train"])
        rank, world = runtime.rank, runtime.world_size
        try:
            train = self.spec["train"]
            plan = plan_update(int(train["tokens_per_batch"]), world, int(train["max_tokens_per_device"]))
            log.info("job %s (requeue %d of at most %d): %s", self.spec["name"], self.requeues,
                     self.max_requeues, plan.describe())
            # rank 0 holds the run directory for the whole job: a second job into it is refused
            with run_dir_lock(train.get("out_dir") or TrainConfig().out_dir, f"run directory of job {self.spec['name']}") if rank == 0 \
                    else nullcontext():
                summary = _train(self.spec, runtime)
            if (summary.get("world_size"), summary.get("accumulation")) != (world, plan.accumulation):
                raise ConfigError(
                    f"job {self.spec['name']}: training ran {summary.get('world_size')} process(es) x "
                    f"{summary.get('accumulation')} pass(es), but the update-size invariant needs "
                    f"{world} x {plan.accumulation}"
                )
            summary.update(requeues=self.requeues, rank=rank, update_plan=plan.to_dict())
            if rank == 0 and self.results_dir:
                summary["result_path"] = str(self._write_result(summary, world))
            if self.results_dir and self.spec["train"].get("dataset") != SYNTHETIC:
                # every rank decodes its share of the test set; rank 0 scores and writes
                paths = evaluate_claims(self.spec, summary, world, self.results_dir, runtime=runtime)
                if rank == 0:
                    summary["claim_results"] = [str(p) for p in paths]
            return summary
        finally:
            rendezvous.leave()

    def _write_result(self, summary: dict[str, Any], world: int) -> object:
        """The run's record: claim id ``run.<job name>``, measured = final training loss."""
        train = self.spec["train"]
        scale = (f"{self.spec.get('profile', '?')}: {world} process(es), {summary.get('steps')} steps, "
                 f"{summary['update_plan']['tokens_per_update']} tokens per update")
        provenance = collect_provenance(config=train, dataset=str(train.get("dataset")), scale=scale,
                                        job_id=_job_id(), requeues=self.requeues, device=summary.get("device"),
                                        precision=summary.get("precision"),
                                        precision_reason=summary.get("precision_reason"))
        result = Result(
            claim_id=f"run.{self.spec['name']}", measured=summary.get("final_loss"), provenance=provenance,
            unit="loss (nats/token)",
            detail=f"training run of experiment {self.spec['experiment']} for claims "
                   f"{', '.join(self.spec.get('claims', [])) or 'none'}",
            extra={k: v for k, v in summary.items() if k != "losses"}
            | ({"scaled": dict(self.spec["scaled"])} if self.spec.get("scaled") else {}),
        )
        # a job of Table 3 at a scale owns one record per seed, replaced in place when it runs again
        return ResultStore(self.results_dir).write(result, (self.spec.get("scaled") or {}).get("record"))

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Called by submitit on USR2: requeue a copy unless the bound is reached (then the job fails)."""
        if self.requeues >= self.max_requeues:
            log.warning("job %s: requeue limit %d reached; not requeueing", self.spec["name"], self.max_requeues)
            return None
        log.info("job %s: requeue %d of at most %d; it resumes from its newest checkpoint",
                 self.spec["name"], self.requeues + 1, self.max_requeues)
        return submitit.helpers.DelayedSubmission(
            TrainingJob(self.spec, self.results_dir, self.max_requeues, self.requeues + 1), *args, **kwargs)


class JobSequence(submitit.helpers.Checkpointable):
    """Several training jobs run one after another in one process: how one machine (one GPU, or the
    CPU) runs an array with submitit's local executor, instead of every job at once. A job whose
    results are stored (:func:`repro.cluster.experiments.finished`) is skipped, so a requeued
    sequence resumes where it stopped; a job that fails does not stop the others, and the sequence
    fails at the end, naming each job that failed."""

    def __init__(self, jobs: list[TrainingJob], max_requeues: int = 0, requeues: int = 0) -> None:
        self.jobs = jobs
        self.max_requeues = max_requeues
        self.requeues = requeues

    def __call__(self) -> list[dict[str, Any]]:
        summaries, failed = [], []
        for job in self.jobs:
            if finished(job.spec, job.results_dir):
                log.info("job %s: its results are stored; not trained again", job.spec["name"])
                summaries.append({"name": job.spec["name"], "skipped": "finished"})
                continue
            try:
                summaries.append({"name": job.spec["name"], **job()})
            except Exception as err:  # noqa: BLE001 - the next job runs; the sequence fails at the end
                log.exception("job %s failed", job.spec["name"])
                failed.append(f"{job.spec['name']}: {type(err).__name__}: {err}")
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(self.jobs)} job(s) failed: " + "; ".join(failed))
        return summaries

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Requeued as a whole, a bounded number of times: the finished jobs are skipped, the one that was
        running resumes from its newest checkpoint."""
        if self.requeues >= self.max_requeues:
            log.warning("job sequence: requeue limit %d reached; not requeueing", self.max_requeues)
            return None
        return submitit.helpers.DelayedSubmission(JobSequence(self.jobs, self.max_requeues, self.requeues + 1),
                                                  *args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    """``python -m repro.cluster.job SPEC.json [--results DIR]``: run one job spec (as ``repro submit
    --dry-run --json`` plans it) in this process, e.g. under ``torchrun --nproc_per_node N`` or an
    ``srun`` of the user's own; every process trains, rank 0 evaluates and stores the results."""
    parser = OneLineParser(prog="python -m repro.cluster.job", description=main.__doc__.split("\n")[0])
    parser.add_argument("spec", help="a job spec JSON file: one job of `repro submit ... --dry-run --json`, or "
                                     "JobSpec.to_dict()")
    parser.add_argument("--results", help="results store the job writes its records to (rank 0)")
    parser.add_argument("--requeues", type=non_negative_int, default=0, help="requeues allowed (bookkeeping only here)")
    args = parser.parse_args(argv)
    try:
        spec = reader.read_json(args.spec, "job spec", error=ConfigError)  # strict: a key twice, NaN refused
    except ConfigError as err:
        print(f"repro: error: {err}", file=sys.stderr)
        return 2
    if "train" not in spec and "config" in spec:   # a job of the dry run's JSON
        spec = {**spec, "train": {k: v for k, v in spec["config"].items() if k != "synthetic"},
                "synthetic": spec["config"].get("synthetic"), "preset": spec["config"]["preset"],
                "experiment": spec.get("experiment", spec["name"]), "profile": spec.get("profile", "launcher")}
    summary = TrainingJob(spec, args.results, args.requeues)()
    print(json.dumps({k: summary[k] for k in ("rank", "steps", "world_size", "accumulation", "final_loss")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
