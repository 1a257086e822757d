"""Mutation testing of the code that produces the paper's numbers, by cosmic-ray: how many of the
mistakes a tool makes in it the claims (`repro check`) and the test suite notice.

cosmic-ray (the optional extra ``mutation``: ``pip install -e .[mutation]``) generates every
mutant of a group's files (reports/mutation/plan.toml); a seeded sample of them is run, one at a
time, in a copy of the checkout under the system's temporary folder (the checkout itself is never
mutated). A mutant is *killed* when its runner exits non-zero or runs past its timeout:

- ``check`` groups (the paper-level code): ``repro check`` restricted to the claims that call the
  mutated function (:mod:`repro.benchmarks.mutation_map`); a mutant outside any function or in a
  function no claim calls, and every survivor of its subset, runs the full ``repro check``, so a
  survivor is a survivor of ``repro check`` alone;
- ``tests`` groups (the machinery): the test files that import the group's modules.

Each group's rows go to reports/mutation/GROUP.json as they finish (a rerun resumes, keeping rows
whose file is unchanged); ``summary`` writes reports/mutation/summary.md and summary.json, the
score of each module being killed / (run - equivalent), the equivalent mutants listed with a reason
each in reports/mutation/equivalents.toml. A benchmark, not a CI step: run it at low priority,

    nice -n 19 python -m repro.benchmarks.mutation run --group model [--group train ...]
    python -m repro.benchmarks.mutation summary
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from repro.argtypes import OneLineParser, non_negative_int
from repro.benchmarks.mutation_summary import classify, write_summary
from repro.files.reader import read_bytes, read_text
from repro.files.writer import atomic_write_text, make_dirs, remove

ROOT = Path(__file__).resolve().parents[2]
HERE = Path("reports/mutation")
#: a mutant's runner may take this many times its claims' unmutated time (plus the start-up) before it is a timeout
TIMEOUT_FACTOR, START_S, FULL_TIMEOUT_S = 6.0, 120.0, 400.0


def _plan() -> dict[str, Any]:
    return tomllib.loads(read_text(ROOT / HERE / "plan.toml", "mutation plan"))


def group_files(group: dict[str, Any]) -> list[str]:
    return sorted({str(p.relative_to(ROOT)) for pattern in group["files"] for p in ROOT.glob(pattern)})


def _digest(root: Path, paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(root)).encode() + b"\0" + read_bytes(p, "source file"))
    return h.hexdigest()[:16]


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def _scratch(name: str) -> Path:
    """A fresh copy of the committed checkout (HEAD: what the rows name), compiled to hash-checked
    byte code (a mutated file is recompiled, the others are not)."""
    dest = Path(tempfile.gettempdir()) / f"repro-mutation-{name}"
    shutil.rmtree(dest, ignore_errors=True)
    make_dirs(dest)
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", "repro"],
                   cwd=dest, check=True)
    return dest


def _env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REPRO_CLAIMS_DIR"}
    env["PYTHONPATH"] = str(scratch)
    return env


def claim_map(scratch: Path, files: list[str], reuse: bool = False) -> dict[str, Any]:
    """The claims that call each function of ``files``, traced in ``scratch`` (cached in
    reports/mutation/claim_map.json, traced again when the package or the claims changed, unless
    ``reuse``: a stale map only narrows which claims run first, since a kill by any subset is a kill
    by the full check, and with ``--with-tests`` every survivor runs the full check)."""
    path = ROOT / HERE / "claim_map.json"
    key = _digest(scratch, [*(p for p in scratch.glob("repro/**/*.py") if "benchmarks" not in p.parts),
                            *scratch.glob("claims/*")])
    if path.exists():
        cached = json.loads(read_text(path, "claim map"))
        if (cached.get("source_digest") == key or reuse) and set(files) <= set(cached["calls"]):
            if cached.get("source_digest") != key:
                print("mutation: reusing a claim map traced at another source", file=sys.stderr)
            return cached
    everything = sorted({f for g in _plan()["groups"].values() for f in group_files(g)} | set(files))
    out = scratch / "claim_map.json"
    subprocess.run([sys.executable, "-m", "repro.benchmarks.mutation_map", "--out", str(out), "--files", *everything],
                   cwd=scratch, env=_env(scratch), check=True)
    traced = json.loads(read_text(out, "claim map")) | {"source_digest": key}
    atomic_write_text(path, json.dumps(traced, indent=1, sort_keys=True) + "\n")
    return traced


def enclosing_function(source: str, line: int) -> str | None:
    """The qualified name (as ``co_qualname`` spells it) of the innermost function whose body holds
    ``line``; ``None`` at module or class level (a default or a decorator runs in the scope around)."""

    def walk(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                found = walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                if not child.body[0].lineno <= line <= (child.end_lineno or child.lineno):
                    continue
                found = walk(child, f"{name}.<locals>.") or name
            else:
                found = walk(child, prefix)
            if found:
                return found
        return None

    return walk(ast.parse(source), "")


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The ((line, column), (end line, end column)) of each annotation of a module that postpones
    them (PEP 563): a mutant inside one is never evaluated, so it is equivalent by construction."""
    tree = ast.parse(source)
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in tree.body):
        return []
    notes: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            notes += [a.annotation for a in every if a is not None and a.annotation is not None]
            notes += [node.returns] if node.returns else []
        elif isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0)) for n in notes]


def _in_annotation(spec: Any, spans: dict[str, list]) -> bool:
    at = tuple(spec.start_pos)
    return any(start <= at < end for start, end in spans[str(spec.module_path)])


def _check_command(claims: list[str] | None, report: Path) -> str:
    only = "".join(f" --only {c}" for c in claims or [])
    return f"{sys.executable} -m repro check --json {report}{only}"


def _tests_for(files: list[str]) -> list[str]:
    """The tests of ``files``: the test files that import one of their modules, and those of the
    module's own package (tests/<package>/) that name it (its file's stem as a word: a module is
    often imported through its package, or tested through the CLI or the loop). The tests of the
    checkers (tests/claims) are left out: they test the claims, not the module."""
    modules = [f[:-3].replace("/", ".") for f in files]
    named = [(Path(f).parent.name, re.compile(rf"\b{re.escape(Path(f).stem)}\b")) for f in files]
    found = []
    for path in ROOT.glob("tests/**/test_*.py"):
        if path.parent.name in ("claims", "mutations"):
            continue
        text = read_text(path, "source file")
        if any(m in text for m in modules) or any(path.parent.name == pkg and stem.search(text) for pkg, stem in named):
            found.append(str(path.relative_to(ROOT)))
    return sorted(found)


def _broken_claims(report: Path) -> list[str]:
    if not report.exists():
        return []
    records = json.loads(read_text(report, "cosmic-ray report"))
    return [r["id"] for r in records if r["status"] in ("fail", "error", "inconclusive")]


def _run_one(spec: Any, command: str, timeout: float, report: Path) -> tuple[str, list[str], str, float]:
    from cosmic_ray.mutating import mutate_and_test

    remove(report, within=report.parent)
    began = time.perf_counter()
    result = mutate_and_test([spec], command, timeout)
    seconds = time.perf_counter() - began
    if result.worker_outcome.value == "no-test":
        return "no-test", [], "", seconds
    outcome = result.test_outcome.value
    if outcome == "killed" and result.output == "timeout":
        outcome = "timeout"
    tail = (result.output or "")[-400:] if outcome in ("killed", "incompetent") else ""
    return outcome, _broken_claims(report), result.diff or tail, seconds


def run_groups(names: list[str], sample: int | None, seed: int | None, with_tests: bool = False,
               reuse_map: bool = False) -> list[Path]:
    """Run the groups ``names`` against one copy of HEAD (one commit for the whole invocation);
    ``with_tests``: a survivor of the claims also runs its module's tests."""
    plan = _plan()
    unknown = [n for n in names if n not in plan["groups"]]
    if unknown:
        raise SystemExit(f"mutation: unknown group(s) {', '.join(unknown)}; known: {', '.join(plan['groups'])}")
    commit, scratch = _head(), _scratch("run")
    cwd, env = Path.cwd(), dict(os.environ)
    try:
        checked = [f for n in names if plan["groups"][n]["runner"] == "check" for f in group_files(plan["groups"][n])]
        traced = claim_map(scratch, checked, reuse_map) if checked else None
        os.chdir(scratch)
        os.environ.update(_env(scratch))
        if traced and subprocess.run(_check_command(None, scratch / "base.json").split(), capture_output=True).returncode:
            raise SystemExit("mutation: the unmutated copy fails `repro check`; nothing to measure")
        return [_run_group(n, plan, sample, seed, commit, scratch, traced, with_tests) for n in names]
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        shutil.rmtree(scratch, ignore_errors=True)


def _run_group(name: str, plan: dict[str, Any], sample: int | None, seed: int | None, commit: str, scratch: Path,
               traced: dict[str, Any] | None, with_tests: bool) -> Path:
    from cosmic_ray.commands import init
    from cosmic_ray.work_db import WorkDB, use_db

    group = plan["groups"][name]
    files = group_files(group)
    sample = group["sample"] if sample is None else sample
    seed = plan["seed"] if seed is None else seed
    out = ROOT / HERE / f"{name}.json"
    digests = {f: _digest(scratch, [scratch / f]) for f in files}
    previous = json.loads(read_text(out, "mutation rows")) if out.exists() else {"rows": []}
    equivalent = [e for e in tomllib.loads(read_text(ROOT / HERE / "classified.toml", "classified mutants"))["mutant"]
                  if e["kind"] == "equivalent"]
    done = {(r["file"], r["operator"], r["occurrence"]): r for r in previous["rows"]
            if digests.get(r["file"]) == r["file_digest"]
            and (r["outcome"] in ("killed", "timeout") or classify(r, equivalent))}
    with use_db(str(scratch / f"{name}.sqlite"), WorkDB.Mode.create) as db:
        init([Path(f) for f in files], db, {})
        specs = sorted((item.mutations[0] for item in db.work_items),
                       key=lambda s: (str(s.module_path), s.operator_name, s.occurrence))
    spans = {f: annotation_spans(read_text(f, "source file")) for f in files}
    annotations = [s for s in specs if _in_annotation(s, spans)]
    specs = [s for s in specs if not _in_annotation(s, spans)]
    chosen = specs if not sample or sample >= len(specs) else random.Random(seed).sample(specs, sample)
    tests = _tests_for(files) if group["runner"] == "tests" else []
    if tests and subprocess.run(_pytest_command(tests).split(), capture_output=True).returncode:
        raise SystemExit(f"mutation: the unmutated copy fails {', '.join(tests)}; nothing to measure")
    group_traced = traced if group["runner"] == "check" else None
    rows = []
    for i, spec in enumerate(chosen, 1):
        key = (str(spec.module_path), spec.operator_name, spec.occurrence)
        if key in done:
            rows.append(done[key])
            continue
        rows.append(_mutant_row(spec, group_traced, tests, scratch, digests[key[0]], with_tests) | {"commit": commit})
        print(f"mutation {name} {i}/{len(chosen)}: {rows[-1]['outcome']:10s} {key[0]}:{rows[-1]['line']} "
              f"{spec.operator_name} ({rows[-1]['seconds']:.0f} s)", file=sys.stderr, flush=True)
        _write(out, name, group, files, len(specs), len(annotations), sample, seed, commit, rows)
    _write(out, name, group, files, len(specs), len(annotations), sample, seed, commit, rows)
    return out


def _pytest_command(tests: list[str]) -> str:
    return f"{sys.executable} -m pytest -q -x -n 0 -p no:cacheprovider {' '.join(tests)}"


def _mutant_row(spec: Any, traced: dict[str, Any] | None, tests: list[str], scratch: Path, digest: str,
                with_tests: bool) -> dict:
    path = str(spec.module_path)
    source = read_text(path, "source file")
    line = spec.start_pos[0]
    function = enclosing_function(source, line)
    report = scratch / "mutant.json"
    if traced is None:
        runner = "tests"
        outcome, broken, diff, seconds = _run_one(spec, _pytest_command(tests), FULL_TIMEOUT_S * 2, report)
    else:
        claims = traced["calls"].get(path, {}).get(function, []) if function else []
        if claims:
            runner = f"claims:{len(claims)}"
            budget = START_S + TIMEOUT_FACTOR * sum(traced["seconds"].get(c, 1.0) for c in claims)
            outcome, broken, diff, seconds = _run_one(spec, _check_command(claims, report), budget, report)
        else:
            runner = "full"
            outcome, broken, diff, seconds = _run_one(spec, _check_command(None, report), FULL_TIMEOUT_S, report)
    tests_outcome = None
    if with_tests and traced is not None and outcome == "survived":  # do the tests catch what the claims let through?
        tests_outcome = _run_one(spec, _pytest_command(_tests_for([path])), FULL_TIMEOUT_S * 2, report)[0]
    if read_text(path, "source file") != source:
        raise SystemExit(f"mutation: {path} was not restored after a mutant; stopping")
    return {"file": path, "file_digest": digest, "operator": spec.operator_name, "occurrence": spec.occurrence,
            "line": line, "function": function, "runner": runner, "outcome": outcome, "tests_outcome": tests_outcome,
            "broken": broken[:8],
            "seconds": round(seconds, 1), "diff": _changed_lines(diff)}


def _changed_lines(diff: str) -> str:
    lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    return "\n".join(lines) if lines else diff[-300:]


def _write(out: Path, name: str, group: dict, files: list[str], generated: int, in_annotations: int, sample: int,
           seed: int, commit: str, rows: list[dict]) -> None:
    doc = {"group": name, "tool": f"cosmic-ray {version('cosmic-ray')}",
           "runner": group["runner"], "files": files, "generated": generated + in_annotations,
           "equivalent_annotations": in_annotations, "sample": sample, "seed": seed,
           "commit": commit, "rows": rows}
    tmp = out.with_suffix(".tmp")
    atomic_write_text(tmp, json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("run", help="run the mutants of one or more groups of reports/mutation/plan.toml")
    run.add_argument("--group", action="append", required=True)
    run.add_argument("--sample", type=non_negative_int, default=None, help="mutants drawn per group (0: all; default: the plan's)")
    run.add_argument("--seed", type=non_negative_int, default=None)
    run.add_argument("--with-tests", action="store_true",
                     help="a survivor of the claims also runs its module's tests (slow: minutes each)")
    run.add_argument("--reuse-map", action="store_true",
                     help="use claim_map.json even if traced at another source (with --with-tests: survivors get "
                          "the full check anyway)")
    sub.add_parser("summary", help="write reports/mutation/summary.md and summary.json from the groups' rows")
    args = parser.parse_args(argv)
    if args.verb == "run":
        for out in run_groups(args.group, args.sample, args.seed, args.with_tests, args.reuse_map):
            print(f"mutation: wrote {out}", file=sys.stderr)
        return 0
    print(f"mutation: wrote {write_summary(ROOT / HERE)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
