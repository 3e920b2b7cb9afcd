"""The package's import graph, read from each module's own source (every import statement, also
those inside functions): no module imports one that imports it back, directly or through others."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "src" / "affine_homotopy"


def imported_modules(path: Path) -> set[str]:
    """The package modules (top-level names under affine_homotopy) that ``path`` imports anywhere."""
    found: set[str] = set()
    package_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]  # ("affine_homotopy", ...)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                names = [*base, *node.module.split(".")] if node.module else None
                if names is None:  # from . import x, y
                    found.update(f"{'.'.join(base)}.{alias.name}".split(".")[1] for alias in node.names)
                    continue
            else:
                names = (node.module or "").split(".")
            if names and names[0] == "affine_homotopy" and len(names) > 1:
                found.add(names[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "affine_homotopy" and len(parts) > 1:
                    found.add(parts[1])
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        module = relative.parts[0].removesuffix(".py")  # a subpackage counts as one module
        if module == "__init__":
            continue
        graph.setdefault(module, set()).update(imported_modules(path) - {module, "__init__"})
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
    assert {"config", "validation", "families", "model_lookup", "staging", "tasks"} <= set(graph)
    assert "model_lookup" in graph["pypi_models"] and "tasks" in graph["staging"]  # lazy imports count too


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    circles = {module: sorted(d for d in graph[module] if module in reachable(graph, d))
               for module in graph if module in reachable(graph, module)}
    assert not circles, f"import circles (module: the imports that lead back to it): {circles}"


def test_library_modules_do_not_need_the_config_facade() -> None:
    # affine_homotopy.config gathers validation, families and model lookup for the workflow and tests;
    # nothing in the package imports it, so it can never be part of a circle
    users = sorted(module for module, imports in import_graph().items() if "config" in imports)
    assert not users, f"{users} import affine_homotopy.config; import from validation, families or model_lookup"
