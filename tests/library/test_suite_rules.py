"""The suite's own rules (tests/conftest.py, pyproject.toml), run on a throw-away suite: a skip, an
xfail, an unregistered marker or an optional test with a reason off the allow-list fails; CI refuses
AFFINE_HOMOTOPY_ALLOW_SKIPS; workflow and install imply slow; a hung test is stopped by the timeout. And
no test module imports another: what they share is in tests/helpers.py, tests/conftest.py and
tests/tolerances.py."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

SUITE = '''
import time
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("a dependency is missing")

@pytest.mark.xfail(reason="known bug")
def test_xfails():
    assert False

@pytest.mark.xfail(reason="known bug")
def test_xpasses():
    pass

@pytest.mark.optional(reason="shared_glue")
def test_optional_glue_skips():
    pytest.skip("no GLUE files")

@pytest.mark.workflow
def test_workflow():
    pass

@pytest.mark.install
def test_install():
    pass

@pytest.mark.timeout(2)
def test_hangs():
    time.sleep(60)
'''


def run_suite(tmp_path: Path, source: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest on a suite made of this repository's conftest.py (with the helpers it imports) and pytest
    settings and ``source``."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "tests").mkdir(exist_ok=True)
    for name in ("__init__.py", "conftest.py", "helpers.py"):
        shutil.copy(REPO / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_it.py").write_text(source)
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", "AFFINE_HOMOTOPY_ALLOW_SKIPS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args],
                          cwd=tmp_path, capture_output=True, text=True, env={**environment, **env}, timeout=120)


def outcomes(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^tests/test_it\.py::(\w+) (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)",
                                             result.stdout, re.M)}


def test_skips_xfails_and_hangs_fail_the_run(tmp_path: Path) -> None:
    result = run_suite(tmp_path, SUITE)
    found = outcomes(result)
    assert result.returncode == 1, result.stdout[-3000:]
    # the optional test is tolerated only because this throw-away suite has no ../shared/glue
    assert found == {"test_passes": "PASSED", "test_skips": "FAILED", "test_xfails": "FAILED",
                     "test_xpasses": "FAILED", "test_optional_glue_skips": "SKIPPED", "test_workflow": "PASSED",
                     "test_install": "PASSED", "test_hangs": "FAILED"}, result.stdout[-3000:]
    assert "SKIPPED, but this test must run: a dependency is missing" in result.stdout
    assert "an expected failure checks nothing" in result.stdout
    assert "[XPASS(strict)]" in result.stdout  # xfail_strict
    assert "Timeout" in result.stdout


def test_allow_skips_turns_the_failures_back_into_skips_except_under_ci(tmp_path: Path) -> None:
    result = run_suite(tmp_path, SUITE, "-k", "skips or xfails", AFFINE_HOMOTOPY_ALLOW_SKIPS="1")
    assert result.returncode == 0 and outcomes(result) == {
        "test_skips": "SKIPPED", "test_xfails": "XFAIL", "test_optional_glue_skips": "SKIPPED"}, result.stdout[-3000:]
    refused = run_suite(tmp_path, SUITE, AFFINE_HOMOTOPY_ALLOW_SKIPS="1", CI="true")
    assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]  # a usage error, nothing ran
    assert "AFFINE_HOMOTOPY_ALLOW_SKIPS=1 is refused when CI is set" in refused.stderr


def test_workflow_and_install_imply_slow(tmp_path: Path) -> None:
    fast = run_suite(tmp_path, SUITE, "-m", "not slow", "--collect-only", "-q", "-q")  # -v -q -q: node ids
    assert fast.returncode == 0, fast.stdout[-2000:]
    collected = set(re.findall(r"::(\w+)$", fast.stdout, re.M))
    assert collected == {"test_passes", "test_skips", "test_xfails", "test_xpasses", "test_optional_glue_skips",
                         "test_hangs"}


@pytest.mark.parametrize("source,message", [
    ('import pytest\n@pytest.mark.optional(reason="my laptop has no GPU")\ndef test_a():\n    pytest.skip("x")\n',
     "@pytest.mark.optional(reason=...) takes one of ['cuda', 'shared_glue']"),
    ("import pytest\n@pytest.mark.quick\ndef test_a():\n    pass\n", "'quick' not found in `markers`"),
    ('import pytest\npytest.skip("not today", allow_module_level=True)\n', "was skipped as a whole: not today"),
], ids=["optional-off-the-list", "unregistered-marker", "module-level-skip"])
def test_a_suite_that_could_pass_unchecked_is_refused(tmp_path: Path, source: str, message: str) -> None:
    result = run_suite(tmp_path, source)
    assert result.returncode != 0 and message in result.stdout + result.stderr, result.stdout[-2000:] + result.stderr


def imported_modules(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, dotted name) of every module a file under ``root`` imports, relative imports resolved against
    its package; ``from package import name`` also yields ``package.name``, which may be a module."""
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def test_no_test_module_imports_another() -> None:
    offenders = [f"{path.relative_to(REPO)}:{line}: imports {module}"
                 for path in sorted((REPO / "tests").rglob("*.py"))
                 for line, module in imported_modules(path)
                 if module.split(".")[0] == "tests" and module.split(".")[-1].startswith("test_")]
    assert not offenders, ("a test module imports another test module; move what they share to tests/helpers.py "
                           "(a fixture: tests/conftest.py):\n  " + "\n  ".join(offenders))


def test_the_import_check_sees_every_form_of_import(tmp_path: Path) -> None:
    probe = tmp_path / "tests" / "workflow" / "test_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from .test_workflow import snakemake\nfrom ..models.test_staging_cache import MB0\n"
                     "from tests.workflow import test_resources\nimport tests.study.test_lock\n"
                     "def f():\n    from tests.helpers import REPO\n")
    modules = {module for _, module in imported_modules(probe, tmp_path)}
    assert {"tests.workflow.test_workflow", "tests.models.test_staging_cache", "tests.workflow.test_resources",
            "tests.study.test_lock", "tests.helpers", "tests.helpers.REPO"} <= modules, modules
