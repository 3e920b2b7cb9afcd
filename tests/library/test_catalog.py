"""What the Snakemake workflow catalog expects of a repository: the standard layout, a config README
that documents every key, a licence, a citation, the catalog's usage file, snakefmt-clean workflow
files and a clean lint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, SCHEMA


def schema_keys(node: object) -> set[str]:
    """Every property name anywhere in the config schema (top level, sections, encoder and task specs)."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for name, child in node.get("properties", {}).items():
            keys.add(name)
            keys |= schema_keys(child)
        for key, child in node.items():
            if key != "properties":
                keys |= schema_keys(child)
    elif isinstance(node, list):
        for child in node:
            keys |= schema_keys(child)
    return keys


def test_the_standard_layout_is_in_place() -> None:
    for path in ("workflow/Snakefile", "workflow/envs", "workflow/rules", "workflow/scripts", "workflow/schemas",
                 "workflow/report", "workflow/profiles/default", "config/config.yaml", "config/README.md",
                 "LICENSE", "CITATION.cff", ".snakemake-workflow-catalog.yml"):
        assert (REPO / path).exists(), f"{path} is missing"
    assert not (REPO / "Snakefile").exists(), "a root Snakefile would shadow workflow/Snakefile"


def test_the_config_readme_documents_every_key_and_every_shipped_config() -> None:
    readme = (REPO / "config" / "README.md").read_text()
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", readme))
    missing = sorted(schema_keys(yaml.safe_load(SCHEMA.read_text())) - documented)
    assert not missing, f"config/README.md does not document the keys {missing}"
    for config in sorted((REPO / "config").glob("*.yaml")):
        assert f"`{config.name}`" in readme, f"config/README.md does not describe {config.name}"


def test_the_licence_citation_and_catalog_file_are_well_formed() -> None:
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"].startswith("1.2") and citation["license"] == "MIT"
    paper = citation["preferred-citation"]
    assert paper["title"] == "On Affine Homotopy between Language Encoders" and paper["year"] == 2024
    families = [a["family-names"] for a in paper["authors"]]
    assert families[0] == "Chan" and families[-1] == "Cotterell" and len(families) == 11
    assert any("2406.02329" in i["value"] for i in paper["identifiers"])
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert any(usage["software-stack-deployment"].values()) and "report" in usage


@pytest.mark.workflow
def test_snakefmt_leaves_every_workflow_file_unchanged() -> None:
    result = subprocess.run([sys.executable, "-m", "snakefmt", "--check", str(REPO / "workflow")],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, f"snakefmt --check workflow would reformat files:\n{result.stderr[-3000:]}"


@pytest.mark.workflow
@pytest.mark.parametrize("config", ["config.yaml", "paper.yaml"])
def test_lint_is_clean(tmp_path: Path, config: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "--directory", str(tmp_path),
         "--configfile", str(REPO / "config" / config), "--lint", "json"],
        capture_output=True, text=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"), timeout=300,
    )
    # --lint exits 1 when it has lints; in JSON mode it prints them (nothing when clean)
    lints = json.loads(result.stdout) if result.stdout.strip() else {}
    assert result.returncode == 0 and not any(lints.values()), (result.returncode, lints, result.stderr[-2000:])


@pytest.mark.workflow
def test_lint_fails_on_a_rule_with_lints(tmp_path: Path) -> None:
    """The control of test_lint_is_clean: this Snakemake's --lint does exit 1 on a rule without a log
    directive that writes to an absolute path, so exit 0 above means no lints."""
    (tmp_path / "Snakefile").write_text('rule a:\n    output: "a.txt"\n    shell: "touch /tmp/a.txt {output}"\n')
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
