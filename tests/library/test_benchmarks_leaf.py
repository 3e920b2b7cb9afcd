"""benchmarks/ is a leaf: timing suites the product and its tests never import, so any of them can be
deleted or rewritten without touching either. Read from each file's own source: every import statement
(also those inside functions) and every module name handed to ``importlib``/``runpy`` as a string."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

SCANNED = ("src", "tests", "workflow")
DYNAMIC_IMPORTS = {"import_module", "run_module", "__import__"}


def benchmark_imports(path: Path) -> list[str]:
    """The ``benchmarks`` modules that ``path`` imports, statically or by name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in DYNAMIC_IMPORTS:
            names = [arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        else:
            continue
        found += [name for name in names if name == "benchmarks" or name.startswith("benchmarks.")]
    return found


def test_nothing_in_src_tests_or_the_workflow_imports_benchmarks() -> None:
    offenders = {str(path.relative_to(REPO)): names for folder in SCANNED for path in sorted((REPO / folder).rglob("*.py"))
                 if (names := benchmark_imports(path))}
    assert not offenders, f"benchmarks/ must stay a leaf; these import it: {offenders}"


def test_the_scan_sees_static_lazy_and_dynamic_imports(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text("import benchmarks.common\nfrom benchmarks import compare\nimport benchmarks_other\n"
                      "def lazy():\n    from benchmarks.extrinsic import main\n"
                      "importlib.import_module('benchmarks.device')\nrunpy.run_module('benchmarks')\n")
    assert benchmark_imports(source) == ["benchmarks.common", "benchmarks", "benchmarks.extrinsic",
                                         "benchmarks.device", "benchmarks"]


def test_benchmarks_stays_small() -> None:
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in (REPO / "benchmarks").rglob("*")
                if path.is_file() and "__pycache__" not in path.parts)
    assert lines <= 1500, f"benchmarks/ holds {lines} lines: keep suites that measure today's code, print, not record"
