"""The import graph points one way: CLI -> flows -> tasks -> pipeline library -> engine, with no circle anywhere.

Every ``import`` statement of every module counts, wherever it stands (module level, inside a function, under
``if TYPE_CHECKING:``): a function-level import still means that the importing module needs the imported one.
Three checks:

* no circle of modules (any length);
* no arrow from an inner layer to an outer one (engine < pipeline library < tasks < flows < CLI);
* the subpackages of ``dq_engine`` and of ``dqrelease`` (and their top-level modules) form no circle either, so a
  file's folder says where it stands (``docs/engine.md`` and CONTRIBUTING.md list the order).

The graph is read from the source files (``ast``), so the test needs nothing installed and names the module and line
of every offending import.
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

PACKAGES = {
    # source folder -> installed name (pyproject.toml installs the design's top-level folders inside dqrelease)
    "dq_engine": "dq_engine",
    "dqrelease": "dqrelease",
    "tasks": "dqrelease.tasks",
    "flows": "dqrelease.flows",
    "expectations": "dqrelease.expectations",
}

LAYERS = ("engine", "pipeline library", "tasks", "flows", "CLI")
"""The layers, innermost first: an import may point inward or stay in its layer, never point outward."""


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def modules(root: pathlib.Path, packages: dict[str, str]) -> dict[str, pathlib.Path]:
    """Installed module name -> source file, for every ``.py`` file of the packages."""
    found = {}
    for folder, installed in packages.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([installed, *parts])] = path
    return found


def arrows(found: dict[str, pathlib.Path]) -> list[Arrow]:
    """Every import between the modules of ``found`` (other libraries are left out)."""

    def known(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    result = []
    for source, path in found.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = source.split(".")[: len(source.split(".")) - (node.level - int(is_package))]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base for alias in node.names]
            else:
                continue
            for target in targets:
                resolved = known(target)
                if resolved is not None and resolved != source:
                    result.append(Arrow(source, resolved, node.lineno))
    return result


def circles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    graph = defaultdict(set)
    for a, b in edges:
        if a != b:
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted({a for a, _ in edges} | {b for _, b in edges}):
        if node not in index:
            visit(node)
    return found


def layer(name: str) -> int:
    """The index in :data:`LAYERS` of an installed module's layer."""

    def within(package: str) -> bool:
        return name == package or name.startswith(package + ".")

    for index, package in ((4, "dqrelease.cli"), (3, "dqrelease.flows"), (2, "dqrelease.tasks"), (1, "dqrelease")):
        if within(package):
            return index
    assert within("dq_engine"), name
    return 0


def unit(name: str) -> str:
    """The subpackage or top-level module of ``dq_engine`` / ``dqrelease`` that ``name`` belongs to."""
    parts = name.split(".")
    return ".".join(parts[:2])


def describe(component: list[str], graph: list[Arrow], key=lambda name: name) -> str:
    members = set(component)
    inside = [a for a in graph if key(a.source) in members and key(a.target) in members and key(a.source) != key(
        a.target)]
    return "; ".join(f"{a.source}:{a.line} -> {a.target}" for a in inside[:12])


@pytest.fixture(scope="module")
def graph() -> list[Arrow]:
    return arrows(modules(ROOT, PACKAGES))


def test_no_module_imports_another_that_imports_it_back(graph):
    found = circles([(a.source, a.target) for a in graph])
    assert found == [], "import circles: " + " | ".join(describe(c, graph) for c in found)


def test_imports_point_from_the_cli_to_the_engine(graph):
    inward = [a for a in graph if layer(a.source) < layer(a.target)]
    assert inward == [], "imports from an inner layer to an outer one: " + "; ".join(
        f"{a.source}:{a.line} ({LAYERS[layer(a.source)]}) -> {a.target} ({LAYERS[layer(a.target)]})"
        for a in inward
    )


@pytest.mark.parametrize("package", ["dq_engine", "dqrelease"])
def test_subpackages_form_no_circle(graph, package):
    inside = [a for a in graph if a.source.startswith(package + ".") and a.target.startswith(package + ".")]
    found = circles([(unit(a.source), unit(a.target)) for a in inside])
    assert found == [], f"circles between the subpackages of {package}: " + " | ".join(
        f"{c}: {describe(c, inside, unit)}" for c in found
    )


# ---------------------------------------------------------------------- the checks can fail
def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> list[Arrow]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return arrows(modules(tmp_path, {"pkg": "pkg"}))


def test_a_circle_through_a_function_level_import_is_found(tmp_path):
    graph = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/b.py": "def thing():\n    from pkg import a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    assert circles([(a.source, a.target) for a in graph]) == [["pkg.a", "pkg.b"]]


def test_a_circle_under_type_checking_and_relative_imports_is_found(tmp_path):
    graph = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..y import Y\n",
        "pkg/y.py": "from .sub import x\n",
    })
    assert circles([(a.source, a.target) for a in graph]) == [["pkg.sub.x", "pkg.y"]]
    assert circles([(unit(a.source), unit(a.target)) for a in graph]) == [["pkg.sub", "pkg.y"]]


def test_layers_are_ordered_from_the_engine_to_the_cli():
    names = ["dq_engine.data.domain", "dqrelease.inputs.schema", "dqrelease.tasks.prepare", "dqrelease.flows.release",
             "dqrelease.cli.run"]
    assert [layer(name) for name in names] == [0, 1, 2, 3, 4]
    assert layer("dqrelease.cli") == 4 and layer("dq_engine") == 0
