"""Operations: staging errors, offline compute jobs, interruption and resume."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.errors import StagingError
from affine_homotopy.models.encoders import load_encoder
from affine_homotopy.models.staging import staged_model_dir, stage_model
from affine_homotopy.models.task_data import staged_task_file

from tests.helpers import SNAKEMAKE, snakemake, tiny_config, write_config
from tests.tolerances import relative_tolerance

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(1800)]


def test_missing_model_fails_at_staging_and_no_compute_job_starts(tmp_path: Path, tiny_models) -> None:
    config = tiny_config(tiny_models)
    config["encoders"]["ghost"] = {"source": "hf", "model": "no-such-org/no-such-model"}
    result = snakemake("--cores", "2", "--configfile", str(write_config(tmp_path / "c.yaml", config)),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    log = (tmp_path / "results" / "tiny" / "logs" / "download" / "model_ghost.log").read_text()
    assert "could not stage 'no-such-org/no-such-model'" in log and "route 'cache', because HF_HUB_OFFLINE=1" in log
    assert "resources/models/ghost" in log  # where to place the files by hand
    logs = tmp_path / "results" / "tiny" / "logs"
    started = [p.parent.name for p in logs.rglob("*.log") if p.parent.name != "download"]
    assert not started, f"compute jobs started although staging failed: {started}"
    assert not (tmp_path / "resources" / "models" / "ghost").exists()


def test_stage_model_offline_names_model_and_manual_route(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))
    with pytest.raises(StagingError, match=r"could not stage 'org/none'.*route 'cache'.*copy a Hugging Face model folder"):
        stage_model("x", {"model": "org/none", "revision": None}, tmp_path / "x")


def test_compute_job_without_staged_files_names_path_and_target(tmp_path: Path) -> None:
    with pytest.raises(StagingError, match=r"no staged model at .*models/bert.*snakemake --cores 1 .*STAGED\.json"):
        staged_model_dir("bert", tmp_path / "resources" / "models" / "bert")
    with pytest.raises(StagingError, match=r"no staged data at .*sst2/train\.parquet"):
        staged_task_file("sst2", tmp_path / "resources" / "data" / "sst2", "train")
    with pytest.raises(StagingError, match="no staged model"):
        load_encoder("bert", {"source": "hf", "model": "bert-base-uncased"}, staged=tmp_path / "nothing")


def test_staged_model_is_read_offline_with_its_commit(tmp_path: Path, tiny_models) -> None:
    staged = tmp_path / "resources" / "models" / "tiny"
    staged.mkdir(parents=True)
    for file in Path(tiny_models["tiny_a"]).iterdir():
        (staged / file.name).write_bytes(file.read_bytes())
    (staged / "STAGED.json").write_text('{"model": "org/tiny", "commit": "abc123"}')
    encoder = load_encoder("tiny", {"source": "hf", "model": "org/tiny"}, staged=staged)
    assert encoder.revision == "abc123" and encoder.depth == 2


def test_interrupted_run_resumes_to_the_same_results(tmp_path: Path, tiny_run) -> None:
    """The tiny study killed in its first intrinsic job, then resumed: its results equal the shared clean
    run's (tiny_run, the same config). The target is one task's intrinsic jobs at both layers (and the
    data, embed and derive jobs before them), not the whole study: the jobs after them would run in the
    resumed run as in any run."""
    results, config = tiny_run
    reference, interrupted = results.parent.parent, tmp_path / "interrupted"
    interrupted.mkdir()
    write_config(interrupted / "c.yaml", config)
    targets = [f"results/tiny/intrinsic/sent/layer{layer}/d_aff.csv" for layer in config["layers"]]

    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    # the targets before --configfile, which would take them as more config files
    process = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(interrupted), *targets, "--cores", "2", "--configfile", str(interrupted / "c.yaml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
    )
    logs = interrupted / "results" / "tiny" / "logs" / "intrinsic"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (logs.exists() and list(logs.glob("*.log"))):
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be interrupted"
    os.killpg(process.pid, signal.SIGKILL)  # the whole job tree, mid-run: nothing gets to clean up
    process.wait(timeout=120)

    # a killed Snakemake leaves its lock behind: release it, then resume
    snakemake("--unlock", "--configfile", str(interrupted / "c.yaml"), workdir=interrupted)
    result = snakemake(*targets, "--cores", "2", "--configfile", str(interrupted / "c.yaml"), "--rerun-incomplete",
                       workdir=interrupted)
    assert result.returncode == 0
    resumed = sorted(p.relative_to(interrupted) for p in (interrupted / "results").rglob("*.csv"))
    assert {Path(t) for t in targets} <= set(resumed)
    for relative in resumed:
        ours, theirs = pd.read_csv(reference / relative), pd.read_csv(interrupted / relative)
        numeric = ours.select_dtypes("number").columns
        np.testing.assert_allclose(ours[numeric].to_numpy(float), theirs[numeric].to_numpy(float),
                                   rtol=relative_tolerance(relative), atol=1e-9, err_msg=str(relative))
    leftovers = [p for p in (interrupted / "results").rglob(".*.tmp")]
    assert not leftovers, f"temporary files left behind: {leftovers}"
