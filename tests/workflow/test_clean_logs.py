"""Clean logs: the probes take the read-only arrays the workflow hands them (labels from a parquet
table, memory-mapped embeddings) without PyTorch's non-writable-array warning, and a job's Python
warnings are written to its log (where tests/workflow/test_workflow.py looks for them after a tiny run)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.core import probes

from affine_homotopy.jobs import runner


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, np.ndarray]:
    """What probe.py reads: labels through pandas/pyarrow, embeddings through a memory map."""
    folder = tmp_path_factory.mktemp("ro")
    rng = np.random.default_rng(0)
    pd.DataFrame({"label": rng.integers(0, 2, 60)}).to_parquet(folder / "t.parquet")
    np.save(folder / "x.npy", rng.standard_normal((60, 5)).astype(np.float32))
    labels = pd.read_parquet(folder / "t.parquet")["label"].to_numpy()
    embeddings = np.asarray(np.load(folder / "x.npy", mmap_mode="r"), dtype=np.float32)
    return embeddings, labels


def test_the_inputs_are_read_only_as_in_the_workflow(read_only) -> None:
    embeddings, labels = read_only
    assert not embeddings.flags.writeable  # else the tests below would check nothing
    assert not labels.flags.writeable or not np.asarray(labels, dtype=np.int64).flags.writeable


@pytest.mark.parametrize("fit", ["task", "heads", "random_sgd", "random_lbfgs"])
def test_probes_raise_no_warning_on_read_only_input(read_only, fit: str, monkeypatch) -> None:
    """PyTorch warns about a read-only array once per process, so a warning filter alone would see only
    the first case: torch.from_numpy and torch.as_tensor are wrapped to refuse read-only arrays."""
    import torch

    embeddings, labels = read_only
    heads = np.stack([labels, labels[::-1]], axis=1)
    heads.setflags(write=False)
    handed: list[bool] = []
    for name in ("from_numpy", "as_tensor"):
        original = getattr(torch, name)

        def checked(array, *args, _original=original, **kwargs):
            if isinstance(array, np.ndarray):
                handed.append(array.flags.writeable)
                assert array.flags.writeable, f"a read-only array {array.shape} handed to torch"
            return _original(array, *args, **kwargs)

        monkeypatch.setattr(torch, name, checked)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        if fit == "task":
            probes.fit_softmax_probe(embeddings, labels, 2, l2_grid=[0.1, 1.0], max_iter=20)
        elif fit == "heads":
            probes.fit_softmax_probes(embeddings, heads, 2, l2=0.1, max_iter=20)
        else:
            spec = {"method": fit.split("_")[1], "epochs": 1, "batch_size": 16, "learning_rates": [0.1], "l2": 0.0,
                    "seed": 0}
            probes.fit_random_probes(embeddings, heads, 2, spec, task_l2=0.1, lbfgs_max_iter=5)
    if fit == "task":  # the task probe is fitted in numpy (scipy's L-BFGS-B): nothing reaches torch
        assert not handed
    else:
        assert handed, "no numpy array reached torch: the wrapper checked nothing"


def test_a_jobs_warnings_are_written_to_its_log(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    # a job script run earlier in this process (runpy, as tests/core/test_minimax.py does) leaves the capture
    # switched on while pytest restores warnings.showwarning after each test: switched on again, it would not hook
    logging.captureWarnings(False)
    try:
        runner.configure_logging(str(tmp_path / "job.log"))
        warnings.warn("something to look at", UserWarning)  # noqa: B028
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:], root.level = handlers, level
    log = (tmp_path / "job.log").read_text()
    assert f"WARNING py.warnings: {__file__}:" in log and "UserWarning: something to look at" in log, log
