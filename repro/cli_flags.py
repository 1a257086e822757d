"""Flags that several verbs share, defined once: where a verb computes (``--device``, ``--precision``),
and old flag names kept as deprecated aliases (``--profile`` for a recipe is ``--recipe`` now).

Every verb that computes with a model (``train``, ``evaluate``, ``translate``, ``reproduce``,
``average``, ``check``, ``audit``) takes ``--device`` (:data:`repro.runtime.DEVICE_HELP`) and resolves
one :class:`~repro.runtime.Runtime` from it, which everything it runs receives (``check`` and
``audit`` through :mod:`repro.audit.on_device`; their default is ``cpu``).
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


def add_lineage_argument(parser: argparse.ArgumentParser, doing: str) -> None:
    """``--allow-no-lineage``: use a checkpoint without a readable lineage (:mod:`repro.train.lineage`)."""
    parser.add_argument("--allow-no-lineage", action="store_true",
                        help=f"{doing} a checkpoint without a readable lineage (the SHA-256 of its vocabulary and "
                             "training data) instead of refusing it; the output says so")


def runtime_from_args(args: argparse.Namespace, verb: str, resolve_precision: bool = True) -> Runtime:
    """The runtime ``--device`` and ``--precision`` name, said on stderr; without
    ``resolve_precision`` only the device (the verb loads its model first: :func:`runtime_for_loaded`)."""
    if not resolve_precision:
        return Runtime.device_only(getattr(args, "device", None) or "auto")
    runtime = Runtime.resolve(getattr(args, "device", None) or "auto", getattr(args, "precision", None) or "auto")
    print(f"repro {verb}: {runtime.describe()}", file=sys.stderr)
    return runtime


def runtime_for_loaded(runtime: Runtime, model, args: argparse.Namespace, verb: str) -> Runtime:
    """``runtime`` with ``--precision`` resolved at the loaded model's sizes, said on stderr."""
    runtime = runtime.for_model(model, getattr(args, "precision", None) or "auto")
    print(f"repro {verb}: {runtime.describe()}", file=sys.stderr)
    return runtime


def deprecated_alias(new: str) -> type[argparse.Action]:
    """An argparse action for an old flag name that still works and says, on stderr, which flag replaces it."""

    class Deprecated(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
            print(f"{parser.prog}: warning: {option_string} is deprecated; use {new} (same values)", file=sys.stderr)
            setattr(namespace, self.dest, values)

    return Deprecated


def add_pass_through(sub: argparse._SubParsersAction, verb: str, help_text: str, entries: dict[str, str],
                     run) -> None:
    """A verb whose first argument names an entry point with flags of its own (``repro bench NAME ...``):
    ``run(name, rest)`` runs it with the rest of the command line."""
    parser = sub.add_parser(verb, help=help_text, formatter_class=argparse.RawDescriptionHelpFormatter,
                            description="\n".join(f"{k:16s} {v}" for k, v in entries.items()))
    parser.add_argument("name", choices=sorted(entries), metavar="NAME", help=", ".join(sorted(entries)))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its own flags (NAME --help)")
    parser.set_defaults(func=lambda args: int(run(args.name, args.args) or 0))
