"""The tiny study through workflow/profiles/slurm on a real single-node SLURM: same results as a local run
(the shared tiny run, tests/conftest.py), on a target of about fifteen jobs of every compute stage up to
the extrinsic one.

The cluster is started by tests/workflow/slurm/cluster.sh (Debian's munge + slurm, installed if missing) and
stopped again by PID, both in the run's early work (slurm_run), which runs in its own lane beside the
studies: the cluster run mostly waits. Where SLURM cannot be started (not root, no package manager) the test skips
with the reason, and that skip fails the run (tests/conftest.py: CI runs as root and must run it);
AFFINE_HOMOTOPY_ALLOW_SKIPS=1 lets a local run without root pass over it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.helpers import GPU_CAPABLE, REPO, cluster_env, snakemake, started_early, tiny_config, write_config
from tests.tolerances import relative_tolerance

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(2400)]  # cluster start-up, the tiny run, the cluster run
CLUSTER = REPO / "tests" / "workflow" / "slurm" / "cluster.sh"


def cluster_targets(config) -> list[str]:
    """One task's extrinsic job at the last layer and its probe table: its data, embed, derive,
    intrinsic and probe jobs run first, every rule that computes (the figures and Table 1, plain
    Python on the results, are left out)."""
    task, layer = next(iter(config["tasks"])), config["layers"][-1]
    return [f"results/tiny/extrinsic/{task}/layer{layer}/d_psi.csv", f"results/tiny/probes/{task}/layer{layer}.csv"]


@started_early(lane="cluster")
def slurm_run(request: pytest.FixtureRequest, environ) -> Callable[[], dict[str, Any]]:
    """The tiny study's config (tests/helpers.tiny_config, as the shared tiny run) run on a single-node SLURM
    started for it, in the cluster lane (its time is mostly SLURM's scheduling and status checks, which
    overlap with the studies and the tests): the folder, the config, the run's wall seconds, the time of its
    first submission and the lines of SLURM's job-completion log. The cluster is stopped before it returns."""
    config = tiny_config(request.getfixturevalue("tiny_models"))
    root = request.getfixturevalue("tmp_path_factory").mktemp("slurm")
    cluster, state = root / "cluster", root / "slurm_state"
    cluster.mkdir()
    state.mkdir()
    write_config(cluster / "tiny.yaml", config)
    env = cluster_env(environ)

    def work() -> dict[str, Any]:
        if os.geteuid() != 0:
            pytest.skip("starting SLURM daemons needs root")
        if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
            pytest.skip("SLURM is not installed and there is no apt-get to install it")
        daemons = dict(env, SLURM_TEST_STATE=str(state))
        started = subprocess.run(["bash", str(CLUSTER), "up"], env=daemons, capture_output=True, text=True, timeout=600)
        if started.returncode != 0:
            pytest.skip(f"could not start a single-node SLURM: {started.stderr[-800:]}")
        try:
            submitted_after, began = time.time(), time.monotonic()
            snakemake(
                *cluster_targets(config),  # before --configfile, which would take them as more config files
                "--workflow-profile", str(REPO / "workflow" / "profiles" / "slurm"),
                "--configfile", str(cluster / "tiny.yaml"),
                "--jobs", "4",
                # the test cluster: no account, one partition, no GPUs, no sacct (no slurmdbd)
                "--slurm-no-account",
                "--default-resources", "slurm_partition=debug",
                "--set-resources", *(f"{rule}:slurm_partition=debug" for rule in sorted(GPU_CAPABLE)),
                *(f"{rule}:gpu=0" for rule in sorted(GPU_CAPABLE)),
                "--slurm-status-command", "squeue",
                "--slurm-init-seconds-before-status-checks", "2",
                "--seconds-between-status-checks", "2",
                "--latency-wait", "5",
                workdir=cluster, environ=env,
            )
            seconds = time.monotonic() - began
            config_text = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=60,
                                         env=env).stdout
            jobcomp = re.search(r"JobCompLoc\s*=\s*(\S+)", config_text)[1]  # ours, or a running cluster's
            records = Path(jobcomp).read_text().splitlines()
        finally:
            subprocess.run(["bash", str(CLUSTER), "down"], env=daemons, capture_output=True, text=True, timeout=120)
        return {"folder": cluster, "config": config, "seconds": seconds, "submitted_after": submitted_after,
                "records": records}

    return work


def test_tiny_study_through_the_slurm_profile(slurm_run, tiny_run) -> None:
    results, config = tiny_run
    local, cluster = results.parent.parent, slurm_run["folder"]
    assert slurm_run["config"] == config
    print(f"SLURM run took {slurm_run['seconds']:.0f} s")

    # SLURM's own records: every job of this run finished COMPLETED, run from this workdir
    ours = [r for r in slurm_run["records"] if f"WorkDir={cluster}" in r]
    assert ours, "no SLURM job of this run in SLURM's job-completion log"
    assert all("JobState=COMPLETED" in r for r in ours), [r for r in ours if "COMPLETED" not in r]
    submit_times = [re.search(r"SubmitTime=(\S+)", r)[1] for r in ours]
    submitted_after = slurm_run["submitted_after"]
    assert all(time.mktime(time.strptime(t, "%Y-%m-%dT%H:%M:%S")) >= int(submitted_after) - 1 for t in submit_times)
    assert len(ours) >= 10  # data, embed, derive, intrinsic, probes, probe table, extrinsic

    # the same numbers as the local run
    cluster_csvs = sorted(p.relative_to(cluster) for p in (cluster / "results").rglob("*.csv"))
    assert {Path(target) for target in cluster_targets(config)} <= set(cluster_csvs)
    for relative in cluster_csvs:
        assert (local / relative).is_file(), f"{relative} missing from the local run"
        a, b = pd.read_csv(local / relative), pd.read_csv(cluster / relative)
        assert list(a.columns) == list(b.columns)
        numeric = a.select_dtypes("number").columns
        np.testing.assert_allclose(a[numeric].to_numpy(float), b[numeric].to_numpy(float),
                                   rtol=relative_tolerance(relative), atol=1e-9,
                                   err_msg=str(relative))
