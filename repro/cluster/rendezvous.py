"""Where a task sits in its job, and how it joins the job's process group.

A task learns its rank, the world size, its local rank and the rendezvous address from one of:

- a torchrun-style environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
  ``MASTER_PORT`` all set: torchrun, or a launcher that exports them);
- SLURM, through submitit's job environment (the first node of the allocation is the master; the
  port follows from the job id, so every task of a job picks the same one);
- neither: one process, no group.

Joining uses that address directly (``tcp://``; ``env://`` under torchrun, whose agent serves the
rendezvous store); nothing is exported to the environment and
``CUDA_VISIBLE_DEVICES`` is left as SLURM or the launcher set it, so a task bound to one GPU and a
task that sees all of its node's GPUs both work (:func:`repro.runtime.resolve_device` picks the GPU).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import submitit
import torch
import torch.distributed as dist

from repro.environment import env_int
from repro.errors import ConfigError

log = logging.getLogger("repro.cluster.rendezvous")

TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
TORCHRUN_SOURCE = "torchrun environment"
#: How long a rank waits for the others (a collective, the rendezvous) before the job fails.
TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class Place:
    """A task's place: ``rank`` of ``world_size``, ``local_rank`` on its node, the rendezvous address."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    source: str = "single process"

    @property
    def init_method(self) -> str:
        # under torchrun the agent already serves the rendezvous store at MASTER_ADDR:MASTER_PORT;
        # env:// connects to it as a client (tcp:// would try to serve it a second time)
        return "env://" if self.source == TORCHRUN_SOURCE else f"tcp://{self.master_addr}:{self.master_port}"


#: The largest TCP port (a ``MASTER_PORT`` above it would fail deep inside torch's rendezvous).
PORTS = 65535


def _port(job_id: str) -> int:
    return random.Random(job_id).randint(20000, 60000)


def find_place(environ: Mapping[str, str] | None = None) -> Place:
    """This task's :class:`Place`, from a torchrun-style environment, else SLURM, else one process."""
    env = os.environ if environ is None else environ
    given = [k for k in TORCHRUN if k in env]
    if given and len(given) < len(TORCHRUN):
        missing = ", ".join(k for k in TORCHRUN if k not in env)
        raise ConfigError(f"a torchrun-style environment needs {', '.join(TORCHRUN)}; {missing} not set")
    if given:
        port = env_int("MASTER_PORT", minimum=1, maximum=PORTS, environ=env)
        if port is None:
            raise ConfigError("torchrun environment: MASTER_PORT is empty")
        try:
            place = Place(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"]), env["MASTER_ADDR"], port,
                          TORCHRUN_SOURCE)
        except ValueError as err:
            raise ConfigError(f"torchrun environment: {err}") from None
    else:
        try:
            job = submitit.JobEnvironment()
        except RuntimeError:   # not inside a submitit job: one process
            return Place()
        if job.num_tasks <= 1:
            return Place(source=f"job {job.job_id}, one task")
        port = env_int("MASTER_PORT", minimum=1, maximum=PORTS, environ=env) or _port(str(job.job_id))
        place = Place(job.global_rank, job.num_tasks, job.local_rank, job.hostnames[0], port, f"job {job.job_id}")
    if not 0 <= place.rank < place.world_size or place.local_rank < 0:
        raise ConfigError(f"{place.source}: rank {place.rank} of world size {place.world_size}, local rank "
                          f"{place.local_rank} is not a place in a job")
    return place


def join(place: Place, device: torch.device) -> None:
    """Join the job's process group (NCCL between GPUs, gloo between CPUs); nothing for one process."""
    if place.world_size <= 1 or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, init_method=place.init_method, rank=place.rank,
                            world_size=place.world_size, timeout=TIMEOUT,
                            **({"device_id": device} if device.type == "cuda" else {}))
    log.info("torch.distributed: rank %d of %d (local %d), backend %s, %s, from %s", place.rank, place.world_size,
             place.local_rank, backend, place.init_method, place.source)


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
