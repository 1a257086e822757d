"""The package's shape: layers that import one way, one place that trains, one definition per field.

Read from the source with ``ast`` (no import needed): every ``import`` counts, at module level
or inside a function, except those under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from repro.decode.settings import DecodeSettings
from repro.model import TransformerConfig
from repro.model.presets import Preset
from repro.recipes import Recipe
from repro.train.config import TrainConfig

PACKAGE = Path(__file__).resolve().parents[1] / "repro"


def modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}


def repro_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a repro module outside ``if TYPE_CHECKING:``."""
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("repro."):
                yield node.lineno, name


def unit(path_or_module: Path | str) -> str:
    """The layer a file or module belongs to: its subpackage, or the top-level module itself."""
    if isinstance(path_or_module, Path):
        parts = path_or_module.relative_to(PACKAGE).with_suffix("").parts
    else:
        parts = tuple(path_or_module.split(".")[1:])
    return parts[0] if parts else "__init__"


def import_graph() -> dict[str, set[str]]:
    units = {unit(p) for p, _ in modules()}
    graph: dict[str, set[str]] = {u: set() for u in units}
    for path, tree in modules():
        src = unit(path)
        for _, module in repro_imports(tree):
            dst = unit(module)
            if dst in units and dst != src:
                graph[src].add(dst)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one unit are the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_subpackages():
    graph = import_graph()
    assert "claims" in graph and "recipes" in graph  # the graph covers subpackages and top-level modules
    assert strongly_connected(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_cli_imports_the_commands():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
                 for path, tree in modules() if unit(path) not in ("cli", "commands")
                 for line, module in repro_imports(tree) if module.startswith("repro.commands")]
    assert offenders == []


def _calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node.lineno, ast.unparse(node.func)


def test_nothing_outside_repro_train_steps_an_optimizer_or_writes_a_checkpoint():
    offenders = []
    for path, tree in modules():
        if unit(path) == "train":
            continue
        for line, func in _calls(tree):
            receiver = func.rsplit(".", 1)[0].lower()
            steps_optimizer = func.endswith(".step") and any(k in receiver for k in ("optim", "opt", "adam"))
            writes = func in ("torch.save", "save_checkpoint") or func.endswith(".save_checkpoint")
            if steps_optimizer or writes:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {func}()")
    assert offenders == []


def test_no_recipe_field_is_defined_in_two_classes():
    seen: dict[str, str] = {}
    for cls in (TransformerConfig, TrainConfig, DecodeSettings, Recipe):
        for f in dataclasses.fields(cls):
            assert f.name not in seen, f"field '{f.name}' is defined in {seen[f.name]} and {cls.__name__}"
            seen[f.name] = cls.__name__
    architecture_only = {f.name for f in dataclasses.fields(Preset)}
    assert architecture_only == {"name", "source", "model"}  # presets carry no training settings


# --- Names say what they hold ------------------------------------------------------------------

#: Modules kept under an old name after a rename, so that ``python -m`` paths and imports from
#: outside keep working: path (from repro/) -> the new module it re-exports, and why it is kept.
#: None today: no renamed module was run with ``python -m`` or part of the adapter protocol.
SHIMS: dict[str, str] = {}


def _exempt_from_unique_names(path: Path) -> str | None:
    """Why ``path`` may share its basename with another module, or None."""
    rel = path.relative_to(PACKAGE)
    if rel.name in ("__init__.py", "__main__.py"):
        return "package marker"
    if rel.parts[0] == "commands" and len(rel.parts) == 2:
        return "a CLI verb's module, named after its verb"
    if rel.parts[0] == "checks" and len(rel.parts) == 2 and (PACKAGE / "model" / rel.name).exists():
        return "the checker of the model module of the same name (claim -> checker -> model)"
    if rel.as_posix() in SHIMS:
        return f"a deprecated name kept for {SHIMS[rel.as_posix()]}"
    return None


def test_module_names_are_unique_across_the_package():
    by_name: dict[str, list[str]] = {}
    for path, _ in modules():
        if _exempt_from_unique_names(path) is None:
            by_name.setdefault(path.name, []).append(path.relative_to(PACKAGE.parent).as_posix())
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def test_each_command_module_is_named_after_its_verb():
    from repro.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    stems = {p.stem.replace("_", "-") for p in (PACKAGE / "commands").glob("*.py") if p.stem != "__init__"}
    assert stems == set(sub.choices)


# --- Function-level imports hide no cycle ------------------------------------------------------

#: Third-party modules a function may import where it needs them: optional (the ``zoo`` extra,
#: TensorBoard) or slow to import and needed by one path only (matplotlib: the report's figures).
OPTIONAL_HEAVY = ("transformers", "x_transformers", "torch.utils.tensorboard", "tensorboard", "matplotlib",
                  "cosmic_ray")

#: Files whose function-level imports are kept there on purpose, with the reason.
LOCAL_IMPORTS_ALLOWED = {
    "repro/audit/plugin.py": "the pytest11 entry point is loaded by every pytest run where repro is installed; "
                             "repro (torch) is imported only when --repro-target is given",
    "repro/train/compile_cache.py": "torch._inductor takes ~5 s to import; only a compiled run (on a GPU by default) "
                                    "needs its config, and the CPU's training and checks do not",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def function_level_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every import inside a function body, outside ``if TYPE_CHECKING:``."""
    skip = _type_checking_nodes(tree)
    seen: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if id(node) in skip or id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom):
                yield node.lineno, "." * node.level + (node.module or "")


def test_function_level_imports_are_of_optional_modules_or_justified():
    offenders = []
    for path, tree in modules():
        rel = path.relative_to(PACKAGE.parent).as_posix()
        for line, module in function_level_imports(tree):
            optional = any(module == m or module.startswith(m + ".") for m in OPTIONAL_HEAVY)
            if not optional and rel not in LOCAL_IMPORTS_ALLOWED:
                offenders.append(f"{rel}:{line}: import {module} (move it to the top, or say why it is local)")
    assert offenders == []
    for rel in LOCAL_IMPORTS_ALLOWED:  # no stale entry
        assert any(True for _ in function_level_imports(ast.parse((PACKAGE.parent / rel).read_text(encoding="utf-8")))), rel


def module_import_graph() -> dict[str, set[str]]:
    """Module -> the repro modules it imports, at module level or inside a function (as if all were
    at the top). ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
    ``pkg`` (its ``__init__``); the implicit import of a module's parent packages is not counted."""
    trees = {_module_name(path): tree for path, tree in modules()}
    graph: dict[str, set[str]] = {m: set() for m in trees}
    for name, tree in trees.items():
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in trees else node.module
                           for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in trees and t != name)
    return graph


def test_no_import_cycle_between_modules_counting_function_level_imports():
    graph = module_import_graph()
    assert "repro.pipeline.parsing" in graph and "repro.checks" in graph and "repro.cli" in graph
    assert "repro.checks.registry" in graph["repro.checks"]  # package and submodule edges are both seen
    assert strongly_connected(graph) == []


def test_function_level_import_finder_sees_nested_imports_and_skips_type_checking():
    tree = ast.parse("import os\ndef f():\n    import repro.x\n    def g():\n        from repro.y import z\n"
                     "class C:\n    def m(self):\n        from . import v\n"
                     "if TYPE_CHECKING:\n    def h():\n        import repro.w\n")
    assert sorted(m for _, m in function_level_imports(tree)) == [".", "repro.x", "repro.y"]


def _plain_flags(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, what) of each flag parsed by a bare builtin (``type=int``/``float``: ``int()`` takes ``1_0``
    and ``١٠``, and any sign) and each parser that is not :class:`repro.argtypes.OneLineParser`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in ("argparse.ArgumentParser", "ArgumentParser"):
            yield node.lineno, "a plain argparse.ArgumentParser"
        if name.endswith(("add_argument", "addoption")):
            for kw in node.keywords:
                if kw.arg == "type" and isinstance(kw.value, ast.Name) and kw.value.id in ("int", "float"):
                    yield node.lineno, f"type={kw.value.id}"


def test_every_flag_is_parsed_by_the_strict_types_and_refused_in_one_line():
    """Every parser of repro's (the module entry points and the pytest plugin's options included)
    refuses a bad value by name in one line: :mod:`repro.argtypes`."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for path, tree in modules()
             if path.name != "argtypes.py" for line, what in _plain_flags(tree)]
    assert not found, "\n".join(found)


def test_plain_flag_finder_sees_both_kinds():
    tree = ast.parse("import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int)\n"
                     "group.addoption('--s', type=float)\np.add_argument('--ok', type=positive_int)\n")
    assert [what for _, what in _plain_flags(tree)] == ["a plain argparse.ArgumentParser", "type=int", "type=float"]
