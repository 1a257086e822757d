"""``repro submit EXPERIMENT --cluster PROFILE``: an experiment of the paper as SLURM jobs.

``repro submit table3 --scale small --cluster PROFILE``: Table 3's rows at a named scale, ``--seeds``
each (default 3), as one array; submitted again, it leaves out the jobs whose results are stored and
resumes the others from their checkpoints (their folders are the scale's, not the submission's)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from repro import limits
from repro.argtypes import name_list, output_dir, positive_int, script_text
from repro.cluster.executor import executor_parameters, new_submission_id, resolve_executor, submit_jobs
from repro.cluster.experiments import EXPERIMENTS, SCALED_SEEDS, Plan, finished, plan_jobs, scale_signature
from repro.cluster.profiles import load_profile
from repro.cluster.submission_checks import check_jobs, check_parallel
from repro.cluster.ledger import Ledger, default_state_dir
from repro.errors import ConfigError
from repro.model.precision import PRECISIONS
from repro.paths import outside_inputs
from repro.recipes import SCALES, get_scale, parse_assignments
from repro.results import DEFAULT_RESULTS
from repro.train.update_plan import plan_update


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("submit", help="submit one of the paper's experiments to SLURM (submitit)",
                              description=__doc__)
    p.add_argument("experiment", choices=sorted(EXPERIMENTS), metavar="EXPERIMENT",
                   help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--cluster", required=True, metavar="PROFILE",
                   help="cluster profile: a name in slurm/ (paper-p100, h100, local) or a .toml path")
    p.add_argument("--dry-run", action="store_true", help="print the jobs it would submit; submit nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--executor", choices=("auto", "slurm", "local"), default=None,
                   help="override the profile's executor (local: submitit's LocalExecutor, no SLURM)")
    p.add_argument("--state-dir", type=output_dir, default=None, help="ledger and job folders (default runs/cluster)")
    p.add_argument("--results-dir", type=output_dir, default=str(DEFAULT_RESULTS), help="results store the jobs write to")
    p.add_argument("--data-dir", default=None, help="data directory the jobs read (default: REPRO_DATA_DIR)")
    p.add_argument("--job-name", default=None, type=script_text, help="SLURM job name (default repro-EXPERIMENT)")
    p.add_argument("--timeout-min", type=positive_int, default=None, help="override the profile's time limit")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a recipe field for every job (VALUE as JSON), e.g. max_steps=10; "
                        "a run changed so is recorded at scale 'reduced:'")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="fp32, bf16 or auto for every job (default: the recipe's, auto: bf16 on GPUs that have it, "
                        "TF32 matrix products where fp32 runs); recorded in each result's provenance")
    p.add_argument("--scale", choices=sorted(SCALES), default=None,
                   help="table3 only: the rows at a named scale (small: Multi30k; medium: the WMT sample), each from "
                        "the scale's base row by the paper's change, recorded as 'scale: <name>: ...'")
    p.add_argument("--seeds", type=positive_int, default=None, metavar="N",
                   help=f"with --scale: seeds per row (default {SCALED_SEEDS})")
    p.add_argument("--rows", default=None, metavar="ROW,ROW", type=name_list,
                   help="with --scale: only these rows of Table 3 (default all 20), e.g. base,A-h1,D-drop0.0")
    p.add_argument("--parallel", type=positive_int, default=1, metavar="N",
                   help="local executor: run N of the array's jobs at a time (default 1: one after another)")
    p.add_argument("--force", action="store_true",
                   help=f"allow more than {limits.SEEDS.soft} --seeds (at most {limits.SEEDS.hard})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.cluster)
    state_dir = Path(args.state_dir or default_state_dir()).resolve()
    results_dir = Path(args.results_dir).resolve()
    outside_inputs(state_dir, [(results_dir, "results store (--results-dir)", None)], "state folder (--state-dir)")
    job_name = args.job_name or f"repro-{args.experiment}"
    ledger = Ledger(state_dir)
    submission_id = new_submission_id()
    overrides = parse_assignments(args.overrides)
    if args.scale is None and (args.seeds is not None or args.rows is not None):
        raise ConfigError("--seeds and --rows apply to a scaled Table 3 only (repro submit table3 --scale NAME)")
    if args.scale is not None and args.experiment != "table3":
        raise ConfigError(f"--scale applies to experiment table3 only, not {args.experiment}")
    if args.seeds is not None:   # bounded before a single job is planned
        limits.SEEDS.check(args.seeds, force=args.force)
    if args.timeout_min is not None:
        limits.TIMEOUT_MIN.check(args.timeout_min)
    if args.parallel != 1:
        check_parallel(args.parallel, resolve_executor(args.executor, profile))
    runs_dir = state_dir / "jobs" / submission_id  # each job's out_dir: checkpoints, metrics
    signature = None
    if args.scale is not None:  # the scale's folders, so that a later submission resumes its jobs
        signature = scale_signature(get_scale(args.scale), overrides)
        runs_dir = state_dir / "jobs" / f"table3-{args.scale}-{signature}"
    rows = args.rows
    specs = plan_jobs(args.experiment, Plan(profile, runs_dir, args.data_dir, overrides, args.precision,
                                            scale=args.scale, seeds=args.seeds or SCALED_SEEDS, rows=rows))
    for warning in check_jobs(specs, profile, overrides, args.data_dir):
        print(f"repro submit: WARNING: {warning}", file=sys.stderr)
    done = [s.name for s in specs if finished(s, results_dir)]
    specs = [s for s in specs if s.name not in done]
    if args.dry_run:
        sbatch = executor_parameters(profile, job_name, args.timeout_min,
                                     "local" if (args.executor or profile.executor) == "local" else "slurm")
        jobs = []
        for spec in specs:
            update = plan_update(int(spec.train["tokens_per_batch"]), profile.world_size,
                                 int(spec.train["max_tokens_per_device"]))
            config = {**spec.train, **({"synthetic": spec.synthetic} if spec.synthetic else {})}
            jobs.append({"name": spec.name, "recipe": spec.recipe, "claims": list(spec.claims), "config": config,
                         "decode": dict(spec.decode),
                         "resources": {**profile.resources(), "update": update.to_dict(), "submitit": sbatch},
                         **({"scaled": dict(spec.scaled)} if spec.scaled else {})})
        plan = {"experiment": args.experiment, "profile": profile.name, "profile_path": str(profile.path),
                "executor": args.executor or profile.executor, "submission": submission_id, "array": len(jobs) > 1,
                "results_dir": str(results_dir), "jobs": jobs}
        if args.scale is not None:
            plan.update(scale=args.scale, signature=signature, seeds=args.seeds or SCALED_SEEDS, finished=done)
        if args.json:
            print(json.dumps(plan, indent=2))
        else:
            _print_plan(plan)
        return 0

    if not specs:
        print(json.dumps({"experiment": args.experiment, "submitted": 0, "finished": done}) if args.json else
              f"nothing to submit: the {len(done)} job(s) of {args.experiment} at scale {args.scale} have stored their "
              f"results in {results_dir}")
        return 0
    kind = resolve_executor(args.executor, profile)
    submitted = submit_jobs(specs, profile, kind=kind, ledger=ledger, results_dir=results_dir,
                            job_name=job_name, submission_id=submission_id, timeout_min=args.timeout_min,
                            parallel=args.parallel)
    record = submitted.record
    if args.json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        print(f"submitted {args.experiment} ({len(record.jobs)} job(s)) to {kind} with profile {profile.name}: "
              f"submission {record.id}" + (f"; {len(done)} finished job(s) left out" if done else ""))
        for job in record.jobs:
            print(f"  {job['job_id']:>12}  {job['name']}")
        print(f"follow with: repro status {record.id} --state-dir {state_dir}")
    return 0


def _print_plan(plan: dict[str, Any]) -> None:
    print(f"dry run: {plan['experiment']} on {plan['profile']} ({plan['executor']}), {len(plan['jobs'])} job(s)"
          + (" as one array" if plan["array"] else "")
          + (f" at scale {plan['scale']} (signature {plan['signature']}), {plan['seeds']} seed(s) per row, "
             f"{len(plan['finished'])} finished job(s) left out" if "scale" in plan else ""))
    for job in plan["jobs"]:
        r, c = job["resources"], job["config"]
        print(f"  {job['name']:<22} preset={c['preset']:<10} steps={c['max_steps']:<7} "
              f"{r['nodes']}x{r['tasks_per_node']} task(s), gpus/node={r['gpus_per_node']}, "
              f"{r['time_limit_min']} min")
        u = r["update"]
        print(f"  {'':<22} update: {u['world_size']} device(s) x {u['accumulation']} pass(es) x ~"
              f"{u['tokens_per_micro_batch']} real tokens per side (a pass padded to <= {u['max_tokens_per_device']}) "
              f"= ~{u['tokens_per_batch']} source + ~{u['tokens_per_batch']} target tokens")
