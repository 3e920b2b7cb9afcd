"""The workflow as a Snakemake module of another workflow (what snakedeploy sets up): an outer
Snakefile in its own folder uses this repository's workflow/Snakefile by local path and plans the
demo and the paper's study through it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, job_counts

pytestmark = pytest.mark.workflow

OUTER_SNAKEFILE = """\
configfile: "config/config.yaml"


module affine_homotopy:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from affine_homotopy
"""


def outer_snakemake(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=folder, capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """A folder laid out as snakedeploy leaves it: workflow/Snakefile with the module, config/ copied."""
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text(OUTER_SNAKEFILE.format(snakefile=REPO / "workflow" / "Snakefile"))
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path


def test_the_demo_and_the_paper_plan_through_the_module(deployment: Path) -> None:
    demo = outer_snakemake(deployment, "-n", "--cores", "2")
    assert demo.returncode == 0, demo.stderr[-4000:]
    demo_counts = job_counts(demo.stdout)
    assert demo_counts["embed"] == 1 * 2 and demo_counts["derive"] == 6 * 2
    assert demo_counts["all"] == 1  # the module's default target is the outer workflow's
    assert "results/demo/" in demo.stdout
    assert "is imported from" not in demo.stderr  # the module's jobs run the package of the module's checkout

    # the paper replaces the deployment's config/config.yaml (no profile of ours is read here)
    paper = outer_snakemake(deployment, "-n", "--cores", "2", "--configfile", "config/paper.yaml",
                            "--replace-workflow-config")
    assert paper.returncode == 0, paper.stderr[-4000:]
    counts = job_counts(paper.stdout)
    extrinsic_layers = len(yaml.safe_load((deployment / "config" / "paper.yaml").read_text())["extrinsic"]["layers"])
    assert counts["embed"] == 27 * 6 and counts["intrinsic"] == 6 * 4
    assert counts["extrinsic"] == 6 * extrinsic_layers  # extrinsic.layers: the final layer
    assert counts["download_model"] == 27 and "derive" not in counts
    assert "results/paper/" in paper.stdout and "results/demo/" not in paper.stdout
    # the module's own files are found from its folder, not from the outer workflow's
    assert not (deployment / "workflow" / "envs").exists()
