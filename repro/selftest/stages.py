"""The stages of ``repro selftest``, in the order they run.

The two benchmarks run first, each with the device to itself (a peak measured beside other work
reads low: the H200's 634 TFLOP/s against 782 alone); then the reduced Table 2 job, whose step time
is the figure the stage checks; then the cuda-marked tests and the Table 3 subset, each in a process
of its own, beside the claims: none of these times anything. With ``--quick`` every stage runs at toy size (CI runs ``--device cpu --quick``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from repro.audit.on_device import repro_on
from repro.errors import ResultError
from repro.files.reader import read_json
from repro.files.writer import atomic_write_text, make_dirs, open_log
from repro.benchmarks import gpu as gpu_benchmark
from repro.benchmarks import job_path
from repro.checks import run_checks, select_claims
from repro.claims.runner import usable_cores
from repro.cluster.executor import submit_jobs
from repro.cluster.experiments import Plan, plan_jobs
from repro.cluster.ledger import Ledger
from repro.cluster.profiles import load_profile
from repro.pipeline.table3_small import reproduce_table3
from repro.results import ResultStore
from repro.selftest.diagnostics import KEYS as DIAGNOSTICS
from repro.selftest.stage import Context, Skip, Stage, StageFailed, Target
from repro.selftest.toy_data import toy_translation_data, wmt_sample_data

#: The claims whose arithmetic a GPU changes (TF32, fused attention kernels): the quick run's subset.
QUICK_CLAIMS = ("sec3.eq1", "sec3.eq2", "sec3.stacks", "sec3.attention", "sec5.label-smoothing")

#: Issue 42's targets for one H100/H200 (the GPU-only ones; utilisation of the measured bf16 peak).
MFU_BASE, MFU_BIG, PEER_RATIO = 0.40, 0.55, 1.5
JOB_PATH_RATIO, JOB_PADDING = job_path.TARGET_RATIO, job_path.TARGET_PADDING

#: A model small enough for a toy run on two CPU cores, and the toy run's recipe changes.
TOY_MODEL = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}
TOY_TRAIN = {"vocab_size": 300, "tokens_per_batch": 400, "max_tokens_per_device": 400, "warmup_steps": 2,
             "max_len": 60, "max_len_offset": 5, "log_every": 1}


# -- the benchmarks -------------------------------------------------------------------------------

def gpu_bench(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """``repro bench gpu``: the paper's update, base and big, eager and compiled, against the peer."""
    args = ["--device", ctx.device, "--out", str(ctx.out_dir / "gpu-bench.json"),
            "--note", f"repro selftest{' --quick' if ctx.quick else ''}: {gpu_sharing(ctx)}"]
    if ctx.quick:
        args += ["--models", "base", "--sentences", "4", "--length", "8", "--vocab", "500", "--steps", "1",
                 "--warmup", "1", "--peak-n", "128", "--peak-seconds", "0.05", "--no-compile", "--precision", "fp32"]
    elif ctx.gpu:
        args += ["--steps", "4", "--block", "4", "--warmup", "2", "--peak-seconds", "2"]
    found = gpu_benchmark.main(args)
    figures: dict[str, Any] = {"peak_tflops": found["peak_tflops"], "precision": found["precision"],
                               "conditions": found["conditions"]}
    for size, model in found["models"].items():
        figures[size] = {"mfu": model["mfu"], "peer_ratio": model["peer_ratio"], "best_case": model["best_repro_case"],
                         "s_per_step": model["cases"][model["best_repro_case"]]["s_per_step"],
                         **{key: model[key] for key in DIAGNOSTICS if key in model}}
    figures["seconds"] = {part: round(sum(m["seconds"][part] for m in found["models"].values()), 1)
                          for part in ("compile", "warmup", "measured")}
    targets = []
    if ctx.gpu and not ctx.quick:
        targets = [Target("MFU base (of the measured bf16 peak)", figures["base"]["mfu"], MFU_BASE),
                   Target("MFU big (of the measured bf16 peak)", figures["big"]["mfu"], MFU_BIG),
                   Target("base update against torch.nn.Transformer", figures["base"]["peer_ratio"], PEER_RATIO),
                   Target("big update against torch.nn.Transformer", figures["big"]["peer_ratio"], PEER_RATIO)]
    return figures, targets


def job_path_bench(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """The job's own path (batcher, accumulation, compiled objective, prefetch, Adam) against the
    fixed-shape update at the same tokens per update."""
    found = job_path.measure(device=ctx.device, quick=ctx.quick, data_dir=str(ctx.data_dir),
                             out=ctx.out_dir / "job-path-bench.json", work_dir=ctx.out_dir / "job-path",
                             note=f"repro selftest: {gpu_sharing(ctx)}")
    figures = {"ratio": found["ratio"], "compiled": found["compiled"], "compilations": found["compilations"],
               "compilations_while_measured": found["compilations_while_measured"],
               "compile_s": found["compile_s"], "plan": found["plan"],
               **{f"{case}_tokens_per_s": found["cases"][case]["tokens_per_s"] for case in found["cases"]},
               **{f"{case}_s_per_update": found["cases"][case]["s_per_update"] for case in found["cases"]},
               "host_ms_per_update": {case: found["cases"][case]["host_ms_per_update"] for case in found["cases"]},
               **{key: found[key] for key in DIAGNOSTICS if key in found}}
    if found["compiled"] and found["compilations"] > found["compilations_bound"]:
        reasons = found["recompile_reasons"]
        raise StageFailed(f"the job's objective compiled {found['compilations']} times, more than its bound "
                          f"{found['compilations_bound']}" + (f"; the guard that failed: {reasons[0]}" if reasons
                                                              else ""), figures)
    targets = [Target("job's padding, fraction of a pass's tokens", found["padding_fraction"], JOB_PADDING,
                      at_least=False),
               Target("job path against the fixed-shape update (tokens per second)", found["ratio"], JOB_PATH_RATIO)] \
        if ctx.gpu and not ctx.quick else []
    return figures, targets


def gpu_sharing(ctx: Context) -> str:
    """Whether other processes use the GPU now (``nvidia-smi``), for the benchmarks' conditions."""
    if not ctx.gpu:
        return "on the CPU"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "GPU sharing unknown (no nvidia-smi)"
    index = ctx.runtime.device.index or 0
    try:
        out = subprocess.run([smi, "-i", str(index), "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"GPU sharing unknown ({err})"
    others = [p for p in (line.strip() for line in out.splitlines()) if p and p != str(os.getpid())]
    return "the GPU to itself (nvidia-smi lists no other compute process)" if not others else \
        f"the GPU SHARED with {len(others)} other process(es) (pids {', '.join(others[:5])}): figures read low"


# -- the reduced Table 2 job ----------------------------------------------------------------------

def table2_reduced(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """``repro submit table2-base-ende --executor local`` at a reduced size: train, average the last 5
    checkpoints, evaluate on the job's device, store; then the stored step time against its interval."""
    root = ctx.out_dir / "table2"
    if ctx.quick:
        data = toy_translation_data(ctx.data_dir, root / "data", {"train": 200, "dev": 6, "test": 6})
        overrides = {**TOY_TRAIN, "model_overrides": TOY_MODEL, "max_steps": 8, "checkpoint_every_steps": 1}
    else:
        data = wmt_sample_data(ctx.data_dir, root / "data", {"dev": 200, "test": 200})
        overrides = {"max_steps": 150, "checkpoint_every_steps": 25, "log_every": 10}
    overrides.update(dataset=str(data), device=ctx.device if not ctx.gpu else "cuda")
    profile = dataclasses.replace(load_profile("h100-x1" if ctx.gpu else "local"), executor="local")
    specs = plan_jobs("table2-base-ende", Plan(profile, root / "runs", str(ctx.data_dir), overrides))
    results = root / "results"
    submitted = submit_jobs(specs, profile, kind="local", ledger=Ledger(root / "state"), results_dir=results,
                            job_name="repro-selftest-table2")
    [job] = submitted.jobs
    deadline = time.monotonic() + (600 if ctx.gpu else 900)
    while not job.done(force_check=True):
        if time.monotonic() > deadline:
            job.cancel(check=False)
            raise StageFailed(f"the job did not finish in time; its log: {root / 'state'}")
        time.sleep(1.0)
    summary = job.result()
    figures: dict[str, Any] = {"steps": summary.get("steps"), "device": summary.get("device"),
                               "precision": summary.get("precision")}
    return stored_table2(ResultStore(results).read_all(), figures)


def stored_table2(records: list[Any], figures: dict[str, Any]) -> tuple[dict[str, Any], list[Target]]:
    """What the reduced Table 2 job stored: a BLEU, and a step time inside its own interval."""
    stored = {r.claim_id: r for r in records}
    step, bleu = stored.get("sec5.step-time.base"), stored.get("table2.bleu.base-ende")
    figures = {**figures, "stored": sorted(stored), "bleu": bleu.measured if bleu else None,
               "checkpoints_averaged": bleu.provenance.extra.get("checkpoints_averaged") if bleu else None}
    if bleu is None:
        raise StageFailed("the job stored no BLEU (table2.bleu.base-ende)", figures)
    if step is None:
        raise StageFailed("the job stored no step time (sec5.step-time.base)", figures)
    low, high = step.ci95 if step.ci95 is not None else (None, None)
    figures.update(step_s=step.measured, step_ci95=[low, high], step_time=step.extra.get("step_time", {}))
    inside = low is not None and low <= step.measured <= high
    if not inside:
        raise StageFailed(f"the stored step time {step.measured} s lies outside its own interval [{low}, {high}]",
                          figures)
    return figures, [Target("stored step time inside its interval (1: yes)", 1.0, 1.0)]


# -- the claims, Table 3, the tests ----------------------------------------------------------------

def claims_on_device(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """Every local claim on the CPU and on the device, fed the same seeded inputs: no verdict may change."""
    claims = select_claims("local", QUICK_CLAIMS if ctx.quick else ())
    jobs = claim_jobs()
    with cpu_verdicts(ctx, QUICK_CLAIMS if ctx.quick else (), jobs) as cpu_run:   # processes of their own, meanwhile
        records = run_checks(claims, repro_on(ctx.runtime) if jobs == 1 else None, jobs=jobs,
                             make_target=partial(repro_on, ctx.runtime))
    device = {r.claim.id: r.status.value for r in records}
    cpu, cpu_details = cpu_run.verdicts()
    missing = sorted(set(device) ^ set(cpu))
    if missing:
        raise StageFailed(f"the CPU's run and the device's checked different claims: {', '.join(missing[:5])}")
    changed = {claim: f"{cpu[claim]} on the CPU, {device[claim]} on {ctx.device}" for claim in cpu
               if device[claim] != cpu[claim]}
    # an error is no verdict, on either side: each is named with what it said
    errors = {**{f"{r.claim.id} on {ctx.device}": r.detail for r in records if r.status.value == "error"},
              **{f"{claim} on the CPU": cpu_details[claim] for claim, status in cpu.items() if status == "error"}}
    figures = {"claims": len(claims), "processes": jobs, "changed": changed, "errors": sorted(errors),
               "error_details": errors, "on_device": dict(Counter(device.values())),
               "on_cpu": dict(Counter(cpu.values()))}
    if changed or errors:
        raise StageFailed(f"{len(changed)} verdict(s) changed on {ctx.device}, {len(errors)} error(s)", figures)
    return figures, [Target("claims whose verdict changed from the CPU's", float(len(changed)), 0, at_least=False)]


def claim_jobs() -> int:
    """Processes for each side of the claims stage (the device's claims, the CPU's): a quarter of the
    cores, at most 4 (on the H200's 16 cores the cuda tests' 4 workers and the Table 3 subset run
    beside them); 1 on a small host."""
    return max(1, min(4, usable_cores() // 4))


class CpuVerdicts:
    """``repro check`` on the CPU in a subprocess (its verdicts are the baseline), started now and read
    at :meth:`verdicts`; the results store it reads is empty, as the device's run has none."""

    def __init__(self, ctx: Context, only: Sequence[str], jobs: int = 1) -> None:
        self.json = ctx.out_dir / "claims-cpu.json"
        empty = ctx.out_dir / "claims-cpu-results"
        make_dirs(empty, ctx.out_dir)
        package_root = str(Path(__file__).resolve().parents[2])
        # the CPU's verdicts, from a process that cannot reach a GPU (nor can the ranks it forks: on the
        # H200 three group probes erred in such a process with the GPU visible, and passed in-process)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "",
               "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        command = [sys.executable, "-m", "repro", "check", "--device", "cpu", "--json", str(self.json),
                   "--results", str(empty), "--jobs", str(jobs), *(arg for prefix in only for arg in ("--only", prefix))]
        self.log = open_log(ctx.out_dir / "claims-cpu.log", within=ctx.out_dir)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def verdicts(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each claim's status, and its detail (what an error said)."""
        code = self.process.wait(timeout=900)
        self.log.close()
        if code not in (0, 1) or not self.json.is_file():
            raise StageFailed(f"repro check on the CPU exited {code}; its log: {self.log.name}")
        records = read_json(self.json, "the CPU's verdicts", error=ResultError, allow_nan=True)
        return {r["id"]: r["status"] for r in records}, {r["id"]: str(r.get("detail") or "") for r in records}

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()


@contextlib.contextmanager
def cpu_verdicts(ctx: Context, only: Sequence[str], jobs: int = 1) -> Iterator[CpuVerdicts]:
    run = CpuVerdicts(ctx, only, jobs)
    try:
        yield run
    except BaseException:
        run.close()
        raise


def table3_subset(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """Two rows of Table 3 at scale small, one seed each, trained and evaluated by the cluster's job code,
    in a process of its own, beside the claims (neither times anything); this stage's thread waits."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        figures, failure = pool.submit(table3_in_a_process, ctx.device, ctx.gpu, ctx.quick, str(ctx.out_dir),
                                       str(ctx.data_dir)).result(timeout=900)
    if failure:
        raise StageFailed(failure, figures)
    return figures, []


def table3_in_a_process(device: str, gpu: bool, quick: bool, out_dir: str, data_dir: str) -> tuple[dict[str, Any], str]:
    """The Table 3 subset's work (:func:`table3_subset`): its figures and what failed ("" when nothing)."""
    root = Path(out_dir) / "table3"
    overrides: dict[str, Any] = {"device": device if not gpu else "cuda"}
    if quick:
        data = toy_translation_data(Path(data_dir), root / "data", {"train": 200, "dev": 6, "test": 6})
        overrides.update(TOY_TRAIN, dataset=str(data), max_steps=3, checkpoint_every_steps=3)
        rows: tuple[str, ...] = ("base",)
    else:
        overrides.update(max_steps=60, checkpoint_every_steps=60, compile="off")
        rows = ("base", "A-h1")
    summary = reproduce_table3(rows=rows, seeds=1, out_dir=root / "runs", reports_dir=root / "reports",
                               data_dir=data_dir, fresh=True, overrides=overrides, write_report=False,
                               say=lambda msg: print(f"repro selftest:   table3: {msg}", file=sys.stderr, flush=True))
    records = [r for r in ResultStore(root / "reports" / "results").read_all() if r.claim_id.startswith("table3-small.")]
    figures = {"rows": list(rows), "jobs_run": summary.get("jobs_run"), "records": len(records),
               "seconds_per_row": summary.get("seconds_per_row")}
    if len(records) != 2 * len(rows):   # a BLEU and a perplexity per row
        return figures, f"{len(records)} records stored for {len(rows)} row(s); expected {2 * len(rows)}"
    return figures, ""


#: The cuda-marked test the claims stage already is (every local claim on the GPU, against the CPU).
COVERED_BY_CLAIMS = "tests/device/test_checks_on_device.py::test_every_local_claim_on_a_real_gpu"


def cuda_tests(ctx: Context) -> tuple[dict[str, Any], list[Target]]:
    """``pytest -m cuda`` from the checkout (the tests' real-GPU variants)."""
    if not ctx.gpu:
        raise Skip("no CUDA device: the cuda-marked tests run on a GPU only")
    if ctx.checkout is None:
        raise Skip("repro is installed (a wheel), not a checkout: there is no tests/ folder to run")
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-n", "4",
               "--deselect", COVERED_BY_CLAIMS, "tests"]
    done = subprocess.run(command, cwd=ctx.checkout, capture_output=True, text=True, timeout=420, check=False)
    output = done.stdout + done.stderr
    atomic_write_text(ctx.out_dir / "cuda-tests.log", output, within=ctx.out_dir)
    summary_line = pytest_summary(output)
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|"
                                                     r"warnings?|errors?)", summary_line)}
    figures = {"counts": counts, "summary": summary_line, "log": str(ctx.out_dir / "cuda-tests.log"),
               "deselected": [COVERED_BY_CLAIMS]}
    if done.returncode != 0:
        raise StageFailed(f"pytest -m cuda exited {done.returncode}: {summary_line or 'no summary line'}", figures)
    return figures, []


def pytest_summary(output: str) -> str:
    """pytest's final summary line (``10 passed, 1 skipped, 1 warning in 43.88s``) wherever it stands in
    ``output``: a plugin's warning may follow it."""
    lines = [line.strip(" =") for line in output.splitlines()
             if re.search(r"\b\d+ (passed|failed|skipped|errors?|deselected)\b.* in [\d.]+s", line)
             or re.search(r"\bno tests ran in [\d.]+s", line)]
    return lines[-1] if lines else ""


#: In order. The benchmarks and the reduced job time what they run, so they run alone; the cuda tests and
#: the Table 3 subset (each a process of its own) then run beside the claims, which time nothing.
STAGES = (
    Stage("gpu-bench", "the paper's update, base and big, against torch.nn.Transformer (repro bench gpu)", gpu_bench,
          gpu_s=200, quick_s=20),
    Stage("job-path-bench", "the training job's own path against the fixed-shape update", job_path_bench,
          gpu_s=45, quick_s=30),
    Stage("table2-reduced", "a reduced table2-base-ende through the local executor: train, average, evaluate, store",
          table2_reduced, gpu_s=65, quick_s=60),
    Stage("cuda-tests", "the cuda-marked tests (pytest -m cuda)", cuda_tests, background=True),
    Stage("table3-small", "a short Table 3 subset at scale small (cluster job code)", table3_subset,
          background=True),
    Stage("claims", "every local claim on the device, its verdict against the CPU's", claims_on_device,
          gpu_s=70, quick_s=60),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)


def checkout_root() -> Path | None:
    """The repository repro runs from, when it runs from one (its tests/ beside the package)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "tests" / "conftest.py").is_file() and (root / "pyproject.toml").is_file() else None
