"""Which local claims run which function of the code under mutation: the per-mutant test selection
of the mutation benchmark (:mod:`repro.benchmarks.mutation`).

Every local claim runs once, alone, as ``repro check`` runs it (the CPU, seed 0), under a profiler
that records each Python function of the mutated files it calls (its qualified name). A mutant is
then checked by the claims that called the function it lies in: a mistake in a function no claim
calls cannot change a verdict of ``repro check`` run in this process. Calls made in processes
the claims spawn (the DDP claims' ranks) are not seen here, so the benchmark checks a mutant in a
function no claim called, one outside any function (module constants, class bodies, defaults) and
every survivor of its subset with the full ``repro check``.

    python -m repro.benchmarks.mutation_map --files repro/model/attention.py ... --out MAP.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from repro.argtypes import OneLineParser
from repro.audit.on_device import on_device
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import run_checks, select_claims
from repro.files.writer import atomic_write_text
from repro.runtime import Runtime


def trace_claims(files: list[Path]) -> dict[str, Any]:
    """``{"claims": [ids in check order], "calls": {file: {qualname: [claim ids]}}, "seconds": {id: s}}``."""
    wanted = {str(f.resolve()): str(f) for f in files}
    known: dict[CodeType, str | None] = {}
    seen: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        where = known.get(code, "")
        if where == "":
            where = known[code] = wanted.get(code.co_filename)
        if where is not None:
            seen.add((where, code.co_qualname))

    target = on_device(ReproAdapter(), Runtime.device_only("cpu"))
    calls: dict[str, dict[str, list[str]]] = {str(f): {} for f in files}
    ids, seconds = [], {}
    for claim in select_claims("local"):
        seen.clear()
        began = time.perf_counter()
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            run_checks([claim], target)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        seconds[claim.id] = round(time.perf_counter() - began, 3)
        ids.append(claim.id)
        for where, qualname in seen:
            calls[where].setdefault(qualname, []).append(claim.id)
    return {"claims": ids, "calls": calls, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", nargs="+", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    atomic_write_text(args.out, json.dumps(trace_claims(args.files), indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
