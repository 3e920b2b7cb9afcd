"""One set of exact versions for the study: constraints.txt. The conda environments pin exactly those
versions, every pin lies in the range pyproject.toml allows, and every dependency has a pin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

from tests.helpers import REPO, rule_blocks

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)$")
# Every env installs the project itself; workflow/rules/startup.smk sets the variable, pip expands it.
SELF_INSTALL = "-e ${AFFINE_HOMOTOPY_PROJECT}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        assert match, f"constraints.txt: {line!r} is not an exact pin (name==version)"
        assert canonical(match[1]) not in pins, f"constraints.txt pins {match[1]} twice"
        pins[canonical(match[1])] = match[2]
    assert len(pins) >= 10, "constraints.txt holds fewer pins than the study's direct dependencies"
    return pins


def requirements() -> list[Requirement]:
    """Every requirement of pyproject.toml: the core and all extras (self-references left out)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    return [Requirement(r) for r in listed if canonical(Requirement(r).name) != canonical(project["name"])]


def test_every_env_pins_the_constraints() -> None:
    pins = constraints()
    envs = sorted((REPO / "workflow" / "envs").glob("*.yaml"))
    assert envs, "no workflow/envs/*.yaml found"
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip_section = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        assert "python=3.11" in spec["dependencies"], f"{env.name}: python=3.11 not pinned"
        assert pip_section, f"{env.name}: empty pip section"
        assert pip_section.count(SELF_INSTALL) == 1, f"{env.name}: does not install the project ({SELF_INSTALL!r})"
        for line in pip_section:
            if line == SELF_INSTALL:
                continue
            match = PIN.match(line)
            assert match, f"{env.name}: {line!r} is not an exact pin"
            name, version = canonical(match[1]), match[2]
            assert name in pins, f"{env.name}: {name} is not pinned in constraints.txt"
            assert pins[name] == version, f"{env.name}: {name}=={version}, constraints.txt pins {pins[name]}"


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = constraints()
    for requirement in requirements():
        name = canonical(requirement.name)
        assert name in pins, f"pyproject.toml requires {requirement}, but constraints.txt does not pin it"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's range {requirement}"
    assert pins["torch"] == "2.13.0"  # the CPU wheel on the project's machines (a range must not pull CUDA)


def test_the_core_library_has_ranges_not_pins() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {canonical(Requirement(r).name): Requirement(r) for r in project["dependencies"]}
    assert set(core) == {"numpy", "scipy", "torch", "threadpoolctl"}
    for name, requirement in core.items():
        bounds = {spec.operator for spec in requirement.specifier}
        assert ">=" in bounds and "<" in bounds, f"{name}: needs a lower bound and an upper range, got {requirement}"


def test_every_rule_uses_an_existing_env() -> None:
    for file, name, block in rule_blocks():
        env = re.search(r'(?m)^    conda:\n        "([^"]+)"', block)
        assert env, f"{file}: rule {name} has no conda environment"
        assert (REPO / "workflow" / "rules" / env[1]).resolve().is_file(), f"{file}: rule {name}: {env[1]} does not exist"


def test_the_envs_install_this_project_wherever_snakemake_copies_them(tmp_path: Path) -> None:
    """Snakemake copies an env file to .snakemake/conda/<hash>.yaml before conda builds it, and conda
    runs the pip section as `pip install -r <requirements file>` there. The self-install line must then
    name this project: resolved as pip would, from a requirements file in an unrelated folder."""
    spec = yaml.safe_load((REPO / "workflow" / "envs" / "compute.yaml").read_text())
    pip_section = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
    copied = tmp_path / ".snakemake" / "conda"
    copied.mkdir(parents=True)
    (copied / "requirements.txt").write_text("\n".join(line for line in pip_section if "AFFINE_HOMOTOPY" in line) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation", "--quiet",
         "--report", "-", "-r", "requirements.txt"],
        cwd=copied, capture_output=True, text=True, timeout=300, env=dict(os.environ, AFFINE_HOMOTOPY_PROJECT=str(REPO)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    installs = json.loads(result.stdout)["install"]
    assert [(i["metadata"]["name"], i["download_info"]["url"]) for i in installs] == [("affine-homotopy", REPO.as_uri())]
