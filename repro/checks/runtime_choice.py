"""The runtime's choices for each rank of a job and the optimizer of the GPU path, observed on the
code that makes them with the machine simulated: the GPUs a task sees (``torch.cuda`` answered by
a stand-in), the ranks SLURM or torchrun gives (``LOCAL_RANK``, ``SLURM_LOCALID``), bf16 support
and the CPU probe's rates. :func:`repro.train.loop.runtime_of` (what a training task calls) and
:func:`repro.train.optimizer.optimizer_for` (what the loop's build calls) run as they are."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from unittest import mock

import torch

import repro.model.precision as precision_module
import repro.train.loop as loop_module
from repro.checks.jobs import job_config, own
from repro.checks.registry import checker
from repro.checks.training import adam_gradients, recover_adam
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.errors import ConfigError
from repro.train.optimizer import optimizer_for
from repro.train.probes import optimizer_updates


@contextmanager
def simulated(gpus: int, *, world: int = 1, rank: int = 0, env: dict[str, str] | None = None,
              bf16: bool = True) -> Iterator[None]:
    """A task that sees ``gpus`` CUDA devices (0: none), rank ``rank`` of ``world``, with ``env``
    as its launcher's variables (the others of LOCAL_RANK / SLURM_LOCALID removed)."""
    saved = {k: os.environ.get(k) for k in ("LOCAL_RANK", "SLURM_LOCALID")}
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: gpus > 0))
        stack.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: gpus))
        stack.enter_context(mock.patch.object(torch.cuda, "set_device", lambda device: None))
        stack.enter_context(mock.patch.object(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16))
        stack.enter_context(mock.patch.object(torch.cuda, "get_device_name", lambda *a, **k: "simulated GPU"))
        stack.enter_context(mock.patch.object(loop_module, "world", lambda: (world, rank)))
        for key in saved:
            os.environ.pop(key, None)
        os.environ.update(env or {})
        try:
            yield
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None)
                if value is not None:
                    os.environ[key] = value
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def _device(cfg, gpus: int, world: int, rank: int, env: dict[str, str]) -> str:
    with simulated(gpus, world=world, rank=rank, env=env):
        try:
            runtime = loop_module.runtime_of(cfg)
        except ConfigError as refused:
            return f"refused ({str(refused)[:60]})"
    return f"{runtime.device}{' main' if runtime.is_main else ''}"


@checker("run.rank_devices")
def rank_devices(claim: Claim, ctx: CheckContext) -> Measurement:
    """Which device and which role each task of a job takes (:func:`repro.train.loop.runtime_of`
    with the job's config, ``device = auto``): on a node of 8 GPUs every task seeing all of them,
    the task of local rank r (LOCAL_RANK from torchrun, else SLURM_LOCALID) computes on cuda:r;
    a task SLURM bound one GPU to computes on cuda:0 whatever its local rank; without a GPU, the
    CPU. Only global rank 0 is the main rank. Measured: the number of tasks placed otherwise."""
    own(ctx)
    cfg = job_config(claim.params.get("experiment", "table2-base-ende")).replace(device="auto", precision="fp32")
    cases = []
    for rank in range(8):
        local = rank % 4
        main = " main" if rank == 0 else ""
        cases.append(((8, 8, rank, {"LOCAL_RANK": str(local)}), f"cuda:{local}{main}"))
        cases.append(((8, 8, rank, {"SLURM_LOCALID": str(local)}), f"cuda:{local}{main}"))
        cases.append(((1, 8, rank, {"SLURM_LOCALID": str(local)}), f"cuda:0{main}"))
    cases.append(((0, 1, 0, {}), "cpu main"))
    wrong = []
    for (gpus, world, rank, env), want in cases:
        got = _device(cfg, gpus, world, rank, env)
        if got != want:
            wrong.append(f"{gpus} GPU(s) seen, rank {rank} of {world}, {env}: {got} (want {want})")
    return Measurement(len(wrong), detail=f"{len(cases)} tasks: " + ("; ".join(wrong[:4]) if wrong else "each placed "
                                          "on cuda:<local rank> (cuda:0 when bound to one GPU), rank 0 the main one"))


@checker("run.auto_precision")
def auto_precision(claim: Claim, ctx: CheckContext) -> Measurement:
    """When ``precision = auto`` picks bf16 (:func:`repro.train.loop.runtime_of`): on a GPU, when
    it computes bf16 natively; on the CPU, when the probe finds bf16 products at least 1.25 times
    as fast as fp32 (the probe's rates simulated: 10 vs 30, 12.4, 12.6, 8 GFLOP/s); ``fp32`` and
    ``bf16`` are taken as asked. Measured: the number of wrong choices."""
    own(ctx)
    cfg = job_config(claim.params.get("experiment", "table2-base-ende"))
    cases = [(("auto", 1, True, None), "bf16"), (("auto", 1, False, None), "fp32"), (("fp32", 1, True, None), "fp32"),
             (("bf16", 1, False, None), "bf16")]
    cases += [(("auto", 0, True, rates), want) for rates, want in (((10.0, 30.0), "bf16"), ((10.0, 12.4), "fp32"),
                                                                   ((10.0, 12.6), "bf16"), ((10.0, 8.0), "fp32"))]
    wrong = []
    for (name, gpus, bf16, rates), want in cases:
        with simulated(gpus, bf16=bf16), mock.patch.object(precision_module, "_cached_probe",
                                                           lambda *a, r=rates: (*(r or (1.0, 1.0)), "simulated")):
            got = loop_module.runtime_of(cfg.replace(device="auto", precision=name)).precision.name
        if got != want:
            wrong.append(f"{name} on {'a GPU' if gpus else 'the CPU'} (bf16 native {bf16}, probe {rates}): {got}, want {want}")
    return Measurement(len(wrong), detail=f"{len(cases)} cases" + (": " + "; ".join(wrong) if wrong else ": all as stated"))


def gpu_adam_arguments(cfg) -> dict | None:
    """The keyword arguments (the rate left out) the loop's optimizer builder
    (:func:`repro.train.optimizer.optimizer_for`) hands ``torch.optim.Adam`` when every parameter is
    on a GPU (``None``: it builds no ``torch.optim.Adam``); they build the GPU path's Adam on CPU
    parameters (torch's fused Adam runs there too)."""
    built: list[dict] = []

    def spy(params, **kwargs):
        built.append(kwargs)
        return SimpleNamespace(params=list(params), kwargs=kwargs)

    gpu = torch.device("cuda", 0)
    params = [SimpleNamespace(requires_grad=True, device=gpu) for _ in range(3)]
    model = SimpleNamespace(parameters=lambda: iter(params))
    with mock.patch.object(torch.optim, "Adam", spy):
        optimizer_for(cfg, model)
    return {k: v for k, v in built[0].items() if k != "lr"} if built else None


@checker("run.gpu_optimizer")
def gpu_optimizer(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.3's Adam on the GPU path: the optimizer the loop's builder makes for the job
    (:func:`repro.train.optimizer.optimizer_for`) when every parameter is on a GPU must be torch's
    fused Adam; the arguments it is built with then build it on two CPU parameters (torch's fused
    Adam runs there too) and beta1, beta2 and epsilon are recovered from two steps
    (:func:`repro.checks.training.recover_adam`). Measured: [beta1, beta2, epsilon]."""
    own(ctx)
    kwargs = gpu_adam_arguments(job_config(claim.params.get("experiment", "table2-base-ende")))
    if kwargs is None:
        return Measurement(None, False, "the builder made no torch.optim.Adam")
    seen = optimizer_updates(lambda ps: torch.optim.Adam(ps, lr=0.0, **kwargs), adam_gradients())
    measured, departures = recover_adam(seen)
    fused = bool(kwargs.get("fused"))
    if not fused:
        departures.append("not the fused kernel")
    return Measurement([round(measured[0], 6), round(measured[1], 6), float(f"{measured[2]:.5g}")],
                       False if departures else None,
                       f"built with {kwargs}; recovered beta1 {measured[0]:.6f}, beta2 {measured[1]:.6f}, epsilon "
                       f"{measured[2]:.4g}" + ("; " + "; ".join(departures) if departures else ""))
