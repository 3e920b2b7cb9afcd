"""The conda environments pin exactly the versions pyproject.toml pins (they must not drift)."""

from __future__ import annotations

import re
import tomllib

import yaml

from .conftest import REPO

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def python_requirements() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        match = PIN.match(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not an exact pin (name==version)"
        pins[canonical(match[1])] = match[2]
    return pins


def test_every_env_pins_the_python_requirements() -> None:
    required = python_requirements()
    envs = sorted((REPO / "envs").glob("*.yaml"))
    assert envs, "no envs/*.yaml found"
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip_section = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        assert "python=3.11" in spec["dependencies"], f"{env.name}: python=3.11 not pinned"
        for line in pip_section:
            match = PIN.match(line)
            assert match, f"{env.name}: {line!r} is not an exact pin"
            name, version = canonical(match[1]), match[2]
            assert name in required, f"{env.name}: {name} is not a requirement in pyproject.toml"
            assert required[name] == version, f"{env.name}: {name}=={version}, pyproject.toml pins {required[name]}"


def test_every_rule_uses_an_existing_env() -> None:
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        for env in re.findall(r'conda:\s*\n\s*"([^"]+)"', rules.read_text()):
            assert (rules.parent / env).resolve().is_file(), f"{rules.name}: {env} does not exist"
