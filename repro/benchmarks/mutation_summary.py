"""The mutation benchmark's summary: reports/mutation/summary.md and summary.json from the rows each
group wrote (:mod:`repro.benchmarks.mutation`) and the hand classification of survivors
(reports/mutation/classified.toml).

A surviving mutant is classified by hand, with a one-line reason, as
- ``equivalent``: no input can tell it from the original (left out of the score), or
- ``off-path``: code of a paper-level module that no paper number runs through (a search rule no
  recipe uses, an option only tests call); it is the test suite's to kill, so its row counts as
  killed when the module's tests killed it.
An entry matches a row by file and by the function it lies in, or by a piece of the removed and of
the added line.

score = (killed + timed out) / (run - equivalent - off-path), by the group's runner (the claims for
paper-level code); a mutant whose runner ran past its timeout is killed (cosmic-ray's rule), the
timed-out ones counted apart. The off-path survivors are scored by the tests: killed / off-path.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

from repro.files.reader import read_text
from repro.files.writer import atomic_write_text

OUTCOMES = ("killed", "timeout", "survived", "incompetent", "no-test")


def classify(row: dict[str, Any], entries: list[dict[str, str]]) -> dict[str, str] | None:
    """The entry for ``row``: same file, and either its ``function`` (every mutant in it) or a piece
    of the removed line (``old``) and of the added one (``new``)."""
    removed = "\n".join(ln[1:] for ln in row["diff"].splitlines() if ln.startswith("-"))
    added = "\n".join(ln[1:] for ln in row["diff"].splitlines() if ln.startswith("+"))
    return next((e for e in entries if e["file"] == row["file"] and (
        e.get("function") == row.get("function") if "function" in e else e["old"] in removed and e["new"] in added)),
        None)


def _tally(rows: list[dict[str, Any]], entries: list[dict[str, str]]) -> dict[str, Any]:
    """Counts of ``rows`` by outcome, and two scores: ``score``, the group's runner's (the claims for
    paper-level code): (killed + timed out) / (run - equivalent - off-path); ``off_path_score``, the
    tests' on the off-path survivors: killed by the tests / off-path."""
    counts = dict.fromkeys((*OUTCOMES, "equivalent", "off-path", "off-path killed by tests"), 0)
    for row in rows:
        entry = classify(row, entries) if row["outcome"] == "survived" else None
        if entry and entry["kind"] == "equivalent":
            counts["equivalent"] += 1
        elif entry and entry["kind"] == "off-path":
            counts["off-path"] += 1
            counts["off-path killed by tests"] += row.get("tests_outcome") in ("killed", "timeout")
        else:
            counts[row["outcome"]] += 1
    scored = len(rows) - counts["equivalent"] - counts["off-path"] - counts["no-test"] - counts["incompetent"]
    counts["run"] = len(rows)
    counts["score"] = round((counts["killed"] + counts["timeout"]) / scored, 3) if scored else None
    counts["off_path_score"] = (round(counts["off-path killed by tests"] / counts["off-path"], 3)
                                if counts["off-path"] else None)
    return counts


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def write_summary(folder: Path) -> Path:
    classified = tomllib.loads(read_text(folder / "classified.toml", "classified mutants")).get("mutant", [])
    groups = [json.loads(read_text(p, "mutation rows")) for p in sorted(folder.glob("*.json"))
              if p.name not in ("summary.json", "claim_map.json")]
    out: dict[str, Any] = {"groups": [], "classified": classified}
    lines = ["# Mutation testing: summary", "",
             "Written by `python -m repro.benchmarks.mutation summary` from the rows in this folder; "
             "how the mutants were drawn and run: [README.md](README.md).", "",
             "| group | runner | file | generated | in annotations | run | killed | timed out | survived | "
             "equivalent | score (runner) | off-path: killed by tests |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    survivors = []
    for g in groups:
        by_file: dict[str, list] = defaultdict(list)
        for row in g["rows"]:
            by_file[row["file"]].append(row)
        total = _tally(g["rows"], classified)
        out["groups"].append({k: g[k] for k in ("group", "tool", "runner", "files", "generated", "sample", "seed",
                                                 "commit", "equivalent_annotations")}
                             | {"total": total, "files_tally": {f: _tally(r, classified) for f, r in by_file.items()}})
        per_file = [(f, _tally(r, classified)) for f, r in sorted(by_file.items())] if len(by_file) > 1 else []
        for name, tally in [*per_file, ("all", total)]:
            label = f"`{name}`" if name != "all" else ("all" if per_file else f"`{next(iter(by_file), '-')}`")
            generated, notes = (g["generated"], g["equivalent_annotations"]) if name == "all" else ("", "")
            score = _percent(tally["score"])
            lines.append(f"| {g['group']} | {g['runner']} | {label} | {generated} | {notes} | {tally['run']} | "
                         f"{tally['killed']} | {tally['timeout']} | {tally['survived']} | {tally['equivalent']} | "
                         f"{f'**{score}**' if name == 'all' else score} | "
                         f"{tally['off-path killed by tests']} of {tally['off-path']} |")
        survivors += [(g["group"], r) for r in g["rows"] if r["outcome"] == "survived"]
    lines += ["", "Tool: " + ", ".join(sorted({g["tool"] for g in groups})) + "; commits: "
              + ", ".join(f"{g['group']} {g['commit']}" for g in groups) + ".", "", "## Survivors", "",
              "| group | file:line | mutation | tests | classified |", "|---|---|---|---|---|"]
    for group, row in survivors:
        entry = classify(row, classified)
        what = row["diff"].replace("\n", " → ").replace("|", "\\|")
        lines.append(f"| {group} | `{row['file']}:{row['line']}` | `{what}` | {row.get('tests_outcome') or '-'} | "
                     + (f"{entry['kind']}: {entry['reason']}" if entry else "**not classified: a gap**") + " |")
    atomic_write_text(folder / "summary.json", json.dumps(out, indent=1) + "\n")
    path = folder / "summary.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
