"""Where and how this process computes: one object, resolved once, handed to everything that makes tensors.

A :class:`Runtime` holds the device (``cpu``, ``cuda:N``), the numeric precision
(:mod:`repro.model.precision`) and the process's place in a data-parallel job (world size, rank,
local rank). Training, evaluation (BLEU's beam search, perplexity, F1), ``repro translate``, the
parser's probes and the benchmarks take one, so a model on ``cuda:0`` is never fed tensors built on
the CPU. The command line resolves it from ``--device`` and ``--precision`` (``auto`` = CUDA when
present); a cluster task resolves it from its job's config and the rank SLURM or torchrun gave it.

With several tasks on a node, each task computes on the GPU of its local rank when it sees all of
the node's GPUs, and on ``cuda:0`` when SLURM bound one GPU to it (it sees only that one).
"""

from __future__ import annotations

import dataclasses
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch

from repro.errors import ConfigError
from repro.model.precision import Precision, resolve_precision

#: What ``--device`` takes.
DEVICE_HELP = "auto (CUDA when present, else the CPU), cpu, cuda or cuda:N"
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]+)$")   # ASCII: \d takes other scripts' digits


def check_device_name(name: str) -> str:
    """``name`` if it is a device ``--device`` takes, else a :class:`~repro.errors.ConfigError`."""
    if not isinstance(name, str) or not _DEVICE.match(name):
        raise ConfigError(f"device must be {DEVICE_HELP}, got {name!r}")
    return name


def resolve_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """The device ``name`` means for the task of ``local_rank`` on its node.

    ``cuda`` (or ``auto`` with a GPU) is ``cuda:<local_rank>`` when the task sees a GPU per local
    rank, ``cuda:0`` when it sees one (SLURM bound it); ``cuda:N`` is taken as given. Asking for
    CUDA where there is none is refused (``auto`` falls back to the CPU)."""
    check_device_name(name)
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: CUDA is not available here (torch {torch.__version__}); "
                          "use --device cpu or auto")
    count = torch.cuda.device_count()
    if name.startswith("cuda:"):
        index = int(name.split(":")[1])
        if index >= count:
            raise ConfigError(f"device {name!r}: this process sees {count} GPU(s)")
        return torch.device(name)
    if local_rank < count:
        return torch.device("cuda", local_rank)
    if count == 1:
        return torch.device("cuda", 0)
    raise ConfigError(f"task of local rank {local_rank} sees {count} GPUs: bind one GPU per task "
                      "or give every task all of the node's GPUs")


@dataclass(frozen=True)
class Runtime:
    """The device, the precision and the process's place in the job, for one process."""

    device: torch.device
    precision: Precision = field(default_factory=lambda: Precision("fp32", "default"))
    world_size: int = 1
    rank: int = 0
    local_rank: int = 0

    @classmethod
    def resolve(cls, device: str = "auto", precision: str = "auto", *, world_size: int = 1, rank: int = 0,
                local_rank: int = 0, dims: tuple[int, int] | None = None) -> "Runtime":
        """From the names a config or the command line gives (``--device``, ``--precision``);
        ``dims`` (d_model, d_ff) of the model the run computes with sizes ``auto``'s probe."""
        where = resolve_device(device, local_rank)
        if where.type == "cuda":
            torch.cuda.set_device(where)
        return cls(where, resolve_precision(precision, where, dims=dims), world_size, rank, local_rank)

    @classmethod
    def device_only(cls, device: str = "auto", *, local_rank: int = 0, why: str = "not resolved") -> "Runtime":
        """The device ``device`` names, in plain fp32, with no process-wide switch thrown (no TF32):
        for a verb that resolves its precision later (:meth:`for_model`) or pins its own arithmetic."""
        where = resolve_device(device, local_rank)
        if where.type == "cuda":
            torch.cuda.set_device(where)
        return cls(where, Precision("fp32", why, where.type), local_rank=local_rank)

    def for_model(self, model: torch.nn.Module, precision: str = "auto") -> "Runtime":
        """This runtime with ``precision`` resolved for ``model``'s sizes (a checkpoint loaded after
        the device was chosen)."""
        cfg = getattr(model, "cfg", None)
        dims = (cfg.d_model, cfg.d_ff) if cfg is not None else None
        return dataclasses.replace(self, precision=resolve_precision(precision, self.device, dims=dims))

    @classmethod
    def of(cls, model: torch.nn.Module, precision: Precision | None = None) -> "Runtime":
        """Where ``model`` already is (the device of its parameters), in ``precision`` (default fp32,
        no autocast): what a function given a model but no runtime computes with."""
        where = next(model.parameters()).device
        return cls(where, precision or Precision("fp32", "default", where.type))

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that evaluates, writes checkpoints and stores results."""
        return self.rank == 0

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def put(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (built on the host) on this runtime's device; from pinned memory and without
        blocking the host on a GPU."""
        if not self.on_gpu:
            return tensor.to(self.device)
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def autocast(self) -> AbstractContextManager:
        """The context forward passes run under (bf16 autocast in mixed precision, else nothing)."""
        return self.precision.autocast()

    def describe(self) -> str:
        place = f", rank {self.rank} of {self.world_size}" if self.world_size > 1 else ""
        return f"device {self.device}{place}, {self.precision.describe()}"

    def provenance(self) -> dict[str, str | int]:
        """What a result records of where it was computed."""
        return {"device": str(self.device), "world_size": self.world_size, **self.precision.provenance()}


def runtime_for(model: torch.nn.Module, runtime: Runtime | None = None, *, device: torch.device | str | None = None,
                precision: Precision | None = None) -> Runtime:
    """The runtime a function handed ``model`` computes with: ``runtime`` when given; else where the
    model is (or, from older callers, ``device``) in ``precision``. Inputs then go where the model is."""
    if runtime is not None:
        return runtime
    found = Runtime.of(model, precision)
    return Runtime(torch.device(device), found.precision) if device is not None else found
