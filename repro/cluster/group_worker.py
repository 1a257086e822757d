"""One process of a data-parallel group started on this machine (``torch.multiprocessing``, gloo).

What SLURM tasks do on a cluster, on one host: each process joins the group at ``init_method``,
then either trains a config with the loop (``task="train"``), returns the first update's
gradients (``task="gradients"``), or evaluates the run's newest checkpoint split over the ranks
(``task="evaluate"``: test BLEU and dev perplexity, as a cluster job's ranks do after training),
and writes what it got to ``out/rank<R>.json`` (tensors as nested lists: :func:`read_result`
turns them back). A spawned process imports this module
by its package name, so it runs wherever repro is importable, whatever the current directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from repro import tensor_json
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.settings import TRANSLATION
from repro.decode.translate import load_model
from repro.eval.translation import evaluate_bleu, evaluate_perplexity
from repro.runtime import Runtime
from repro.train.checkpoint import list_checkpoints
from repro.train.config import TrainConfig
from repro.train.data import prepare_training_data
from repro.train.loop import first_update_gradients, train

TASKS = ("train", "gradients", "evaluate")


def group_worker(rank: int, world: int, init_method: str, task: str, train_config: dict[str, Any], out: str) -> None:
    """The body of process ``rank`` of ``world`` (the first argument, as torch.multiprocessing passes it)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    try:
        cfg = TrainConfig.from_dict(train_config)
        if task == "gradients":
            data = prepare_training_data(cfg, rank=rank, world_size=world)
            result: dict[str, Any] = first_update_gradients(cfg, data.examples, data.vocab_size)
        elif task == "evaluate":
            result = _evaluate(cfg, Runtime.resolve("cpu", "fp32", world_size=world, rank=rank))
        else:
            messages: list[str] = []
            summary = train(cfg, log=messages.append)
            result = {**summary.to_dict(), "rank": rank, "messages": messages}
        tensor_json.write(Path(out) / f"rank{rank}.json", result)
    finally:
        dist.destroy_process_group()


def _evaluate(cfg: TrainConfig, runtime: Runtime) -> dict[str, Any]:
    """Test BLEU and dev perplexity of the run's newest checkpoint, split over the group's ranks."""
    model, _ = load_model(list_checkpoints(cfg.out_dir)[-1], runtime=runtime)
    vocab = SharedVocab.load(f"{cfg.out_dir}/vocab.json")
    dataset = get_dataset(cfg.dataset, resolve_data_dir(cfg.data_dir))
    bleu = evaluate_bleu(model, vocab, dataset, "test", TRANSLATION.replace(max_len_offset=5), runtime=runtime)
    ppl = evaluate_perplexity(model, vocab, dataset, "dev", runtime=runtime)
    return {"hypotheses": bleu.hypotheses, "bleu": bleu.sacrebleu.score, "ppl": ppl.ppl, "tokens": ppl.tokens}


def read_result(path: str | Path) -> dict[str, Any]:
    """What a worker wrote, its tensors rebuilt."""
    return tensor_json.read(path)
