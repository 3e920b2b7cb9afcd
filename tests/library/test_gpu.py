"""GPUs: each concurrent GPU job computes on a GPU of its own, a scheduler's allocation is kept,
`device: cuda` without CUDA stops the workflow at start-up, and the SLURM profile asks for GPUs (and
the GPU partition) exactly for the jobs that request one. CUDA is monkeypatched; the lock files are
real, held by real concurrent processes."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from affine_homotopy.jobs import devices
from affine_homotopy.errors import ConfigError

from tests.helpers import (
    PAPER_GPU_RULES, SLURM_PROFILE, paper_plan, planned_jobs, snakemake, tiny_config, write_config,
)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine with four GPUs (monkeypatched CUDA), no scheduler, and its own lock folder."""
    for variable in ("CUDA_VISIBLE_DEVICES", *devices.SCHEDULER_VARIABLES):
        monkeypatch.delenv(variable, raising=False)
    locks = tmp_path / "locks"
    monkeypatch.setenv(devices.LOCK_DIR_VARIABLE, str(locks))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    yield locks
    devices.release_gpu()


def hold(locks: Path, gpu: str):
    """Claim a GPU as another job would (another open file description: flock locks conflict)."""
    locks.mkdir(parents=True, exist_ok=True)
    handle = open(locks / f"gpu-{gpu}.lock", "a+")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def test_a_job_granted_a_gpu_gets_a_free_one_as_cuda_0(machine: Path) -> None:
    held = [hold(machine, "0"), hold(machine, "1")]
    device = devices.select_device("auto", gpus_granted=1)
    assert device == torch.device("cuda:0")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"  # the first GPU no other job holds
    assert devices.select_device("auto", gpus_granted=1) == torch.device("cuda:0")  # kept, not claimed twice
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    for handle in held:
        handle.close()


def test_no_gpu_granted_or_device_cpu_claims_nothing(machine: Path) -> None:
    assert devices.select_device("auto", gpus_granted=0) == torch.device("cpu")
    assert devices.select_device("cpu", gpus_granted=1) == torch.device("cpu")
    assert "CUDA_VISIBLE_DEVICES" not in os.environ and not machine.exists()


def test_devices_narrowed_by_the_user_are_the_candidates(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    handle = hold(machine, "2")
    assert devices.select_device("cuda", gpus_granted=1) == torch.device("cuda:0")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    handle.close()


def test_a_schedulers_allocation_is_kept(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    hold(machine, "5").close()
    assert devices.select_device("auto", gpus_granted=1) == torch.device("cuda:0")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5" and not devices._claimed


def test_a_job_waits_while_every_gpu_is_claimed(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held = [hold(machine, str(k)) for k in range(4)]
    naps: list[float] = []

    def nap(seconds: float) -> None:  # another job finishes during the third wait
        naps.append(seconds)
        if len(naps) == 3:
            held[1].close()

    assert devices.claim_gpu(poll_s=0.5, sleep=nap) == "1" and len(naps) == 3
    devices.release_gpu()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # a fresh job: the claim above had narrowed it to "1"
    held[1] = hold(machine, "1")
    with pytest.raises(TimeoutError, match="all 4 GPUs"):
        devices.claim_gpu(poll_s=0.5, timeout_s=1.0, sleep=lambda s: None)
    for handle in held:
        handle.close()


CLAIMER = textwrap.dedent("""
    import os, sys
    from affine_homotopy.jobs import devices
    gpu = devices.claim_gpu(count=3, poll_s=0.05, timeout_s=float(sys.argv[1]))
    print(gpu, os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    sys.stdin.read()  # hold the GPU until the test closes stdin
""")


def test_concurrent_processes_claim_different_gpus_and_a_finished_one_frees_its_gpu(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", *devices.SCHEDULER_VARIABLES)}
    env[devices.LOCK_DIR_VARIABLE] = str(tmp_path / "locks")

    def start(timeout_s: float) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", CLAIMER, str(timeout_s)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    jobs = [start(30) for _ in range(3)]
    try:
        claimed = [job.stdout.readline().split() for job in jobs]
        assert sorted(gpu for gpu, _ in claimed) == ["0", "1", "2"], claimed
        assert all(gpu == visible for gpu, visible in claimed)  # each sees only its own GPU
        fourth = start(0.5)  # every GPU claimed: times out
        assert fourth.wait(timeout=60) != 0 and "TimeoutError" in fourth.stderr.read()
        jobs[1].communicate("", timeout=60)  # one job ends ...
        fifth = start(30)
        assert fifth.stdout.readline().split()[0] == claimed[1][0]  # ... and its GPU is the free one
        fifth.communicate("", timeout=60)
    finally:
        for job in jobs:
            if job.poll() is None:
                job.communicate("", timeout=60)


def test_device_cuda_without_cuda_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"config key 'device' has value 'cuda'.*Fix: 'device: auto'"):
        devices.check_device_available("cuda")
    devices.check_device_available("auto")  # auto falls back to the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    devices.check_device_available("cuda")


@pytest.mark.workflow
def test_device_cuda_without_cuda_stops_the_workflow_before_any_job(tmp_path: Path, tiny_models,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, also on a machine that has one
    config = write_config(tmp_path / "cuda.yaml", tiny_config(tiny_models, device="cuda"))
    result = snakemake("--cores", "1", "--configfile", str(config), workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert "config key 'device' has value 'cuda'" in result.stderr
    assert not (tmp_path / "results").exists()
    # extrinsic.device: cuda alone, the rest on the CPU, stops it too, naming that key
    tiny = tiny_config(tiny_models, device="cpu")
    tiny["extrinsic"]["device"] = "cuda"
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "cuda_extrinsic.yaml", tiny)),
                       workdir=tmp_path, check=False)
    assert result.returncode != 0
    assert "config key 'extrinsic.device' has value 'cuda'" in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.workflow
@pytest.mark.parametrize(("device", "extrinsic", "asking"), [
    ("auto", "cpu", {"embed", "intrinsic", "rank_deficiency"}),
    ("cpu", "auto", {"extrinsic"}),
    ("auto", None, {"embed", "intrinsic", "rank_deficiency", "extrinsic"}),
])
def test_extrinsic_device_chooses_the_extrinsic_jobs_gpu_alone(dry_run, tmp_path: Path, tiny_models, device: str,
                                                              extrinsic: str | None, asking: set[str]) -> None:
    tiny = tiny_config(tiny_models, device=device)
    tiny["extrinsic"]["device"] = extrinsic
    jobs = planned_jobs(dry_run("--cores", "2", "--configfile", str(write_config(tmp_path / "c.yaml", tiny))))
    assert {job["rule"] for job in jobs if int(job["resources"].get("gpu", 0)) > 0} == asking


# ---------------------------------------------------------------------------------------------
# the SLURM profile: what the plugin would submit for every planned job


def plugin_submission(job: dict[str, object], partitions) -> tuple[str, str]:
    """(partition, sbatch line) the SLURM plugin builds for a planned job, by the plugin's own code."""
    from snakemake_executor_plugin_slurm import Executor
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    values = {k: int(v) if str(v).isdigit() else v for k, v in job["resources"].items()}

    class Resources(dict):
        __getattr__ = dict.__getitem__

    fake = SimpleNamespace(name=job["rule"], threads=job["threads"], resources=Resources(values))
    logger = SimpleNamespace(info=lambda *a: None, debug=lambda *a: None, warning=lambda *a: None)
    # the executor's own choice: a partition named in the job's resources, else the best fit of
    # partitions.yaml (the fallback stands in for asking sinfo for the cluster's default)
    executor = SimpleNamespace(_partitions=partitions, logger=logger, _fallback_partition="<sinfo-default>")
    partition_arg = Executor.get_partition_arg(executor, fake)
    params = {"run_uuid": "test", "slurm_logfile": "log", "comment_str": job["rule"], "account": "",
              "partition": partition_arg, "workdir": None}
    return shlex.split(partition_arg)[1], get_submit_command(fake, params) + set_gres_string(fake)


@pytest.mark.workflow
@pytest.mark.slow
@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_the_slurm_profile_sends_only_gpu_jobs_to_the_gpu_partition(dry_run, device: str) -> None:
    from snakemake_executor_plugin_slurm.partitions import read_partition_file

    partitions = read_partition_file(SLURM_PROFILE / "partitions.yaml")
    jobs = planned_jobs(dry_run(*paper_plan(device, slurm=True)))
    assert len(jobs) > 400  # the paper's whole plan
    for job in jobs:
        partition, sbatch = plugin_submission(job, partitions)
        wants_gpu = device != "cpu" and job["rule"] in PAPER_GPU_RULES
        assert partition == ("<gpu-partition>" if wants_gpu else "<cpu-partition>"), (device, job["rule"], partition)
        assert ("--gpus=1" in sbatch) == wants_gpu, (device, job["rule"], sbatch)
        assert ("-p '<gpu-partition>'" in sbatch) == wants_gpu, sbatch
    assert {job["rule"] for job in jobs} >= PAPER_GPU_RULES | {"extrinsic_part"}
