"""Issue 45, item 2: one reader and one writer. No module of the package opens, loads, writes,
moves or deletes a file except through :mod:`repro.files.reader` and :mod:`repro.files.writer`,
whose rules (regular files only, bounded sizes and nesting, one text decoding; never through a
symbolic link, never outside the folder written in, atomically) then hold for every file.

Read from the source with ``ast``: a call whose function is one of :data:`FORBIDDEN` (by its
dotted name, or by its method name for ``Path`` methods) outside ``repro/files/`` is an offender,
unless :data:`ALLOWED` names the file and the call with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "repro"

#: Functions that touch a file by name, by their dotted name as written in the source.
FORBIDDEN_FUNCTIONS = {
    "open", "io.open", "os.open", "os.fdopen", "json.load", "json.dump", "tomllib.load", "torch.load", "torch.save",
    "np.load", "np.save", "numpy.load", "numpy.save", "pd.read_csv", "pandas.read_csv", "os.replace", "os.rename",
    "os.remove", "os.unlink", "os.rmdir", "os.makedirs", "os.mkdir", "os.symlink", "os.link", "os.truncate",
    "shutil.rmtree", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
    "tempfile.mkstemp", "tempfile.NamedTemporaryFile", "tarfile.open", "gzip.open", "urllib.request.urlretrieve",
}
#: Methods of ``pathlib.Path`` (and file-like objects' savers) that touch a file, by method name.
FORBIDDEN_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "unlink", "rmdir", "mkdir", "touch",
                     "symlink_to", "hardlink_to", "rename", "to_csv", "savefig", "from_file"}

#: ``path:call`` -> why that call may touch a file itself.
ALLOWED = {
    "repro/train/checkpoint.py:torch.save": "writes into the handle repro.files.writer.atomic_open gave it",
    "repro/data/encoded.py:np.save": "writes into the handle repro.files.writer.atomic_open gave it",
    "repro/data/fetch.py:tarfile.TarFile.open": "reads the handle repro.files.reader.opened gave it",
    "repro/train/metrics_log.py:pd.read_csv": "parses the text repro.files.reader.read_text read",
    "repro/report/figures.py:fig.savefig": "draws into a BytesIO buffer, written by repro.report.publish",
    "repro/report/render_json.py:pd.DataFrame(rows, columns=list(ROW_COLUMNS)).to_csv": "renders to a string",
    "repro/cli.py:os.open": "the null device, put in place of a closed output pipe",
    "repro/benchmarks/mutation.py:shutil.rmtree": "the mutation benchmark's own scratch copy of the tree, "
                                                  "under the temporary folder it made",
}
#: Receivers whose methods are the reader's and the writer's own.
OURS = ("reader", "writer")


def calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node.lineno, ast.unparse(node.func)


def forbidden(func: str) -> bool:
    """Whether a call of ``func`` (as written in the source) touches a file by itself."""
    receiver, _, method = func.rpartition(".")
    return func in FORBIDDEN_FUNCTIONS or (method in FORBIDDEN_METHODS and receiver not in ("", *OURS))


def offenders() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("repro/files/"):
            continue
        for line, func in calls(ast.parse(path.read_text(encoding="utf-8"))):
            if forbidden(func):
                if f"{rel}:{func}" not in ALLOWED:
                    found.append(f"{rel}:{line}: {func}()")
    return found


def test_no_module_touches_a_file_outside_the_reader_and_the_writer():
    assert offenders() == []


def test_every_allowance_is_still_used():
    used = {f"{path.relative_to(PACKAGE.parent).as_posix()}:{func}" for path in PACKAGE.rglob("*.py")
            for _, func in calls(ast.parse(path.read_text(encoding="utf-8")))}
    assert set(ALLOWED) <= used


@pytest.mark.parametrize("source, caught", [
    ("Path(p).read_text()", True), ("open(p)", True), ("json.load(fh)", True), ("p.unlink()", True),
    ("os.replace(a, b)", True), ("torch.load(p, weights_only=True)", True), ("reader.read_text(p)", False),
    ("reader.read_bytes(p)", False), ("(folder / 'x').write_text('y')", True),
    ("text.replace('a', 'b')", False),
])
def test_the_finder_sees_each_kind_of_access(source, caught):
    assert forbidden(next(f for _, f in calls(ast.parse(source)))) == caught
