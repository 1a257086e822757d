"""The SLURM job that trains one configuration: checkpointable, requeued a bounded number of times.

submitit runs :class:`TrainingJob` on every task of the allocation. Each task joins
``torch.distributed`` (NCCL on GPUs, gloo on CPUs) through submitit's
``TorchDistributedEnvironment``, checks and logs the update-size invariant of Section 5.1
(:mod:`repro.train.update`) and trains with repro.train's loop. On preemption or at the time limit SLURM sends
USR2; submitit calls :meth:`TrainingJob.checkpoint`, which hands back a copy of the job with
its requeue count raised, and the job is requeued; the copy resumes from the newest checkpoint
in its ``out_dir``. After ``max_requeues`` requeues it refuses, and the job ends as failed.
When training ends, rank 0 writes the run's record to the results store and measures the
claims the job serves (:mod:`repro.cluster.evaluate`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import timedelta
from typing import Any

import submitit
import torch
import torch.distributed as dist

from repro.cluster.evaluate import evaluate_claims
from repro.cluster.experiments import check_parser_data
from repro.data.synthetic import SYNTHETIC, SyntheticCorpus
from repro.errors import ConfigError
from repro.results import Result, ResultStore, collect_provenance
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data
from repro.train.loop import first_update_gradients, train
from repro.train.update import plan_update

log = logging.getLogger("repro.cluster.job")


def init_distributed() -> tuple[int, int]:
    """Join the job's process group when submitit started more than one task; (rank, world)."""
    env = submitit.JobEnvironment()
    if env.num_tasks <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist_env = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=True)
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend, timeout=timedelta(minutes=10))
        log.info("torch.distributed: rank %d of %d, backend %s, master %s:%d",
                 dist_env.rank, dist_env.world_size, backend, dist_env.master_addr, dist_env.master_port)
    return dist.get_rank(), dist.get_world_size()


def synthetic_corpus(synthetic: dict[str, Any] | None) -> SyntheticCorpus | None:
    """The smoke job's corpus from its spec's ``synthetic`` settings."""
    if synthetic is None:
        return None
    return SyntheticCorpus(int(synthetic.get("sentences", SyntheticCorpus.sentences)),
                           int(synthetic.get("length", SyntheticCorpus.length)))


def _train(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the training the spec describes with repro.train's loop; returns the summary as a dict."""
    config = TrainConfig.from_dict(spec["train"], source=f"job {spec['name']}")
    check_parser_data(spec)
    pause = float((spec.get("synthetic") or {}).get("step_sleep_s", 0.0))
    summary = train(config, synthetic=synthetic_corpus(spec.get("synthetic")),
                    on_step=(lambda _step: time.sleep(pause)) if pause else None)
    return json.loads(json.dumps(summary.to_dict(), default=str))  # paths as strings: JSON for the results store


def gradient_probe(train_config: dict[str, Any], synthetic: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job whose every task returns the first update's gradients, computed as training computes them.

    Submitted with several tasks, it checks on the cluster itself that DDP over the job's
    process group gives the gradients of one process on the same update.
    """
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    init_distributed()
    try:
        cfg = TrainConfig.from_dict(train_config)
        data = prepare_training_data(cfg, synthetic_corpus(synthetic))
        return first_update_gradients(cfg, data.examples, data.vocab_size)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


class TrainingJob(submitit.helpers.Checkpointable):
    """One training configuration as a requeueable submitit job."""

    def __init__(self, spec: dict[str, Any], results_dir: str | None, max_requeues: int, requeues: int = 0) -> None:
        self.spec = spec
        self.results_dir = results_dir
        self.max_requeues = max_requeues
        self.requeues = requeues

    def __call__(self) -> dict[str, Any]:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        threads = os.environ.get("SLURM_CPUS_PER_TASK")
        if threads:
            torch.set_num_threads(int(threads))
        rank, world = init_distributed()
        try:
            train = self.spec["train"]
            plan = plan_update(int(train["tokens_per_batch"]), world, int(train["max_tokens_per_device"]))
            log.info("job %s (requeue %d of at most %d): %s", self.spec["name"], self.requeues,
                     self.max_requeues, plan.describe())
            summary = _train(self.spec)
            if (summary.get("world_size"), summary.get("accumulation")) != (world, plan.accumulation):
                raise ConfigError(
                    f"job {self.spec['name']}: training ran {summary.get('world_size')} process(es) x "
                    f"{summary.get('accumulation')} pass(es), but the update-size invariant needs "
                    f"{world} x {plan.accumulation}"
                )
            summary.update(requeues=self.requeues, rank=rank, update_plan=plan.to_dict())
            if rank == 0 and self.results_dir:
                summary["result_path"] = str(self._write_result(summary, world))
                if self.spec["train"].get("dataset") != SYNTHETIC:
                    paths = evaluate_claims(self.spec, summary, world, self.results_dir)
                    summary["claim_results"] = [str(p) for p in paths]
            return summary
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    def _write_result(self, summary: dict[str, Any], world: int) -> object:
        """The run's record: claim id ``run.<job name>``, measured = final training loss."""
        train = self.spec["train"]
        env = submitit.JobEnvironment()
        scale = (f"{self.spec.get('profile', '?')}: {world} process(es), {summary.get('steps')} steps, "
                 f"{summary['update_plan']['tokens_per_update']} tokens per update")
        provenance = collect_provenance(config=train, dataset=str(train.get("dataset")), scale=scale,
                                        job_id=env.job_id, requeues=self.requeues,
                                        precision=summary.get("precision"),
                                        precision_reason=summary.get("precision_reason"))
        result = Result(
            claim_id=f"run.{self.spec['name']}", measured=summary.get("final_loss"), provenance=provenance,
            unit="loss (nats/token)",
            detail=f"training run of experiment {self.spec['experiment']} for claims "
                   f"{', '.join(self.spec.get('claims', [])) or 'none'}",
            extra={k: v for k, v in summary.items() if k != "losses"},
        )
        return ResultStore(self.results_dir).write(result)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """Called by submitit on USR2: requeue a copy unless the bound is reached (then the job fails)."""
        if self.requeues >= self.max_requeues:
            log.warning("job %s: requeue limit %d reached; not requeueing", self.spec["name"], self.max_requeues)
            return None
        log.info("job %s: requeue %d of at most %d; it resumes from its newest checkpoint",
                 self.spec["name"], self.requeues + 1, self.max_requeues)
        return submitit.helpers.DelayedSubmission(
            TrainingJob(self.spec, self.results_dir, self.max_requeues, self.requeues + 1), *args, **kwargs)
