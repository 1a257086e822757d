"""What ``repro submit`` checks of its jobs before it plans, submits or prints anything.

A job that queues for hours and then fails on a flag, or runs while a flag or ``--set`` field the
user gave was never used, costs more than a refusal up front. Refused (exit 2): ``--parallel`` for a
SLURM executor (SLURM runs an array's jobs side by side itself); ``--set`` fields or ``--data-dir``
that a synthetic-corpus job (``smoke``) never reads; ``device=cuda`` on a profile without GPUs; a
``max_tokens_per_device`` that cannot hold the longest training pair the job keeps (``max_len``
wordpieces plus EOS/BOS), which the job's batcher would refuse after its wait in the queue. Warned: a
data directory that does not exist here (the jobs may see another file system).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repro.cluster.experiments import JobSpec
from repro.cluster.profiles import ClusterProfile
from repro.data.corpora import resolve_data_dir
from repro.data.synthetic import SYNTHETIC
from repro.errors import ConfigError

#: TrainConfig fields a job on the synthetic corpus never reads (no files, no BPE, no length filter).
SYNTHETIC_UNUSED = ("bpe_split", "data_dir", "train_src", "train_tgt", "dev_src", "dev_tgt", "max_len")
#: The fewest tokens per side a pass must hold for any pair: one source token; one target token and EOS/BOS.
SHORTEST_PAIR = 2


def check_parallel(parallel: int, executor: str) -> None:
    if parallel != 1 and executor == "slurm":
        raise ConfigError(f"--parallel {parallel} applies to the local executor only; SLURM runs the array's jobs "
                          "side by side itself (give --executor local, or leave --parallel out)")


def check_jobs(specs: Iterable[JobSpec], profile: ClusterProfile, overrides: dict[str, Any],
               data_dir_flag: str | None) -> list[str]:
    """Refuse what no job of ``specs`` can use or run with; returns warnings to print."""
    specs = list(specs)
    synthetic = [s for s in specs if s.train.get("dataset") == SYNTHETIC]
    if specs and len(synthetic) == len(specs):
        unused = sorted(k for k in overrides if k in SYNTHETIC_UNUSED)
        if unused:
            raise ConfigError(f"--set {unused[0]}: experiment {specs[0].experiment} trains on the synthetic corpus, "
                              f"which never reads '{unused[0]}'; leave it out")
        if data_dir_flag is not None:
            raise ConfigError(f"--data-dir: experiment {specs[0].experiment} trains on the synthetic corpus and "
                              "reads no data; leave it out")
    warnings = []
    for spec in specs:
        train = spec.train
        device = str(train.get("device", ""))
        if device.startswith("cuda") and not profile.gpus_per_node:
            raise ConfigError(f"job {spec.name}: device '{device}', but profile {profile.name} ({profile.path}) has "
                              "gpus_per_node = 0; give a GPU profile or leave device to the profile")
        tokens = int(train["max_tokens_per_device"])
        longest = SHORTEST_PAIR if spec in synthetic else int(train["max_len"]) + 1
        if tokens < longest:
            raise ConfigError(f"job {spec.name}: max_tokens_per_device = {tokens} (profile {profile.name}: "
                              f"{profile.max_tokens_per_device}) cannot hold a training pair of "
                              + (f"max_len = {train['max_len']} wordpieces ({longest} tokens with EOS/BOS); raise it "
                                 "or --set max_len lower" if spec not in synthetic else "even one token a side"))
        if spec not in synthetic:
            folder = resolve_data_dir(train.get("data_dir"))
            dataset = str(train.get("dataset"))
            if not folder.is_dir() and not Path(dataset).exists():
                where = "--data-dir" if data_dir_flag is not None else "the default (no --data-dir; REPRO_DATA_DIR unset?)"
                warnings.append(f"data directory {folder} ({where}) does not exist here: the jobs would not find "
                                f"dataset '{dataset}' unless their nodes see another file system")
    return list(dict.fromkeys(warnings))
