"""How long `repro check` takes, and which claims take it: every local claim against repro's own
implementation, timed claim by claim (the target: under 60 s on 2 cores).

    python -m repro.benchmarks.check_time [--repeats 3] [--out reports/benchmarks/check_time.json]
"""

from __future__ import annotations

import argparse
import statistics
import time


from repro.argtypes import OneLineParser, positive_int
from repro.audit.repro_adapter import ReproAdapter
from repro.benchmarks.machine import environment, parse_benchmark_args, publish
from repro.checks import run_checks, select_claims


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=3)
    args = parse_benchmark_args(parser, argv)
    claims = select_claims("local")
    walls, per_claim = [], {}
    for _ in range(args.repeats):
        began = time.perf_counter()
        records = run_checks(claims, ReproAdapter())
        walls.append(time.perf_counter() - began)
        for r in records:
            per_claim.setdefault(r.claim.id, []).append(r.seconds)
    slowest = sorted(((statistics.median(v), k) for k, v in per_claim.items()), reverse=True)[:10]
    out = {
        "benchmark": "check_time", **environment(args.note), "claims": len(claims), "runs": len(walls),
        "wall_s_median": round(statistics.median(walls), 2), "wall_s_min": round(min(walls), 2),
        "wall_s_max": round(max(walls), 2),
        "slowest_claims_s": {k: round(s, 2) for s, k in slowest},
    }
    return publish(out, args.out)


if __name__ == "__main__":
    main()
