"""A fake CUDA device for CPU-only CI: the device rules of a GPU, and a count of what a GPU pays for.

Inside ``with FakeAccelerator() as fa:`` project code that asks for ``cuda`` (``torch.cuda.is_available()``
says True) gets tensors that are *not* on the CPU: :class:`Acc`, a wrapper subclass holding CPU data and
reporting the ``meta`` device (meta has a no-op device guard in CPU builds of torch and is distinct from
``cpu``). Every aten op on an :class:`Acc` runs on the CPU data after CUDA's device check: a plain CPU
tensor of dim > 0 mixed with an accelerator tensor raises :class:`DeviceMismatch` ("Expected all tensors
to be on the same device ..."); 0-dim CPU scalars, CPU index tensors in advanced indexing and cross-device
``copy_`` are allowed, as on CUDA.

It also counts, per project ``file:line`` (the innermost frame under ``repro/``), what costs on a real
GPU: host syncs (``.item()``, ``float()``, ``bool()``, ``.tolist()``, ``nonzero``, boolean-mask indexing,
device-to-host copies) and host-to-device copies (blocking or not). ``fa.count("sync")`` sums them.

Moves between the host and the fake device are differentiable (``.to``, ``.cpu()``), as on CUDA, so a
loss computed on the device gives its gradient to host logits (``repro check --device``).

Adapted from the example in ``shared/gpu-proxy/`` (not part of the project); this one patches
``torch.inference_mode`` and ``torch.autocast`` only while it is active.

Arithmetic: as on an Ampere or Hopper GPU, fp32 matrix products on the device run in TF32 (operands
rounded to 10-bit mantissas) whenever torch's settings allow it (:func:`repro.model.arithmetic.tf32_matmul`:
``allow_tf32 = True`` or a matmul precision below "highest"), and scaled dot-product attention on fp32
inputs runs at that reduced precision whenever a fused GPU kernel (memory-efficient, cuDNN) is enabled.
A check that does not pin its arithmetic so sees the errors a real GPU shows it. The settings the fake
found are restored when it exits.

Known limit: a tensor that torch's C++ makes "on the device of" a fake tensor (a backward formula's
zeros of ``grad.options()``, a composite op's scalar) is a real meta tensor without data; the
common forward case, ``torch.where(cond, x, scalar)``, is handled. x-transformers' loss meets the
backward case: its ``sec5.label-smoothing.loss`` errs on the fake device only.
"""

from __future__ import annotations

import collections
import math
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from repro.model import arithmetic

aten = torch.ops.aten
LABEL = torch.device("meta")   # what ``.device`` of an accelerator tensor says
_REPRO = str(Path(__import__("repro").__file__).resolve().parent) + "/"


class DeviceMismatch(RuntimeError):
    """A CPU tensor of dim > 0 met an accelerator tensor in one op (CUDA raises the same)."""


_ACTIVE: list["FakeAccelerator"] = []


def _site() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_REPRO):
            return f"repro/{name[len(_REPRO):]}:{frame.f_lineno}"
        frame = frame.f_back
    return "(outside repro)"


def _record(kind: str) -> None:
    if _ACTIVE:
        _ACTIVE[-1].counts[(kind, _site())] += 1


def _is_acc(device) -> bool:
    if device is None:
        return False
    device = device if isinstance(device, torch.device) else torch.device(device)
    return device.type in ("cuda", "meta")


class Acc(torch.Tensor):
    """A tensor on the fake accelerator: CPU data, ``device`` meta."""

    elem: torch.Tensor
    __slots__ = ["elem"]

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        assert not isinstance(elem, Acc)
        r = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=LABEL, requires_grad=requires_grad)
        r.elem = elem
        return r

    def __repr__(self) -> str:  # noqa: D105
        return f"Acc({self.elem!r})"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.tolist, torch.Tensor.numpy):
            _record("sync: tolist/numpy")
            return func(args[0].elem.detach(), *args[1:], **kwargs)
        if func is torch.nn.functional.scaled_dot_product_attention:
            if _fused_sdpa_enabled():   # a fused GPU kernel: fp32 inputs through tensor cores
                args = tuple(_tf32(a) if i < 3 else a for i, a in enumerate(args))
                kwargs = {k: (_tf32(v) if k in ("query", "key", "value") else v) for k, v in kwargs.items()}
            return _sdpa_math(*args, **kwargs)
        if func is torch.Tensor.data_ptr:   # where the data lies (a meta tensor says 0), as on CUDA
            return args[0].elem.data_ptr()
        if func is torch.where and len(args) == 3 and not all(isinstance(a, torch.Tensor) for a in args[1:]):
            # ``where(cond, x, scalar)`` decomposes into a scalar tensor made on ``cond.device`` (meta here,
            # its value lost); CUDA makes it on the device. A 0-dim host tensor is what the check allows.
            args = (args[0], *(a if isinstance(a, torch.Tensor) else torch.tensor(a) for a in args[1:]))
        if func is torch.Tensor.__setitem__ and isinstance(args[2], (int, float, bool)):
            # CUDA's binding builds the scalar on the device; a 0-dim CPU tensor is what the check allows
            args = (args[0], args[1], torch.tensor(args[2], dtype=args[0].dtype))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        if func is aten._to_copy.default and isinstance(args[0], Acc):
            device = kwargs.get("device")
            if device is not None and torch.device(device).type == "cpu":
                _record("sync: device-to-host copy")
                return func(args[0].elem, **kwargs)
        plain = [x for x in flat if isinstance(x, torch.Tensor) and not isinstance(x, Acc)]
        if plain:
            _check_mix(func, args, kwargs, plain)
        if func is aten.copy_.default and isinstance(args[0], Acc) and not isinstance(args[1], Acc):
            _record("host-to-device copy (copy_)")
        unwrap = lambda e: e.elem if isinstance(e, Acc) else e  # noqa: E731
        if func in _MATMULS and arithmetic.tf32_matmul():
            unwrap = lambda e: _round_tf32(e.elem) if isinstance(e, Acc) else e  # noqa: E731
        ukwargs = tree_map(unwrap, kwargs)
        if "device" in ukwargs and _is_acc(ukwargs["device"]):
            ukwargs["device"] = torch.device("cpu")
        out = func(*tree_map(unwrap, args), **ukwargs)
        if func is aten._local_scalar_dense.default:
            _record("sync: item/float/int/bool")
            return out
        if func in (aten.nonzero.default, aten.masked_select.default) or (
                func is aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1])):
            _record("sync: data-dependent shape (nonzero / boolean mask)")
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            _record("sync: data-dependent shape (repeat_interleave)")
        schema = func._schema
        if schema.returns and schema.returns[0].alias_info is not None and schema.returns[0].alias_info.is_write:
            for i, a in enumerate(schema.arguments):   # in-place and out= ops return their (wrapped) argument
                if a.alias_info is not None and a.alias_info.is_write:
                    return kwargs[a.name] if a.kwarg_only or i >= len(args) else args[i]
        return tree_map(lambda e: Acc(e) if isinstance(e, torch.Tensor) and not isinstance(e, Acc) else e, out)


_MATMULS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default, aten.addbmm.default,
            aten.addmv.default, aten.mv.default, aten.dot.default}


def _round_tf32(tensor: torch.Tensor) -> torch.Tensor:
    """An fp32 tensor's values with TF32's 10-bit mantissa (rounded to nearest); others as they are."""
    if tensor.dtype != torch.float32:
        return tensor
    bits = tensor.contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(tensor), rounded, tensor).view_as(tensor)


def _tf32(tensor):
    """A device tensor rounded as a tensor-core kernel reads fp32 (anything else unchanged)."""
    if isinstance(tensor, Acc) and tensor.dtype == torch.float32:
        with torch._C.DisableTorchFunctionSubclass():
            return Acc(_round_tf32(tensor.elem.detach()), requires_grad=False) if not tensor.requires_grad \
                else tensor + (Acc(_round_tf32(tensor.elem.detach()) - tensor.elem.detach()))
    return tensor


def _fused_sdpa_enabled() -> bool:
    cuda = torch.backends.cuda
    return cuda.mem_efficient_sdp_enabled() or cuda.cudnn_sdp_enabled()


_INDEX_OK = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}


def _check_mix(func, args, kwargs, plain) -> None:
    if not any(isinstance(x, Acc) for x in tree_flatten((args, kwargs))[0]):
        return
    if func is aten.copy_.default:
        return
    if func in _INDEX_OK and isinstance(args[0], Acc):
        indices = [i for i in args[1] if i is not None]
        plain = [p for p in plain if not any(p is i for i in indices)]
    big = [p for p in plain if p.dim() > 0]
    if big:
        raise DeviceMismatch(
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
            f"({func}, cpu tensor of shape {tuple(big[0].shape)}) at {_site()}")


def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    s = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * s
    if is_causal:
        n, m = query.size(-2), key.size(-2)
        causal = torch.ones(n, m, dtype=torch.bool).tril(m - n)   # built on the host, then onto the fake device
        scores = scores.masked_fill(~(Acc(causal) if isinstance(scores, Acc) else causal), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p:
        weights = torch.nn.functional.dropout(weights, dropout_p)
    return weights @ value


class _ToAcc(torch.autograd.Function):
    """A host tensor onto the fake device, its gradient flowing back to the host (``.to`` on CUDA)."""

    @staticmethod
    def forward(ctx, tensor):
        return Acc(tensor.detach().clone())

    @staticmethod
    def backward(ctx, grad):
        return grad.elem if isinstance(grad, Acc) else grad


class _ToHost(torch.autograd.Function):
    """A fake-device tensor onto the host, its gradient flowing back to the device (``.cpu()``)."""

    @staticmethod
    def forward(ctx, tensor):
        return tensor.elem.detach().clone()

    @staticmethod
    def backward(ctx, grad):
        return grad if isinstance(grad, Acc) else Acc(grad)


FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray, torch.zeros, torch.ones, torch.full, torch.empty, torch.arange,
             torch.randn, torch.rand, torch.randint, torch.eye, torch.linspace, torch.scalar_tensor,
             torch.zeros_like, torch.ones_like, torch.full_like, torch.empty_like}


class _Mode(TorchFunctionMode):
    """Maps ``device="cuda"`` in factories and ``.to("cuda")`` onto :class:`Acc`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in FACTORIES:
            kwargs.pop("pin_memory", None)
            if _is_acc(kwargs.get("device")):
                kwargs["device"] = "cpu"
                if func in (torch.tensor, torch.as_tensor, torch.asarray):
                    _record("host-to-device copy (torch.tensor(..., device=acc))")
                return Acc(func(*args, **kwargs))
            return func(*args, **kwargs)
        if func is torch.Tensor.to or func is torch.Tensor.cuda:
            tensor = args[0]
            if func is torch.Tensor.cuda:
                device, dtype, non_blocking = torch.device("cuda"), None, kwargs.get("non_blocking", False)
            else:
                # Tensor.to(..., copy=) (Hugging Face's generate): a move copies anyway; _parse_to refuses it
                parsed = {k: v for k, v in kwargs.items() if k != "copy"}
                device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **parsed)
            if device is not None and _is_acc(device):
                if isinstance(tensor, Acc):
                    return tensor.to(dtype) if dtype is not None else tensor
                _record("host-to-device copy (non_blocking)" if non_blocking else "host-to-device copy (blocking)")
                if tensor.requires_grad and torch.is_grad_enabled():   # differentiable, as on CUDA
                    moved = _ToAcc.apply(tensor)
                    return moved.to(dtype) if dtype is not None else moved
                data = tensor.detach().to(dtype) if dtype is not None else tensor.detach().clone()
                return Acc(data, requires_grad=tensor.requires_grad)
            if (isinstance(tensor, Acc) and device is not None and device.type == "cpu" and tensor.requires_grad
                    and torch.is_grad_enabled()):
                _record("sync: device-to-host copy")
                moved = _ToHost.apply(tensor)
                return moved.to(dtype) if dtype is not None else moved
            return func(*args, **kwargs)
        if func is torch.Tensor.cpu and isinstance(args[0], Acc) and args[0].requires_grad and torch.is_grad_enabled():
            _record("sync: device-to-host copy")
            return _ToHost.apply(args[0])
        if func is torch.Tensor.pin_memory:
            return args[0]
        if func is torch.Tensor.is_pinned:
            return True
        return func(*args, **kwargs)


def _module_to_acc(module: torch.nn.Module) -> torch.nn.Module:
    """Parameters and buffers onto the fake accelerator, tied parameters kept tied."""
    memo: dict[int, torch.nn.Parameter] = {}
    for mod in module.modules():
        for name, p in list(mod._parameters.items()):
            if p is None or isinstance(p, Acc):
                continue
            if id(p) not in memo:
                memo[id(p)] = torch.nn.Parameter(Acc(p.detach()), requires_grad=p.requires_grad)
            mod._parameters[name] = memo[id(p)]
        for name, b in list(mod._buffers.items()):
            if b is not None and not isinstance(b, Acc):
                mod._buffers[name] = Acc(b)
    return module


_module_to = torch.nn.Module.to
_save = torch.save
_autocast = torch.autocast
_is_autocast_enabled, _get_autocast_dtype = torch.is_autocast_enabled, torch.get_autocast_dtype
_inference_enter = torch.autograd.grad_mode.inference_mode.__enter__
_inference_exit = torch.autograd.grad_mode.inference_mode.__exit__


def _patched_module_to(self, *args, **kwargs):
    device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
    if device is not None and _is_acc(device):
        _module_to_acc(self)
        return self if dtype is None else _module_to(self, dtype)
    return _module_to(self, *args, **kwargs)


def _patched_save(obj, f, *args, **kwargs):
    return _save(tree_map(lambda e: e.elem if isinstance(e, Acc) else e, obj), f, *args, **kwargs)


def _host_type(device_type):
    return "cpu" if device_type in ("cuda", "meta") else device_type


def _autocast_on_cpu(device_type, *args, **kwargs):
    return _autocast(_host_type(device_type), *args, **kwargs)


# Wrapper subclasses cannot be viewed under inference_mode (version counters): while the fake is on,
# ``@torch.inference_mode()`` behaves as ``torch.no_grad()``.
def _inference_as_no_grad_enter(self) -> None:
    self._fake_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(False)


def _inference_as_no_grad_exit(self, *exc) -> None:
    torch.set_grad_enabled(self._fake_grad)


class FakeAccelerator:
    """The context in which ``cuda`` is the fake device; ``counts`` holds (kind, file:line) -> n."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def __enter__(self) -> "FakeAccelerator":
        self._stack = ExitStack()
        cuda = torch.cuda
        for name, value in [("is_available", lambda: True), ("device_count", lambda: 1),
                            ("is_bf16_supported", lambda *a, **k: False),
                            ("get_device_name", lambda *a, **k: "FakeAccelerator"),
                            ("synchronize", lambda *a, **k: None), ("get_rng_state_all", lambda: []),
                            ("set_rng_state_all", lambda *a: None), ("get_rng_state", lambda *a: torch.get_rng_state()),
                            ("set_rng_state", lambda *a: None), ("current_device", lambda: 0),
                            ("set_device", lambda *a: None), ("manual_seed_all", lambda *a: None),
                            ("manual_seed", lambda *a: None), ("empty_cache", lambda: None),
                            ("reset_peak_memory_stats", lambda *a: None),
                            ("max_memory_allocated", lambda *a: 0)]:
            self._stack.enter_context(mock.patch.object(cuda, name, value))
        self._stack.enter_context(mock.patch.object(torch.nn.Module, "to", _patched_module_to))
        self._stack.enter_context(mock.patch.object(torch.nn.Module, "cuda", lambda self, *a, **k: _module_to_acc(self)))
        self._stack.enter_context(mock.patch.object(torch, "save", _patched_save))
        # a CPU build cannot page-lock memory; patched on the class so that threads (the prefetcher) see it
        self._stack.enter_context(mock.patch.object(torch.Tensor, "pin_memory", lambda self, *a, **k: self))
        self._stack.enter_context(mock.patch.object(torch, "autocast", _autocast_on_cpu))
        self._stack.enter_context(mock.patch.object(
            torch, "is_autocast_enabled", lambda *a: _is_autocast_enabled(*(_host_type(x) for x in a))))
        self._stack.enter_context(mock.patch.object(
            torch, "get_autocast_dtype", lambda device_type: _get_autocast_dtype(_host_type(device_type))))
        self._stack.enter_context(mock.patch.object(torch.autograd.grad_mode.inference_mode, "__enter__",
                                                    _inference_as_no_grad_enter))
        self._stack.enter_context(mock.patch.object(torch.autograd.grad_mode.inference_mode, "__exit__",
                                                    _inference_as_no_grad_exit))
        self._stack.enter_context(_Mode())
        # load_state_dict warns that copying into a meta parameter is a no-op; on Acc it is a real copy
        self._stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message=".*copying from a non-meta parameter.*")
        _ACTIVE.append(self)
        self._arithmetic = arithmetic.snapshot()
        return self

    def __exit__(self, *exc) -> bool:
        _ACTIVE.remove(self)
        self._stack.close()
        arithmetic.restore(self._arithmetic)   # the TF32 and attention-kernel settings the fake found
        return False

    def reset(self) -> None:
        self.counts.clear()

    def count(self, kind: str = "", where: str = "") -> int:
        """How many events whose kind starts with ``kind`` happened at sites containing ``where``."""
        return sum(n for (k, site), n in self.counts.items() if k.startswith(kind) and where in site)

    def sites(self, kind: str = "") -> dict[str, int]:
        """``file:line -> n`` for the events whose kind starts with ``kind``."""
        out: collections.Counter[str] = collections.Counter()
        for (k, site), n in self.counts.items():
            if k.startswith(kind):
                out[site] += n
        return dict(out)

    def report(self) -> str:
        return "\n".join(f"{n:6d}  {kind:50s} {site}" for (kind, site), n in
                         sorted(self.counts.items(), key=lambda kv: (kv[0][0], -kv[1])))


def on_accelerator(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` lives on the fake (or a real) accelerator."""
    return isinstance(tensor, Acc) or tensor.device.type == "cuda"
