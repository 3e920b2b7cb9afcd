"""The package's import graph, read from each module's own source (every import statement, also
those inside functions): the layers import only downwards, and no module imports one that imports it
back, directly or through others.

The layers, lowest first (CONTRIBUTING.md): ``errors``; ``core`` (the maths); ``study`` (a study's
config); ``jobs`` (job plumbing); ``models`` (model acquisition); ``costs`` (cost prediction, which
reads the jobs' records and measures on embedded data); ``report`` (tables and figures); then ``api``,
``cli`` and the package's ``__init__`` on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "src" / "affine_homotopy"
LAYERS = ("errors", "core", "study", "jobs", "models", "costs", "report", "top")
TOP = {"api", "cli", "__init__", "__main__"}


def module_of(parts: tuple[str, ...]) -> str:
    """The graph's node for a module path under affine_homotopy: a layer's module (``core.linalg``;
    a sub-package such as ``core.extrinsic`` counts as one module), or a top-level module."""
    parts = tuple(p for p in parts if p != "__init__") or ("__init__",)
    return ".".join(parts[:2]) if parts[0] in LAYERS else parts[0]


def layer_of(module: str) -> str:
    head = module.split(".")[0]
    return head if head in LAYERS else "top"


def imported_modules(path: Path, package_parts: tuple[str, ...] | None = None) -> set[str]:
    """The package modules that ``path`` imports anywhere (top-level statements and lazy ones);
    ``package_parts`` is the importing module's package, ("affine_homotopy", ...), read from its path
    when not given."""
    found: set[str] = set()
    if package_parts is None:
        package_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets: list[list[str]] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package_parts[: len(package_parts) - node.level + 1])
                module = [*base, *node.module.split(".")] if node.module else base
            else:
                module = (node.module or "").split(".")
            # `from pkg import name` may name a module of pkg: count the deeper path where it is one
            for alias in node.names:
                deeper = PACKAGE.parent.joinpath(*module, alias.name)
                is_module = deeper.with_suffix(".py").exists() or deeper.is_dir()
                targets.append([*module, alias.name] if is_module else module)
        elif isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        for names in targets:
            if names and names[0] == "affine_homotopy" and len(names) > 1:
                found.add(module_of(tuple(names[1:])))
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_of(path.relative_to(PACKAGE).with_suffix("").parts)
        graph.setdefault(module, set()).update(imported_modules(path) - {module})
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph.get(start, ()))
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    return seen


def test_the_graph_is_read_from_the_sources() -> None:
    graph = import_graph()
    assert {"study.validation", "study.families", "study.model_lookup", "models.staging", "study.tasks"} <= set(graph)
    assert "study.model_lookup" in graph["models.pypi_models"]  # lazy imports count too
    assert "study.tasks" in graph["models.staging"]
    assert "core.stats" in graph["report.analysis"]  # `from ..core import stats` names a module
    assert {layer_of(m) for m in graph} == set(LAYERS)


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    circles = {module: sorted(d for d in graph[module] if module in reachable(graph, d))
               for module in graph if module in reachable(graph, module)}
    assert not circles, f"import circles (module: the imports that lead back to it): {circles}"


def test_no_module_imports_upwards() -> None:
    rank = {layer: k for k, layer in enumerate(LAYERS)}
    upward = {module: sorted(d for d in imports if rank[layer_of(d)] > rank[layer_of(module)])
              for module, imports in import_graph().items()}
    upward = {module: imports for module, imports in upward.items() if imports}
    assert not upward, f"modules that import a layer above their own (order, lowest first: {LAYERS}): {upward}"


def test_core_imports_nothing_above_it() -> None:
    # the maths needs only itself and the named errors: no config, files, jobs or models
    outside = {module: sorted(d for d in imports if layer_of(d) not in ("errors", "core"))
               for module, imports in import_graph().items() if layer_of(module) == "core"}
    assert not any(outside.values()), outside


def test_the_layer_rule_is_read_correctly(tmp_path: Path) -> None:
    # a core module that imported a higher layer lazily would be caught: the reader on a file placed in core
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..jobs.io import atomic_path\n    from ..models import derived\n")
    assert imported_modules(probe, ("affine_homotopy", "core")) == {"jobs.io", "models.derived"}
