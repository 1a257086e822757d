"""The training loop in a real two-process group (gloo, on the CPU), watched from inside each rank.

What a data-parallel job does that one process cannot show: which passes of an accumulated update
synchronise gradients (a DDP communication hook records the pass it runs in), the gradient each
rank hands Adam and the rate Adam steps at, the stop on a non-finite loss raised on one rank only, which rank writes the
checkpoints of a short run, the examples each rank trains on after a job is stopped and resumed, the
order in which a sharded evaluation (:func:`repro.eval.sharding.map_sharded`) puts the ranks' outputs back,
and the perplexity an evaluation split over the ranks reports. :func:`observe_group`
spawns the two ranks and returns what each saw; the claims compare it with one process's sums.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from repro import tensor_json
from repro.data.batching import collate
from repro.data.corpora import Dataset
from repro.data.vocab import SharedVocab
from repro.eval.translation import evaluate_perplexity
from repro.files.writer import atomic_write_text, make_dirs
from repro.eval.sharding import map_sharded
from repro.model.precision import Precision
from repro.runtime import Runtime
from repro.train.checkpoint import list_checkpoints, step_of
from repro.train.config import TrainConfig
from repro.train import loop
from repro.train.loop import batches_for, build, run
from repro.train.update_step import TrainingDiverged

WORLD = 2
#: A group that has not finished by then is stuck (it takes seconds): the probe says so rather than hang.
RANKS_TIMEOUT_S = 300.0
#: Items a sharded evaluation maps (an odd count: the ranks take unequal shares).
SHARD_ITEMS = 11
#: The job the resume probe runs: updates in all, and the update after which it is stopped and resumed.
RESUME_UPDATES, RESUME_STOP = 5, 2


def step_rates(optimizer: torch.optim.Optimizer) -> list[float]:
    """The rate of each parameter group, as the optimizer is about to step with it."""
    return [float(group["lr"]) for group in optimizer.param_groups]


def _grads(trainer) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().double().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


class _Recorded:
    """The loop's source of updates, each update's examples (the batches' ``indices``) written down."""

    def __init__(self, source: Any, drawn: list[list[list[int]]]) -> None:
        self.source, self.drawn = source, drawn

    def __iter__(self) -> "_Recorded":
        return self

    def __next__(self) -> tuple[list, dict[str, Any]]:
        micro, state = next(self.source)
        self.drawn.append([list(map(int, b.indices)) for b in micro])
        return micro, state

    def close(self) -> None:
        self.source.close()


def _resumed_batches(folder: Path, cfg: TrainConfig, vocab: int, examples: list, runtime: Runtime) -> dict[str, Any]:
    """The examples of each update this rank trains on in a job of RESUME_UPDATES updates run at once,
    and in the same job stopped after RESUME_STOP and resumed (both ranks in one shared run directory,
    as a requeued cluster job; rank 0 writes the checkpoints), each pass a few examples of an epoch of
    several passes per shard."""
    small = cfg.replace(tokens_per_batch=24, max_tokens_per_device=24, checkpoint_every_steps=1,
                        checkpoint_every_minutes=0.0, keep_checkpoints=RESUME_UPDATES + 1, log_every=10**6)
    drawn: dict[str, list] = {"once": [], "resumed": []}
    for name, legs in (("once", [RESUME_UPDATES]), ("resumed", [RESUME_STOP, RESUME_UPDATES])):
        for steps in legs:
            ticks = [0]
            with mock.patch.object(loop, "batches_for", lambda t, name=name: _Recorded(batches_for(t), drawn[name])):
                run(small.replace(out_dir=str(folder / f"resume-{name}"), max_steps=steps), examples, vocab,
                    runtime=runtime, log=lambda _: None, clock=lambda: ticks[0],
                    on_step=lambda s, ticks=ticks: ticks.__setitem__(0, s))
            dist.barrier()   # rank 0's checkpoint of the first leg is written before either rank resumes
    return {"batches_once": drawn["once"], "batches_resumed": drawn["resumed"]}


#: The dev split the sharded perplexity is measured on (an odd count: the ranks take unequal shares).
PERPLEXITY_LINES = [("a b c d", "w x y"), ("b c", "x y z w"), ("c d a", "y"), ("d a b c d", "z w x y z"),
                    ("a c", "w w x"), ("b d b", "x z"), ("c a d b", "y x w z y")]


def sharded_perplexity(folder: Path, cfg: TrainConfig, runtime: Runtime | None) -> list[float]:
    """The evaluation's perplexity (:func:`repro.eval.translation.evaluate_perplexity`, with the sentences
    its interval resamples) of ``cfg``'s freshly built small model on :data:`PERPLEXITY_LINES`, split over
    ``runtime``'s ranks (one process without one): [ppl, summed NLL, wordpieces, sentences, their NLL's sum,
    their wordpieces' sum]."""
    src, tgt = make_dirs(folder) / "dev.src", folder / "dev.tgt"
    for path, side in ((src, 0), (tgt, 1)):
        atomic_write_text(path, "".join(pair[side] + "\n" for pair in PERPLEXITY_LINES), within=folder.parent)
    vocab = SharedVocab.train([t for pair in PERPLEXITY_LINES for t in pair], 16, split="word-level")
    model = build(cfg, [([5, 6], [7, 8])], len(vocab), runtime=runtime).model
    dataset = Dataset("perplexity-probe", {"dev": (src, tgt)}, "en", "de")
    result = evaluate_perplexity(model, vocab, dataset, "dev", runtime=runtime, per_sentence=True)
    sentences = result.sentences or []
    return [result.ppl, result.nll, float(result.tokens), float(len(sentences)), sum(n for n, _ in sentences),
            float(sum(t for _, t in sentences))]


def _rank(rank: int, folder: str, cfg: TrainConfig, vocab: int, passes: list[list[list]],
          examples: list) -> None:
    torch.set_num_threads(1)
    # a rendezvous file in the probe's own folder: no port to race for with another check running beside
    # (the selftest runs the device's check and the CPU's at once)
    dist.init_process_group("gloo", init_method=f"file://{Path(folder) / 'rendezvous'}", rank=rank, world_size=WORLD)
    try:
        runtime = Runtime(torch.device("cpu"), Precision("fp32", "the probe's", "cpu"), WORLD, rank, rank)
        seen: dict[str, Any] = {"rank": rank}
        trainer = build(cfg, [([5, 6], [7, 8])], vocab, runtime=runtime)
        trainer.model.eval()
        inner = trainer.objective.module if hasattr(trainer.objective, "module") else trainer.objective
        calls, synced = [0], []
        inner.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        if hasattr(trainer.objective, "register_comm_hook"):
            trainer.objective.register_comm_hook(None, lambda state, bucket: (synced.append(calls[0]),
                                                                               allreduce_hook(state, bucket))[1])
        stepped: list[dict[str, torch.Tensor]] = []
        rates: list[list[float]] = []
        trainer.optimizer.register_step_pre_hook(lambda *_: stepped.append(_grads(trainer)))
        trainer.optimizer.register_step_pre_hook(lambda opt, *_: rates.append(step_rates(opt)))
        micro = [collate(p) for p in passes[rank]]
        stats = trainer.update(micro, 1)
        seen.update(grads=stepped[0] if stepped else {}, rates=rates[0] if rates else [],
                    synced=sorted(set(synced)), passes=len(micro),
                    stats=[stats.loss_per_token, stats.src_tokens, stats.tgt_tokens])
        # a loss that is not finite on rank 1 only, in its second pass: every rank must stop, no step taken
        for kind in ("inf", "nan"):
            before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
            state = {"pass": 0}

            def poison(module, args, out, kind=kind, state=state):
                state["pass"] += 1
                if rank == 1 and state["pass"] == 2:
                    return (out[0] * float(kind),) + tuple(out[1:])
                return out

            handle = inner.register_forward_hook(poison)
            try:
                trainer.update(micro, 2)
                seen[f"stopped_{kind}"] = False
            except TrainingDiverged:
                seen[f"stopped_{kind}"] = True
            finally:
                handle.remove()
            seen[f"moved_{kind}"] = any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
            with torch.no_grad():   # the next probe starts from the same weights
                for n, p in trainer.model.named_parameters():
                    p.copy_(before[n])
        seen["shards"] = map_sharded(lambda items: [f"{rank}:{x}" for x in items], list(range(SHARD_ITEMS)), runtime)
        out_dir = Path(folder) / f"run-rank{rank}"
        ticks = [0]
        run(cfg.replace(out_dir=str(out_dir), max_steps=2, checkpoint_every_steps=1, checkpoint_every_minutes=0.0,
                        log_every=10**6), examples, vocab, runtime=runtime, log=lambda _: None,
            clock=lambda: ticks[0], on_step=lambda s: ticks.__setitem__(0, s))
        seen["checkpoints"] = [step_of(p) for p in list_checkpoints(out_dir)]
        seen.update(_resumed_batches(Path(folder), cfg, vocab, examples, runtime))
        seen["perplexity"] = sharded_perplexity(Path(folder) / f"perplexity-rank{rank}", cfg, runtime)
        tensor_json.write(Path(folder) / f"rank{rank}.json", seen)
    finally:
        dist.destroy_process_group()


def observe_group(cfg: TrainConfig, vocab: int, passes: list[list[list]], examples: list) -> list[dict[str, Any]]:
    """Spawn two ranks of ``cfg``'s loop (a small model, the CPU) in a gloo group; ``passes[r]`` are
    rank r's micro-batches (lists of pairs) of one update, ``examples`` the pairs of a two-update run.
    Returns what each rank saw (module docstring), rank 0 first."""
    with tempfile.TemporaryDirectory(prefix="repro-group-") as folder:
        # fork where there is one: the ranks need not import torch and repro again (seconds each);
        # spawn where this process has started CUDA (a forked child may not touch it again)
        method = "fork" if "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized() else "spawn"
        ranks = mp.start_processes(_rank, args=(folder, cfg, vocab, passes, examples), nprocs=WORLD,
                                   join=False, start_method=method)
        deadline = time.monotonic() + RANKS_TIMEOUT_S
        while not ranks.join(timeout=1.0):
            if time.monotonic() > deadline:   # a rank waits on a collective the other never enters
                for process in ranks.processes:
                    process.kill()
                raise TimeoutError(f"the {WORLD} ranks did not finish within {RANKS_TIMEOUT_S:.0f} s: one waits on a "
                                   "collective the other never enters (did they take different numbers of passes?)")
        seen = []
        for r in range(WORLD):   # tensors, numbers, text as JSON: no pickled objects
            seen.append(tensor_json.read(Path(folder) / f"rank{r}.json"))
        return seen


__all__ = ["SHARD_ITEMS", "WORLD", "observe_group"]
