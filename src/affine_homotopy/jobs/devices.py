"""Which device a computation runs on, and which GPU each concurrent job of a machine gets.

Snakemake schedules GPU jobs by a ``gpu`` resource count (``--resources gpu=N`` caps how many run at
once on one machine), but it does not say *which* GPU a job should use: without more, N concurrent
jobs would all compute on the first one. So a job that was granted a GPU claims one here, before
torch initialises CUDA: it takes an exclusive ``fcntl`` lock on one lock file per GPU (in
``$AFFINE_HOMOTOPY_GPU_LOCKS``, default a per-user folder in the system's temporary directory) and
narrows ``CUDA_VISIBLE_DEVICES`` to that GPU, which torch then calls ``cuda:0``. The lock is held for
the life of the process and released by the operating system when it ends, also when it crashes,
so no stale claim survives a killed job. When every GPU is claimed, the job waits for one.

Under a cluster scheduler (``SLURM_JOB_ID`` set) the scheduler has already given the job its own
GPUs through ``CUDA_VISIBLE_DEVICES``; nothing is claimed then.

torch is imported inside the functions, so that importing this module stays light.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Callable

from ..errors import ConfigError

log = logging.getLogger(__name__)

LOCK_DIR_VARIABLE = "AFFINE_HOMOTOPY_GPU_LOCKS"
# Variables a cluster scheduler sets when it allocated this job's resources (GPUs included).
SCHEDULER_VARIABLES = ("SLURM_JOB_ID",)
_claimed: dict[str, IO[Any]] = {}  # GPU -> its open, locked lock file, kept for the process's life


def default_lock_dir() -> Path:
    """Where the GPU lock files live: ``$AFFINE_HOMOTOPY_GPU_LOCKS``, else a per-user temporary folder
    shared by every job of this machine."""
    configured = os.environ.get(LOCK_DIR_VARIABLE)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"affine_homotopy-gpus-{os.getuid()}"


def candidate_gpus(count: int) -> list[str]:
    """The GPUs this process may claim, as ``CUDA_VISIBLE_DEVICES`` entries: those already listed there
    (a user or a scheduler narrowed them), else ``0 .. count - 1``."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    return [str(k) for k in range(count)]


def _try_claim(gpu: str, lock_dir: Path) -> IO[Any] | None:
    handle = open(lock_dir / f"gpu-{gpu.replace('/', '_')}.lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")  # for a person looking: which process holds it
    handle.flush()
    return handle


def claim_gpu(count: int | None = None, lock_dir: str | Path | None = None, poll_s: float = 2.0,
              timeout_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Claim one GPU for this process and make it the only visible one; returns its
    ``CUDA_VISIBLE_DEVICES`` entry, or ``None`` when there is no GPU (or a scheduler assigned them).

    Call before anything initialises CUDA in this process (``torch.cuda.device_count`` does not: it
    asks NVML). ``count``: GPUs on the machine (default: ``torch.cuda.device_count()``). Waits, polling
    every ``poll_s`` seconds, while every GPU is claimed by other processes; ``timeout_s`` bounds the
    wait (``TimeoutError``).
    """
    if _claimed:  # claimed already in this process: keep it
        return next(iter(_claimed))
    if any(os.environ.get(v) for v in SCHEDULER_VARIABLES):
        return None  # the scheduler's CUDA_VISIBLE_DEVICES is this job's own
    if count is None:
        import torch

        count = torch.cuda.device_count()
    candidates = candidate_gpus(count)
    if not candidates:
        return None
    folder = Path(lock_dir) if lock_dir is not None else default_lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    waited = 0.0
    while True:
        for gpu in candidates:
            handle = _try_claim(gpu, folder)
            if handle is not None:
                _claimed[gpu] = handle
                os.environ["CUDA_VISIBLE_DEVICES"] = gpu
                log.info("claimed GPU %s (CUDA_VISIBLE_DEVICES=%s; lock in %s)", gpu, gpu, folder)
                return gpu
        if timeout_s is not None and waited >= timeout_s:
            raise TimeoutError(f"all {len(candidates)} GPUs ({', '.join(candidates)}) stayed claimed for "
                               f"{waited:.0f} s (lock files in {folder})")
        if waited == 0:
            log.info("all %d GPUs are in use by other jobs; waiting for one (run with --resources gpu=%d "
                     "to let Snakemake schedule around them)", len(candidates), len(candidates))
        sleep(poll_s)
        waited += poll_s


def release_gpu() -> None:
    """Give back this process's claim (it ends with the process anyway); the visible devices stay."""
    for handle in _claimed.values():
        handle.close()
    _claimed.clear()


def select_device(preference: str = "auto", gpus_granted: int | None = None) -> Any:
    """The torch device to compute on.

    ``preference``: ``cpu``, ``cuda`` or ``auto`` (CUDA when the job holds a GPU and one is visible).
    ``gpus_granted``: the job's ``gpu`` resource; ``None`` means "not run by Snakemake" and lets ``auto``
    use any visible GPU. A job granted a GPU on a machine with GPUs claims one of its own first
    (:func:`claim_gpu`) and gets ``cuda:0``, the claimed GPU; otherwise CUDA is torch's current device.
    """
    import torch

    if preference == "cpu":
        return torch.device("cpu")
    # a job holding a GPU computes on its own one, cuda:0 once the claim has narrowed the visible
    # devices; elsewhere (the library API, a job without a GPU) torch's current CUDA device
    claimed = gpus_granted is not None and gpus_granted > 0 and torch.cuda.device_count() > 0
    if claimed:
        claim_gpu()
    cuda = torch.device("cuda:0" if claimed else "cuda")
    available = torch.cuda.is_available()
    if preference == "cuda":
        if not available:
            raise RuntimeError("device: cuda was configured, but no CUDA device is visible to this job")
        return cuda
    granted = gpus_granted is None or gpus_granted > 0
    return cuda if available and granted else torch.device("cpu")


def check_device_available(device: str, key: str = "device") -> None:
    """At workflow start-up, for jobs that run on this machine: ``device: cuda`` (or the config ``key``
    that chose it, e.g. ``extrinsic.device``) needs CUDA here."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"config key '{key}' has value 'cuda', but this machine has no usable CUDA device "
            f"(torch.cuda.is_available() is False), so every GPU job would fail. Fix: '{key}: auto' (CUDA "
            f"where a job is given a GPU, else the CPU) or '{key}: cpu', or run where CUDA is available."
        )
