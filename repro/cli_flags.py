"""Flags that several verbs share, defined once: where a verb computes (``--device``, ``--precision``).

Every verb that computes with a model (``train``, ``evaluate``, ``translate``, ``reproduce``,
``average``, ``audit``) takes ``--device`` (:data:`repro.runtime.DEVICE_HELP`) and resolves one
:class:`~repro.runtime.Runtime` from it, which everything it runs receives.
"""

from __future__ import annotations

import argparse
import sys

from repro.errors import ConfigError
from repro.model.precision import PRECISIONS
from repro.runtime import DEVICE_HELP, Runtime, check_device_name


def device_name(text: str) -> str:
    """argparse type of ``--device``: a bad value is a one-line usage error (exit 2)."""
    try:
        return check_device_name(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_device_argument(parser: argparse.ArgumentParser, default: str | None = "auto", what: str = "") -> None:
    parser.add_argument("--device", type=device_name, default=default, metavar="DEVICE",
                        help=f"where to compute: {DEVICE_HELP}" + (f"; {what}" if what else "")
                             + (f" (default {default})" if default else ""))


def add_precision_argument(parser: argparse.ArgumentParser, default: str | None = "auto") -> None:
    parser.add_argument("--precision", choices=PRECISIONS, default=default,
                        help="fp32, bf16 (autocast; scores in fp32) or auto: bf16 where the device computes it "
                             "natively (the choice and its reason go to stderr)"
                             + (f" (default {default})" if default else ""))


def runtime_from_args(args: argparse.Namespace, verb: str, resolve_precision: bool = True) -> Runtime:
    """The runtime ``--device`` and ``--precision`` name, said on stderr; without
    ``resolve_precision`` only the device (the verb loads its model first: :func:`runtime_for_loaded`)."""
    if not resolve_precision:
        return Runtime.resolve(getattr(args, "device", None) or "auto", "fp32")
    runtime = Runtime.resolve(getattr(args, "device", None) or "auto", getattr(args, "precision", None) or "auto")
    print(f"repro {verb}: {runtime.describe()}", file=sys.stderr)
    return runtime


def runtime_for_loaded(runtime: Runtime, model, args: argparse.Namespace, verb: str) -> Runtime:
    """``runtime`` with ``--precision`` resolved at the loaded model's sizes, said on stderr."""
    runtime = runtime.for_model(model, getattr(args, "precision", None) or "auto")
    print(f"repro {verb}: {runtime.describe()}", file=sys.stderr)
    return runtime
