"""The README is an entry point and the docs it points to are there and true (issue 30, item 4).

- README.md stays short (at most 260 lines) and its two set-up commands are the ones CI runs.
- Every relative link in the Markdown (README.md, docs/, reports/notes/, slurm/README.md) reaches
  a file, and a link's ``#anchor`` a heading of that file; every ``docs/...`` or
  ``reports/notes/...`` path named in the package, the tests, CI or the cluster files exists; no
  docstring or message points into a README section any more (the reference lives in docs/).
- The README's map of the paper names modules that exist and claim ids that some claim has, and
  its table of verbs is ``repro --help``'s list.
- The measured figures of docs/benchmarks.md (and the README's headline) are the ones in the
  committed records under reports/, each with the commit the record names.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from repro.claims.loader import load_claims
from repro.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NOTES = ROOT / "reports" / "notes"
MAX_README_LINES = 260

#: The reference pages issue 30 asks for; each must exist and be listed in docs/README.md.
REFERENCE_PAGES = ("claims.md", "recipes.md", "precision.md", "cluster.md", "audit.md", "parsing.md",
                   "reports.md", "exit-codes.md", "benchmarks.md")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), *sorted(NOTES.glob("*.md")), ROOT / "slurm" / "README.md"]


def flat(text: str) -> str:
    """The text with every run of white space one space (figures wrap across lines)."""
    return " ".join(text.split())


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a Markdown text."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


# --- the README is short, and its set-up is what CI runs ----------------------------------------


def test_readme_is_an_entry_point() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; reference material goes to docs/"
    for page in REFERENCE_PAGES:
        assert (DOCS / page).is_file(), f"docs/{page} is missing"
        assert f"docs/{page}" in "\n".join(lines), f"README.md does not point to docs/{page}"
        assert f"]({page})" in (DOCS / "README.md").read_text(encoding="utf-8"), f"docs/README.md does not list {page}"


def setup_commands() -> list[str]:
    body = section(README.read_text(encoding="utf-8"), "Set-up: two commands")
    block = re.search(r"```bash\n(.*?)```", body, re.S)
    assert block, "the set-up section has no bash block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def ci_commands() -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_readme_setup_is_what_ci_runs() -> None:
    commands = setup_commands()
    assert len(commands) == 2, f"the README's set-up has {len(commands)} commands, not two: {commands}"
    installs, runs = zip(*(c.split(" && ", 1) for c in commands))
    assert set(installs) == {"pip install -e ."}, installs
    main_job, tests = runs
    # the test command is the command CI ends with, word for word
    ci = ci_commands()
    assert ci[-1] == tests, f".ci/run ends with {ci[-1]!r}, the README's test command is {tests!r}"
    assert f"(`{tests}`)" in (ROOT / ".ci" / "run").read_text(encoding="utf-8"), ".ci/run's comment names another command"
    # CI installs the same package (editable, from the checkout) before it runs the tests
    assert any(re.search(r"\bpip install\b.*\s-e \.(\[[\w,]+\])?$", c) for c in ci[:-1]), "CI does not pip install -e ."
    # the main job is a real pipeline of `repro reproduce`
    words = main_job.split()
    assert words[:2] == ["repro", "reproduce"] and words[2] in ("--pipeline", "--profile"), main_job
    assert words[3] in choices("reproduce", "--pipeline"), f"{main_job}: no such pipeline"


# --- links and paths ------------------------------------------------------------------------------


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


PATH = re.compile(r"(?<![\w./-])((?:docs|reports/notes)/[\w./-]*\w)")


def named_paths() -> list[tuple[str, str]]:
    sources = [README, *sorted(DOCS.glob("*.md")), *sorted(NOTES.glob("*.md")), ROOT / ".ci" / "run",
               *sorted((ROOT / "slurm").rglob("*.md")), *sorted((ROOT / "slurm").rglob("*.sh"))]
    sources += sorted((ROOT / "repro").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    found = []
    for source in sources:
        for match in PATH.finditer(source.read_text(encoding="utf-8")):
            found.append((str(source.relative_to(ROOT)), match.group(1)))
    return found


def test_named_docs_paths_exist() -> None:
    found = named_paths()
    # the package and the tests point into docs/ and the notes: the scan must see them
    assert any(src.startswith("repro/") for src, _ in found) and any(src.startswith("tests/") for src, _ in found)
    missing = sorted({f"{src}: {path}" for src, path in found if not (ROOT / path).exists()})
    assert not missing, "paths named but not there:\n" + "\n".join(missing)


README_SECTION = re.compile(r"README(?:'s)?,? \"|\(README[,)]|the README's \"|see the README")


def test_no_pointer_into_readme_sections() -> None:
    """Docstrings, comments and messages point to docs/, not to a section of the README."""
    offenders = []
    for path in sorted((ROOT / "repro").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if README_SECTION.search(line) and path.name != "test_docs.py":
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# --- the map of the paper and the verbs -----------------------------------------------------------


def paper_map_rows() -> list[list[str]]:
    body = section(README.read_text(encoding="utf-8"), "Where the paper lives in the code")
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in body.splitlines()
            if line.startswith("|") and not line.startswith("| ---")]
    assert rows[0] == ["paper", "code", "claims"], rows[0]
    return rows[1:]


def test_paper_map_names_real_modules_and_claims() -> None:
    rows = paper_map_rows()
    assert len(rows) >= 10
    ids = [c.id for c in load_claims(ROOT / "claims")]
    for paper, code, claims in rows:
        paths = re.findall(r"`(repro/[\w/.]+)`", code)
        assert paths, f"row {paper!r} names no module"
        directory = ROOT / paths[0]
        for path in paths:
            assert (ROOT / path).exists(), f"row {paper!r}: {path} does not exist"
        # a bare file name in the same cell lives beside the first path named
        for name in re.findall(r"`([\w]+\.py)`", code):
            base = directory if directory.is_dir() else directory.parent
            assert (base / name).exists() or any(ROOT.joinpath(p).parent.joinpath(name).exists() for p in paths), \
                f"row {paper!r}: {name} does not exist beside {paths[0]}"
        patterns = re.findall(r"`([\w.*-]+)`", claims)
        assert patterns, f"row {paper!r} names no claim"
        for pattern in patterns:
            assert fnmatch.filter(ids, pattern), f"row {paper!r}: no claim matches {pattern}"


def verbs() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def choices(verb: str, flag: str) -> list[str]:
    return next(a.choices for a in verbs()[verb]._actions if flag in a.option_strings)


def test_readme_lists_every_verb() -> None:
    body = section(README.read_text(encoding="utf-8"), "The verbs")
    listed = re.findall(r"^\| `repro ([\w-]+)` \|", body, re.M)
    assert len(listed) == len(set(listed)), "a verb is listed twice"
    assert sorted(listed) == sorted(verbs()), f"README lists {sorted(listed)}, repro --help has {sorted(verbs())}"


# --- the figures are the records' -----------------------------------------------------------------


def record(path: str) -> dict:
    data = json.loads((ROOT / path).read_text(encoding="utf-8"))
    return {**data, **data["provenance"]} if "provenance" in data else data


def fixed(value: float, digits: int) -> str:
    """``value`` as the docs print it: rounded half up from its decimal form (1.535 -> 1.54)."""
    return str(Decimal(str(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def spread(values: dict, digits: int) -> str:
    return f"[{fixed(values['min'], digits)}, {fixed(values['max'], digits)}]"


def benchmark_figures() -> list[tuple[str, str]]:
    """(record, the text docs/benchmarks.md must hold) for every figure it quotes."""
    run, result = record("reports/local/local_run.json"), record(
        "reports/local/results/local.multi30k.bleu/reproduce-local.json")
    check, train = record("reports/benchmarks/check_time.json"), record("reports/benchmarks/train_speed.json")
    decode, peak = record("reports/benchmarks/decode_speed.json"), record("reports/benchmarks/matmul_peak.json")
    bf16, bf16_native = (record("reports/benchmarks/precision_speed.json"),
                         record("reports/benchmarks/precision_speed.avx512-bf16.json"))
    jobpath = record("reports/benchmarks/jobpath-cpu.json")
    ours, peer = train["models"]["repro"], train["models"]["torch.nn.Transformer"]
    low, high = run["sacrebleu_ci95"]
    figures = {
        "local_run.json": [f"{fixed(run['sacrebleu'], 2)} sacreBLEU, 95% interval [{fixed(low, 2)}, {fixed(high, 2)}]",
                           f"{fixed(run['paper_protocol_bleu'], 2)} with the paper's tokenized",
                           f"dev perplexity {fixed(run['dev_ppl'], 2)}", f"{fixed(run['wall_minutes_total'], 1)} minutes",
                           f"{run['checks']['counts']['pass']} pass, {run['checks']['counts']['paper inconsistent']} paper inconsistent",
                           f"measured at {result['commit'][:7]}"],
        "check_time.json": [f"{check['claims']} local claims", f"{fixed(check['wall_s_median'], 1)} s median",
                            f"({check['runs']} runs, {fixed(check['wall_s_min'], 1)}–{fixed(check['wall_s_max'], 1)} s"],
        "train_speed.json": [f"{fixed(ours['s_per_step'], 2)} s/step {spread(ours['s_per_step_spread'], 2)}, "
                             f"{fixed(ours['tokens_per_s'], 0)} tokens/s, {fixed(100 * ours['mfu_of_matmul_peak'], 0)} %",
                             f"{fixed(peer['s_per_step'], 2)} s/step {spread(peer['s_per_step_spread'], 2)}, "
                             f"{fixed(peer['tokens_per_s'], 0)} tokens/s, {fixed(100 * peer['mfu_of_matmul_peak'], 0)} %, "
                             f"{fixed(100 * peer['sys_fraction_of_cpu'], 0)} % of its CPU time",
                             f"**{fixed(train['speedup_spread']['median'], 2)}×** {spread(train['speedup_spread'], 2)}",
                             f"{fixed(train['matmul_peak_gflops'], 1)} GFLOP/s",
                             f"measured at {train['commit'][:7]}"],
        "decode_speed.json": [f"{fixed(decode['runs'][case]['seconds'], 2)} s {spread(decode['runs'][case]['seconds_spread'], 2)}"
                              for case in decode["runs"]] +
                             [f"**{fixed(decode['beam_speedup'], 2)}×** {spread(decode['beam_speedup_spread'], 2)}",
                              f"{fixed(decode['greedy_speedup'], 2)}× {spread(decode['greedy_speedup_spread'], 2)}"],
        "matmul_peak.json": [f"**{fixed(peak['peak_gflops'], 1)} GFLOP/s** (median of {peak['fp32']['gflops']['n']}",
                             f"range {fixed(peak['fp32']['gflops']['min'], 1)}–{fixed(peak['fp32']['gflops']['max'], 1)}",
                             f"**{fixed(peak['bf16']['gflops']['median'], 1)} GFLOP/s**", f"{peak['bf16_over_fp32']}×",
                             f"measured at {peak['commit'][:7]}"],
        "precision_speed.json": [f"**{fixed(bf16['bf16_speedup_tokens_per_s']['median'], 3)}×** fp32 "
                                 f"{spread(bf16['bf16_speedup_tokens_per_s'], 3)}", f"measured at {bf16['commit'][:7]}"],
        "precision_speed.avx512-bf16.json": [
            f"**{fixed(bf16_native['bf16_speedup_tokens_per_s']['median'], 2)}×** fp32 "
            f"{spread(bf16_native['bf16_speedup_tokens_per_s'], 2)}",
            "bf16 {} against fp32 {}".format(*re.search(r"bf16 ([\d.]+) vs fp32 ([\d.]+)", bf16_native["auto_reason"]).groups()),
            f"measured at {bf16_native['commit'][:7]}"],
        "jobpath-cpu.json": [f"{fixed(jobpath['cases'][case]['s_per_update'], 2)} s per update "
                             f"{spread(jobpath['cases'][case]['s_per_update_spread'], 2)}, "
                             f"{fixed(jobpath['cases'][case]['tokens_per_s'], 0)} tokens/s" for case in ("job", "fixed")] +
                            [f"ratio **{fixed(jobpath['ratio'], 2)}** {spread(jobpath['ratio_spread'], 2)}",
                             f"{fixed(jobpath['cases']['job']['real_tokens_per_update'], 0)} real tokens per update, "
                             f"{fixed(100 * jobpath['cases']['job']['padding_fraction'], 1)} % padding",
                             f"measured at {jobpath['commit'][:7]}"],
    }
    return [(name, text) for name, texts in figures.items() for text in texts]


@pytest.mark.parametrize(("source", "figure"), benchmark_figures())
def test_benchmark_figures_are_the_records(source: str, figure: str) -> None:
    assert flat(figure) in flat((DOCS / "benchmarks.md").read_text(encoding="utf-8")), \
        f"docs/benchmarks.md does not quote {figure!r} from {source}"


def test_readme_headline_is_the_record() -> None:
    run = record("reports/local/local_run.json")
    result = record("reports/local/results/local.multi30k.bleu/reproduce-local.json")
    low, high = run["sacrebleu_ci95"]
    text = flat(section(README.read_text(encoding="utf-8"), "What the main job shows"))
    for figure in (f"**{fixed(run['sacrebleu'], 2)} sacreBLEU, 95% interval [{fixed(low, 2)}, {fixed(high, 2)}]**",
                   f"{fixed(run['wall_minutes_total'], 1)} minutes", f"dev perplexity {fixed(run['dev_ppl'], 2)}",
                   f"commit {result['commit'][:7]} ({result['date'][:10]})"):
        assert flat(figure) in text, f"README's main job does not say {figure!r} as its record does"
    parser = record("reports/local/results/local.ptb-sample.f1/reproduce-local-parsing.json")
    assert f"F1 {fixed(record('reports/local/local_parsing_run.json')['f1'], 2)}" in text
    assert f"measured at {parser['commit'][:7]}" in text
