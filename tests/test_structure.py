"""The package's shape: layers that import one way, one place that trains, one definition per field.

Read from the source with ``ast`` (no import needed): every ``import`` counts, at module level
or inside a function, except those under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

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
