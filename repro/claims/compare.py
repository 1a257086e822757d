"""The one place where a measurement is compared, so that NaN and infinity can never pass.

Every checker compares through these functions. ``max(0.0, nan)`` is 0.0 and ``nan > tol`` is
False, so a worst-error loop that starts at 0 and a perturbation test that asks "did it move?"
both read an all-NaN model as perfect. Here any NaN or infinity met on the way raises
:class:`NonFinite`, which the engine (:mod:`repro.claims.runner`) records as ``fail`` naming
what was not finite; and a claim's own comparison (:meth:`repro.claims.claim.Claim.within`)
refuses a non-finite value whatever its tolerance or bound.

- :func:`finite`          the value, or NonFinite when any number in it is NaN or infinite
- :func:`max_abs_diff`    max |a - b| in float64, both sides finite and of one shape
- :func:`max_abs`         max |a| of a finite tensor
- :func:`changed`         per-position "did it move" of a perturbation test, both sides finite
- :class:`Worst`          the worst of several errors (the worst-error loops)
- :func:`within`          a number against a paper value: tolerance, rounding or a bound
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor


class NonFinite(ArithmeticError):
    """A value under comparison is NaN or infinite: the claim fails (never passes, never errs)."""


def is_finite(value: Any) -> bool:
    """Whether every number in ``value`` (a number, tensor, array, list, tuple or mapping) is finite.
    Booleans, text and ``None`` hold no number and are finite."""
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return True
        return bool(torch.isfinite(value).all()) if value.device.type != "meta" else True
    if isinstance(value, numbers.Number):
        return math.isfinite(complex(value).real) and math.isfinite(complex(value).imag)
    if isinstance(value, Mapping):
        return all(is_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(is_finite(v) for v in value)
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # numpy arrays
        try:
            return bool(np.isfinite(np.asarray(value, dtype=float)).all())
        except (TypeError, ValueError):
            return True
    return True


def finite(value: Any, what: str = "a measured value") -> Any:
    """``value`` itself, or :class:`NonFinite` naming ``what`` when a number in it is NaN or infinite."""
    if not is_finite(value):
        raise NonFinite(f"{what} is not finite (NaN or infinity)")
    return value


def max_abs_diff(got: Tensor, want: Tensor, what: str = "the output") -> float:
    """max |got - want| in float64. Both must be finite; shapes must agree exactly (a broadcast
    would compare a row with every row and could hide a wrong shape)."""
    if tuple(got.shape) != tuple(want.shape):
        raise ValueError(f"{what}: shape {tuple(got.shape)} against {tuple(want.shape)}")
    finite(got, what)
    finite(want, f"the reference for {what}")
    if got.numel() == 0:
        return 0.0
    return float((got.detach().double() - want.detach().double()).abs().max())


def max_abs(value: Tensor, what: str = "the output") -> float:
    """max |value| of a finite tensor (0 for an empty one)."""
    finite(value, what)
    return float(value.detach().double().abs().max()) if value.numel() else 0.0


def changed(got: Tensor, base: Tensor, tol: float, dims: tuple[int, ...] | int, what: str = "the output") -> Tensor:
    """Perturbation tests: a boolean tensor, True where ``got`` moved from ``base`` by more than
    ``tol`` (max over ``dims``). Both must be finite: NaN compares False with everything, and an
    all-NaN model would otherwise read as one that never moves (or never leaks)."""
    finite(got, what)
    finite(base, what)
    return (got.detach().double() - base.detach().double()).abs().amax(dim=dims) > tol


class Worst:
    """The worst (largest) of several non-negative errors, each required to be finite.

    ``add(error, where)`` keeps the largest error and where it was seen; ``value`` is 0.0 until
    something was added, so a checker must also show that it measured something (``count``)."""

    def __init__(self) -> None:
        self.value = 0.0
        self.where = ""
        self.count = 0

    def add(self, error: float | Tensor, where: str = "") -> float:
        error = float(error.detach().double().abs().max()) if isinstance(error, Tensor) else float(error)
        finite(error, f"the error{' at ' + where if where else ''}")
        self.count += 1
        if error >= self.value:
            self.value, self.where = error, where
        return error


def within(measured: Any, expected: float, *, abs_tol: float = 0.0, rel_tol: float = 0.0,
           rounding: float | None = None, bound: str | None = None) -> bool:
    """A number against the paper's: a one-sided ``bound`` (``at_least``/``at_most``), the paper's
    ``rounding`` step, or ``|measured - expected| <= max(abs_tol, rel_tol * |expected|)``.
    A NaN or infinite measurement is never within (an infinite one meets no bound either)."""
    if isinstance(measured, bool) or not isinstance(measured, numbers.Real):
        return False
    if not math.isfinite(float(measured)):
        return False
    if bound == "at_least":
        return measured >= expected
    if bound == "at_most":
        return measured <= expected
    if rounding is not None:
        return math.isclose(round(measured / rounding) * rounding, expected, rel_tol=1e-9, abs_tol=1e-12)
    return abs(measured - expected) <= max(abs_tol, rel_tol * abs(expected))


__all__ = ["NonFinite", "Worst", "changed", "finite", "is_finite", "max_abs", "max_abs_diff", "within"]
