"""The training loop of Section 5: Adam, the schedule of Eq. 3, label smoothing, checkpoints.

One update sees about ``tokens_per_batch`` source and target tokens (Section 5.1: 25000),
whatever the number of devices: each device takes passes of its share of them
(:func:`batcher_for`: at most ``tokens_per_micro_batch`` real tokens per side, padded to at most
``max_tokens_per_device``) and accumulates them as :mod:`repro.train.update_plan` plans before the
update (:mod:`repro.train.update_step`). Where it computes (device, precision, rank) is the process's
:class:`~repro.runtime.Runtime`, resolved once from the config and the process group.

Exact resume: every checkpoint holds the model, Adam's state, the step, the RNG states and
the batcher's position, and training restarts from the newest checkpoint in ``out_dir``; an
interrupted and resumed run ends with the same parameters as an uninterrupted one (CPU).
"""

from __future__ import annotations

import random
import sys
from time import monotonic   # the default clock (a module name: the clock tests replace it here alone)
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from repro.data.batching import TokenBatcher
from repro.data.buckets import BucketBatcher
from repro.data.synthetic import SyntheticCorpus
from repro.environment import env_int
from repro.errors import CheckpointError, ConfigError
from repro.machine_memory import too_large
from repro.model import Transformer, TransformerConfig, count_parameters
from repro.model.attention import train_with_shape_free_kernels
from repro.model.precision import Precision
from repro.runtime import Runtime, resolve_device
from repro.train.allocator import grow_segments_for_varying_shapes
from repro.train.cadence import CheckpointCadence
from repro.train.checkpoint import checkpoint_path, list_checkpoints, prune_checkpoints, save_checkpoint
from repro.train.compile_cache import use_compile_cache
from repro.train.compiled import CompiledObjective, compiles
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data
from repro.train.lineage import ALLOW_FLAG, KEY as LINEAGE, run_lineage
from repro.train.loss import TranslationLoss, loss_impl_for
from repro.train.optimizer import optimizer_for
from repro.train.prefetch import Prefetcher, Sequential, WorkerPrefetcher, prefetcher
from repro.train.resume import restore
from repro.train.progress import Progress
from repro.train.run_record import write_run_record
from repro.train.step_clock import StepClock
from repro.train.stop import StopSignals
from repro.train.update_step import InFlight, TrainingDiverged, UpdateStats, accumulate, launch_update, world
from repro.train.update_plan import UpdatePlan, plan_update

__all__ = ["TrainSummary", "Trainer", "TrainingDiverged", "batcher_for", "batches_for", "build",
           "first_update_gradients", "run", "runtime_of", "train"]


class Batcher(Protocol):
    def __iter__(self): ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


#: What torch.compile lowers the objective with (tests count graph breaks and recompiles with "eager").
COMPILE_BACKEND = "inductor"

#: make_batcher(examples, max_tokens, seed, num_shards, shard) -> Batcher
BatcherFactory = Callable[[list, int, int, int, int], Batcher]


@dataclass
class TrainSummary:
    steps: int
    final_loss: float | None           # None: no update ran in this session (the run was at max_steps); never NaN
    out_dir: Path
    checkpoints: list[Path]
    tokens_per_s: float
    resumed_from: int = 0
    accumulation: int = 1
    world_size: int = 1
    elapsed_s: float = 0.0
    first_loss: float | None = None    # the loss of this process's first update (after a resume: its first)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (paths as strings), for result records and cluster jobs."""
        return {"steps": self.steps, "final_loss": self.final_loss, "out_dir": str(self.out_dir),
                "checkpoints": [str(p) for p in self.checkpoints], "tokens_per_s": self.tokens_per_s,
                "resumed_from": self.resumed_from, "accumulation": self.accumulation,
                "world_size": self.world_size, "elapsed_s": self.elapsed_s, "first_loss": self.first_loss,
                **self.extra}


def runtime_of(cfg: TrainConfig) -> Runtime:
    """This process's runtime for ``cfg``: its device and precision, and its place in the process
    group (one GPU per local rank; the cluster job has joined the group before)."""
    world_size, rank = world()
    local_rank = env_int("LOCAL_RANK", env_int("SLURM_LOCALID", rank))
    model = cfg.model_config()
    return Runtime.resolve(cfg.device, cfg.precision, world_size=world_size, rank=rank, local_rank=local_rank,
                           dims=(model.d_model, model.d_ff))


def batcher_for(cfg: TrainConfig, examples: Sequence, world_size: int, rank: int,
                make_batcher: BatcherFactory | None = None) -> Batcher:
    """The batcher of rank ``rank`` of ``world_size``: its shard of every epoch, each pass at most the
    plan's ``tokens_per_micro_batch`` real tokens per side and ``max_tokens_per_device`` padded (the
    claim ``sec5.batch-tokens.observed`` counts what these batchers give). ``make_batcher`` (tests)
    replaces TokenBatcher and gets the padded bound only."""
    plan = plan_update(cfg.tokens_per_batch, world_size, cfg.max_tokens_per_device)
    if make_batcher is not None:
        return make_batcher(examples, cfg.max_tokens_per_device, cfg.seed, world_size, rank)
    if cfg.batching == "buckets":
        return BucketBatcher(examples, cfg.max_tokens_per_device, seed=cfg.seed, num_shards=world_size, shard=rank,
                             budget=plan.tokens_per_micro_batch, step=cfg.bucket_step)
    return TokenBatcher(examples, cfg.max_tokens_per_device, shuffle=True, seed=cfg.seed, num_shards=world_size,
                        shard=rank, budget=plan.tokens_per_micro_batch)


@dataclass
class Trainer:
    """Everything one process of a run trains with, built from its config."""

    cfg: TrainConfig
    model_cfg: TransformerConfig
    model: Transformer
    objective: torch.nn.Module          # the loss the loop back-propagates (DDP-wrapped on several devices)
    optimizer: torch.optim.Optimizer
    batcher: Batcher
    runtime: Runtime
    plan: UpdatePlan
    #: the whole resolved recipe (``Recipe.to_dict()``: training, decoding, targets), written into
    #: every checkpoint so that a checkpoint decodes with its own recipe's search
    recipe: dict[str, Any] = field(default_factory=dict)

    def update(self, micro: Sequence, step: int) -> UpdateStats:
        """Update ``step`` (counted from 1) on this update's micro-batches (:mod:`repro.train.update_step`)."""
        return self.launch(micro, step).result()

    def launch(self, micro: Sequence, step: int) -> InFlight:
        """Update ``step`` launched; its figures read later where the device allows it
        (:func:`~repro.train.update_step.launch_update`: one GPU with fused Adam)."""
        return launch_update(self.objective, self.optimizer, micro, self.device, step=step,
                             d_model=self.model_cfg.d_model, warmup_steps=self.cfg.warmup_steps,
                             lr_scale=self.cfg.lr_scale, world_size=self.world_size, precision=self.precision)

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    @property
    def precision(self) -> Precision:
        return self.runtime.precision

    @property
    def world_size(self) -> int:
        return self.runtime.world_size

    @property
    def rank(self) -> int:
        return self.runtime.rank

    @property
    def accumulation(self) -> int:
        return self.plan.accumulation

    def micro_batches(self, batches: Iterable) -> list:
        """The next update's batches on this device."""
        it = iter(batches)
        return [next(it) for _ in range(self.accumulation)]


def batches_for(trainer: Trainer) -> WorkerPrefetcher | Prefetcher | Sequential:
    """The loop's source of (an update's micro-batches, the batcher's state after them): on a GPU
    the next updates' batches are drawn, collated and pinned in a worker process while this one
    computes (:func:`repro.train.prefetch.prefetcher`)."""
    if trainer.runtime.on_gpu:
        return prefetcher(trainer.batcher, trainer.accumulation)
    return Sequential(trainer.batcher, trainer.accumulation)


def build(cfg: TrainConfig, examples: Sequence[tuple[Sequence[int], Sequence[int]]], vocab_size: int,
          make_batcher: BatcherFactory | None = None, runtime: Runtime | None = None,
          recipe: dict[str, Any] | None = None) -> Trainer:
    """Seed, then build the model, the training objective, Adam and the batcher, in that order
    (the order fixes what the seeded RNG draws, so resumed and repeated runs agree), on ``runtime``
    (default: :func:`runtime_of` the config)."""
    runtime = runtime or runtime_of(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if runtime.on_gpu:
        train_with_shape_free_kernels()
        grow_segments_for_varying_shapes()
    plan = plan_update(cfg.tokens_per_batch, runtime.world_size, cfg.max_tokens_per_device)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model_cfg = cfg.model_config(vocab_size)
    model = Transformer(model_cfg).to(runtime.device)
    compiled = compiles(cfg.compile, runtime.on_gpu, cfg.max_steps)
    objective: torch.nn.Module = TranslationLoss(model, cfg.label_smoothing,
                                                 impl=loss_impl_for(runtime.device, compiled))
    if compiled:   # dynamic shapes, compiled once per run (repro.train.compiled), cached across runs
        use_compile_cache()
        objective = CompiledObjective(objective, COMPILE_BACKEND)
    if runtime.world_size > 1:
        objective = torch.nn.parallel.DistributedDataParallel(
            objective, device_ids=[runtime.device] if runtime.on_gpu else None)
    optimizer = optimizer_for(cfg, model)
    batcher = batcher_for(cfg, examples, runtime.world_size, runtime.rank, make_batcher)
    return Trainer(cfg, model_cfg, model, objective, optimizer, batcher, runtime, plan, _recipe_record(cfg, recipe))


#: Bytes per weight that training holds: the weights, their gradients and Adam's two moments, in fp32.
TRAINING_BYTES_PER_WEIGHT = 16


def _fits(cfg: TrainConfig) -> None:
    """Refuse a model whose training state does not fit this machine's free memory (the device's, on
    a GPU), before anything is prepared, probed or allocated (:mod:`repro.machine_memory`); its size
    counted from the config, with the vocabulary size the config asks for."""
    model_cfg = cfg.model_config(cfg.vocab_size)
    needed = TRAINING_BYTES_PER_WEIGHT * model_cfg.parameter_estimate()
    what = f"training a model of about {model_cfg.parameter_estimate():.3g} weights (d_model={model_cfg.d_model})"
    why = too_large(needed, what, device=resolve_device(cfg.device))
    if why is not None:
        raise ConfigError(why)


def _recipe_record(cfg: TrainConfig, recipe: dict[str, Any] | None) -> dict[str, Any]:
    """The recipe to write into checkpoints: the caller's (its training part must be ``cfg``), or
    ``cfg`` alone when the caller has no recipe (its decoding then defaults to Section 6.1's)."""
    if recipe is None:
        return {"train": cfg.to_dict()}
    if recipe.get("train") != cfg.to_dict():
        raise CheckpointError("the recipe given to the training loop does not hold its training config")
    return dict(recipe)


def train(cfg: TrainConfig, *, synthetic: SyntheticCorpus | None = None, runtime: Runtime | None = None,
          **kwargs: Any) -> TrainSummary:
    """Train on ``cfg.dataset`` (BPE built or reloaded under ``cfg.out_dir``, the corpus encoded once
    per job by rank 0; the synthetic corpus when the dataset is ``synthetic``), resuming when possible;
    rank 0 then writes the run's record (:mod:`repro.train.run_record`)."""
    began = (kwargs.get("clock") or monotonic)()
    _fits(cfg)
    runtime = runtime or runtime_of(cfg)
    data = prepare_training_data(cfg, synthetic, rank=runtime.rank, world_size=runtime.world_size)
    summary = run(cfg, data.examples, data.vocab_size, runtime=runtime, began=began, **kwargs)
    summary.extra.update(filtered=data.filtered, train_pairs=len(data.examples), vocab_size=data.vocab_size,
                         data=data.origin)
    if runtime.is_main:
        write_run_record(cfg, _recipe_record(cfg, kwargs.get("recipe")), summary.to_dict(), data)
    return summary


def run(
    cfg: TrainConfig,
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    vocab_size: int,
    *,
    make_batcher: BatcherFactory | None = None,
    runtime: Runtime | None = None,
    recipe: dict[str, Any] | None = None,
    on_step: Callable[[int], None] | None = None,
    on_built: Callable[[Trainer], None] | None = None,
    log: Callable[[str], None] | None = None,
    clock: Callable[[], float] | None = None,
    evaluate: Callable[[torch.nn.Module, int], dict[str, float]] | None = None,
    began: float | None = None,
    allow_no_lineage: bool = False,
    stop: StopSignals | None = None,
) -> TrainSummary:
    """The loop itself, on already encoded ``examples``; ``on_step(step)`` is called after each update,
    ``on_built(trainer)`` once the trainer is built (and restored, when resuming). ``recipe``
    (``Recipe.to_dict()`` of the recipe ``cfg`` comes from) goes into every checkpoint.
    ``evaluate(model, step)`` (rank 0, at every checkpoint) returns dev metrics such as ``{"dev_ppl": ...}``
    for the metrics log; its time counts neither in tokens/s nor in the logged elapsed time.
    ``began`` (on ``clock``): when the job's training began, data preparation included (default: now);
    the summary's ``step_time`` splits the wall time since then (:mod:`repro.train.step_clock`).
    ``allow_no_lineage``: resume from a checkpoint without a readable lineage (:mod:`repro.train.lineage`);
    the checkpoints after it record ``lineage.unchecked_from``. ``stop`` (:mod:`repro.train.stop`, one
    process only): once it is requested, the update in flight is checkpointed and the loop returns, its
    summary's ``stopped_by`` naming the signal."""
    say = log or (lambda msg: print(msg, file=sys.stderr))
    clock = clock or monotonic
    timing = StepClock(clock, clock() if began is None else began)
    out_dir = Path(cfg.out_dir)
    trainer = build(cfg, examples, vocab_size, make_batcher, runtime, recipe)
    say(f"repro train: {trainer.plan.describe()}")
    say(f"repro train: {trainer.runtime.describe()}")
    step, unchecked = 0, {}
    existing = list_checkpoints(out_dir)
    if existing:
        step, unchecked = restore(existing[-1], trainer, allow_no_lineage)
        say(f"repro train: resumed from {existing[-1]} (step {step})")
    if on_built is not None:
        on_built(trainer)
    resumed_from = step
    progress = Progress(cfg, out_dir, step, trainer.rank, clock, say)
    cadence = CheckpointCadence(cfg.checkpoint_every_steps, cfg.checkpoint_every_minutes, cfg.max_steps, clock)
    trainer.model.train()
    batches = batches_for(trainer)
    written: list[Path] = []
    start = clock()
    waiting: tuple[InFlight, dict[str, Any]] | None = None   # an update launched, its figures not yet read

    def diverged(err: TrainingDiverged) -> TrainingDiverged:
        return TrainingDiverged(f"{err}; the last checkpoint is {(list_checkpoints(out_dir) or ['none'])[-1]}")

    def read(launched: InFlight) -> UpdateStats:
        try:
            return launched.result()
        except TrainingDiverged as err:
            raise diverged(err) from None

    if trainer.world_size > 1:
        stop = None   # a process group's ranks would have to agree on the step: a signal stops at once
    stopped_by: str | None = None

    def settle(stats: UpdateStats, data_state: dict[str, Any], due: bool, evaluating: bool = True) -> None:
        """Log update ``stats.step``; at a due step, evaluate (unless stopping) and checkpoint."""
        progress.record(stats, _evaluate(evaluate, trainer, progress, timing, stats.step)
                        if due and evaluating and evaluate is not None else None, data_state.get("epoch", ""))
        if due:
            saving = clock()
            written.append(_save(out_dir, stats.step, trainer, data_state, unchecked))
            prune_checkpoints(out_dir, cfg.keep_checkpoints)
            timing.exclude("checkpoint_s", clock() - saving)
            cadence.written()

    if stop is not None:
        stop.install()   # its handlers only while updates run
    try:
        while step < cfg.max_steps:
            step += 1
            timing.start_update()
            micro, data_state = next(batches)
            try:
                launched = trainer.launch(micro, step)
            except TrainingDiverged as err:
                raise diverged(err) from None
            # the previous update's figures, read once this one is launched (one GPU, fused Adam)
            earlier = (read(waiting[0]), waiting[1]) if waiting is not None else None
            timing.end_update()
            due = cadence.due(step) and trainer.rank == 0
            stopping = stop is not None and stop.requested and step < cfg.max_steps
            due = due or stopping   # a stop checkpoints the update in flight (one process: rank 0)
            if launched.deferred and not due and step < cfg.max_steps:
                waiting, current = (launched, data_state), None
            else:   # a checkpoint holds an update whose figures were read, before the next one is launched
                waiting, current = None, read(launched)
            if earlier is not None:
                settle(*earlier, due=False)
            if current is not None:
                settle(current, data_state, due, evaluating=not stopping)
            if on_step is not None:
                on_step(step)
            if stopping:
                stopped_by = stop.signal
                say(f"repro train: stopped by {stopped_by} after update {step}, checkpointed in {written[-1]}; "
                    "the same command resumes from it")
                break
    finally:
        if stop is not None:
            stop.restore()
        batches.close()
        progress.close()
    elapsed = clock() - start
    return TrainSummary(
        steps=step, final_loss=progress.last_loss, out_dir=out_dir,
        checkpoints=[p for p in written if p.exists()],
        tokens_per_s=progress.run_tokens / max(progress.training_seconds(), 1e-9),  # dev evaluations left out
        resumed_from=resumed_from, accumulation=trainer.accumulation, world_size=trainer.world_size,
        elapsed_s=elapsed, first_loss=progress.first_loss,
        extra={**trainer.precision.provenance(), "device": str(trainer.device),
               "steps_run": step - resumed_from, "step_time": timing.summary(),
               "parameters": count_parameters(trainer.model), "update_plan": trainer.plan.to_dict(),
               **({"stopped_by": stopped_by} if stopped_by else {}),
               **({"lineage": f"resumed from {unchecked['unchecked_from']} without a readable lineage "
                              f"({ALLOW_FLAG})"} if unchecked else {})},
    )


def _evaluate(evaluate: Callable[[torch.nn.Module, int], dict[str, float]], trainer: Trainer,
              progress: Progress, timing: StepClock, step: int) -> dict[str, float]:
    start = progress.clock()
    metrics = evaluate(trainer.model, step)
    trainer.model.train()
    progress.exclude(progress.clock() - start)
    timing.exclude("evaluation_s", progress.clock() - start)
    return metrics


def first_update_gradients(cfg: TrainConfig, examples: Sequence[tuple[Sequence[int], Sequence[int]]],
                           vocab_size: int) -> dict[str, Any]:
    """The gradients of a fresh model's first update, computed exactly as :func:`run` computes
    them, in the current process group (DDP over its ranks, if any). With any number of devices
    and passes they must equal one process's gradients on the same update (the cluster checks it)."""
    trainer = build(cfg, examples, vocab_size)
    trainer.model.train()
    loss_sum, _, _, tgt_tokens = accumulate(trainer.objective, trainer.micro_batches(trainer.batcher),
                                            trainer.device, step=1, world_size=trainer.world_size,
                                            precision=trainer.precision)
    grads = {n: p.grad.detach().cpu().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return {"rank": trainer.rank, "world_size": trainer.world_size, "accumulation": trainer.accumulation,
            "loss": loss_sum / max(tgt_tokens, 1), "grads": grads}


def _save(out_dir: Path, step: int, trainer: Trainer, data_state: dict[str, Any],
          unchecked: dict[str, str]) -> Path:
    """The checkpoint after update ``step``; ``data_state`` is the batcher's position after the
    batches that update consumed (the prefetcher may have read further); ``unchecked``: the
    ``unchecked_from`` of a run resumed without a readable lineage, kept in every later lineage."""
    return save_checkpoint(checkpoint_path(out_dir, step), {
        "step": step,
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "model_config": trainer.model_cfg.to_dict(),
        "train_config": trainer.cfg.to_dict(),
        "recipe": trainer.recipe,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        "data": data_state,
        LINEAGE: {**run_lineage(out_dir), **unchecked},
    }, within=out_dir)
