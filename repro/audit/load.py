"""Loading the implementation under audit from ``module:factory`` (``repro audit``, ``pytest --repro-target``)."""

from __future__ import annotations

import importlib
import os
import sys

from repro.audit.adapter import Adapter
from repro.claims import interrupts
from repro.errors import ReproError


class TargetError(ReproError):
    """A ``module:factory`` target that cannot be imported or does not give an adapter."""

    exit_code = 2


def load_adapter(target: str) -> Adapter:
    """Import ``module`` and call ``factory()``; the result must be an :class:`Adapter`.

    The working directory is put on ``sys.path`` (as ``python -m`` does), so a module of the
    user's project is found when the command runs from its root.
    """
    module_name, sep, factory_name = target.partition(":")
    if not sep or not module_name or not factory_name:
        raise TargetError(f"target '{target}' must have the form 'module:factory' (e.g. repro.audit.torch_adapter:adapter)")
    interrupts.watch()   # a KeyboardInterrupt the user's module raises is its error; the user's Ctrl-C ends the run
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and module_name.startswith(err.name):
            raise TargetError(f"target '{target}': module '{module_name}' not found (is it on PYTHONPATH?)") from None
        raise TargetError(f"target '{target}': importing module '{module_name}' failed: {err}") from err
    except (Exception, SystemExit, KeyboardInterrupt) as err:  # noqa: BLE001 - the user's module is foreign code;
        if interrupts.from_user(err):                             # it may not end the run
            raise
        raise TargetError(f"target '{target}': importing module '{module_name}' raised {type(err).__name__}: {err}") from err
    try:
        factory = getattr(module, factory_name)
    except AttributeError:
        public = sorted(
            n for n, v in vars(module).items()
            if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__
        )
        hint = f"; it has {', '.join(public[:12])}" if public else ""
        raise TargetError(f"target '{target}': module '{module_name}' has no attribute '{factory_name}'{hint}") from None
    if isinstance(factory, Adapter):
        return factory
    if not callable(factory):
        raise TargetError(f"target '{target}': '{factory_name}' is a {type(factory).__name__}, not a factory (a callable)")
    try:
        adapter = factory()
    except (Exception, SystemExit, KeyboardInterrupt) as err:  # noqa: BLE001 - nor may its factory
        if interrupts.from_user(err):
            raise
        raise TargetError(f"target '{target}': calling {factory_name}() raised {type(err).__name__}: {err}") from err
    if not isinstance(adapter, Adapter):
        raise TargetError(
            f"target '{target}': {factory_name}() returned {type(adapter).__name__}, not an adapter "
            "(a subclass of repro.audit.adapter.Adapter)"
        )
    return adapter
