"""select_device, the one place that picks CPU or CUDA (the API and every compute job call it), with
CUDA's availability monkeypatched both ways, so that the CUDA branches run on a CPU-only machine."""

from __future__ import annotations

import pytest
import torch

from affine_homotopy.jobs.devices import select_device


@pytest.fixture(params=[True, False], ids=["cuda-visible", "no-cuda"])
def cuda(request, monkeypatch) -> bool:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: request.param)
    return request.param


def test_cpu_is_cpu_whatever_is_visible(cuda: bool) -> None:
    for granted in (None, 0, 1):
        assert select_device("cpu", granted) == torch.device("cpu")


def test_cuda_is_cuda_when_visible_and_a_named_error_when_not(cuda: bool) -> None:
    if cuda:
        assert select_device("cuda") == torch.device("cuda")
        assert select_device("cuda", 0) == torch.device("cuda")  # asked for explicitly: the config wins
    else:
        with pytest.raises(RuntimeError, match=r"device: cuda was configured, but no CUDA device is visible"):
            select_device("cuda")


@pytest.mark.parametrize("granted,expected_with_cuda", [(None, "cuda"), (1, "cuda"), (2, "cuda"), (0, "cpu")],
                         ids=["outside-snakemake", "one-gpu", "two-gpus", "no-gpu-granted"])
def test_auto_uses_a_visible_gpu_only_when_the_job_holds_one(cuda: bool, granted, expected_with_cuda: str) -> None:
    expected = expected_with_cuda if cuda else "cpu"
    assert select_device("auto", granted) == torch.device(expected)
    if granted is None:
        assert select_device() == torch.device(expected)  # auto is the default


def test_the_api_passes_the_choice_through(monkeypatch) -> None:
    """With CUDA reported visible, device='cpu' still computes on the CPU (a real value comes back)."""
    import numpy as np

    import affine_homotopy as ah

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    x = np.random.default_rng(0).standard_normal((30, 3))
    assert ah.d_aff(x, x @ np.eye(3) + 1.0, device="cpu").upper < 1e-9
