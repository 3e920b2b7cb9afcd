"""Shared fixtures (tiny randomly initialised BERT models, no download; the tiny study run once; an empty
Hugging Face home) and the suite's rules. The plain helpers the test modules share are in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    EARLY, EARLY_LANES, GLUE_FOLDERS, NO_SLURM_CONTROLLER, OTHER_HUB_VARIABLES, REPO, SCHEMA, shared_glue_missing, snakemake,
    started_early, tiny_config, write_config, write_tiny_bert,
)

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch + numpy on small machines
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# no test but the cluster test talks to a SLURM controller (tests/workflow/slurm/no_controller.conf says
# why: up to 10 s per Snakemake start otherwise); the cluster test hands its commands helpers.cluster_env()
os.environ.setdefault("SLURM_CONF", str(NO_SLURM_CONTROLLER))

# Property-based tests (hypothesis): "default" keeps the fast loop fast (a few derandomised examples
# per test, the same every run); HYPOTHESIS_PROFILE=slow runs >= 200 fresh examples per test. No
# example database is written into the tree (a failure prints its example and @reproduce_failure), and
# hypothesis's other caches live outside it.
import tempfile  # noqa: E402

os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "affine-homotopy-hypothesis"))
from hypothesis import HealthCheck, settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile(
    "default", max_examples=6, deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_hypothesis_settings.register_profile(
    "slow", max_examples=200, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "tiny_a": write_tiny_bert(root / "tiny_a", seed=0, hidden=32),
        "tiny_b": write_tiny_bert(root / "tiny_b", seed=1, hidden=48),
    }


@started_early
def tiny_run(request: pytest.FixtureRequest, environ: Mapping[str, str]) -> Callable[[], tuple[Path, dict[str, Any]]]:
    """The tiny study (helpers.tiny_config) run once to the end: (its results folder, its config), shared
    by every test that reads its outputs, compares another run with them or copies its folder. Tests
    never write into it (a test that changes a file works on a copy)."""
    workdir = request.getfixturevalue("tmp_path_factory").mktemp("tiny_run")
    config = tiny_config(request.getfixturevalue("tiny_models"))
    configfile = write_config(workdir / "tiny.yaml", config)

    def work() -> tuple[Path, dict[str, Any]]:
        snakemake("--cores", "2", "--configfile", str(configfile), workdir=workdir, environ=environ)
        return workdir / "results" / "tiny", config

    return work


class EarlyWork:
    """The works of EARLY that the selected tests need, run one after another in a background thread per
    lane (EARLY_LANES) in the order the tests first need them; result(name) waits for one."""

    def __init__(self) -> None:
        self.pools: dict[str, ThreadPoolExecutor] = {}
        self.futures: dict[str, Future[Any]] = {}
        self.seconds: dict[str, float] = {}  # wall seconds of each finished work (the terminal summary)

    def timed(self, name: str, work: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            started = time.monotonic()
            try:
                return work()
            finally:
                self.seconds[name] = time.monotonic() - started
        return run

    def start(self, request: pytest.FixtureRequest, names: list[str]) -> None:
        environ = dict(os.environ)  # before any test's monkeypatch
        for name in names:
            try:
                work = EARLY[name](request, environ)
            except Exception as error:  # raised again for the tests that need this work, not for every test
                self.futures[name] = Future()
                self.futures[name].set_exception(error)
            else:
                lane = EARLY_LANES.get(name, "studies")
                if lane not in self.pools:
                    self.pools[lane] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"early-{lane}")
                self.futures[name] = self.pools[lane].submit(self.timed(name, work))

    def result(self, name: str, request: pytest.FixtureRequest) -> Any:
        if name not in self.futures:  # requested by getfixturevalue, outside the tests' fixture closures
            self.start(request, [name])
        return self.futures[name].result()

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session", autouse=True)
def early_work(request: pytest.FixtureRequest):
    """Starts, before the first test, the works of EARLY (helpers.started_early) that the selected tests
    need, in background threads (one per lane): a study runs on the second core while the tests before the
    first one that needs it run on the first (a plain `pytest`, no plugin)."""
    needed = list(dict.fromkeys(name for item in request.session.items for name in item.fixturenames if name in EARLY))
    works = EarlyWork()
    works.start(request, needed)
    yield works
    works.close()
    request.config.stash[EARLY_SECONDS] = works.seconds


EARLY_SECONDS = pytest.StashKey[dict[str, float]]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The early works' wall times beside --durations: they run in the background thread, outside any test."""
    seconds = config.stash.get(EARLY_SECONDS, {})
    if seconds:
        terminalreporter.write_sep("=", "early works (background threads, wall seconds)")
        for name, value in seconds.items():
            terminalreporter.write_line(f"{value:8.2f}s  {name} ({EARLY_LANES.get(name, 'studies')} lane)")


@pytest.fixture(scope="session")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``dry_run(*args)``: the output of ``snakemake -n *args`` in a working directory laid out like a clone
    (config/ beside it), run once per session however many tests read it (the paper's plan takes a
    Snakemake start and some 400 jobs' DAG each time)."""
    workdir = tmp_path_factory.mktemp("dry_runs")
    shutil.copytree(REPO / "config", workdir / "config")
    outputs: dict[tuple[str, ...], str] = {}

    def plan(*args: str) -> str:
        if args not in outputs:
            outputs[args] = snakemake("-n", *args, workdir=workdir).stdout
        return outputs[args]

    return plan


@pytest.fixture(scope="session")
def schema_path() -> Path:
    return SCHEMA


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF_HOME for this test, the hub switched off."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    for name in OTHER_HUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return home


# ---------------------------------------------------------------------------------------------
# A suite that cannot pass by accident (pyproject.toml: --strict-markers, --strict-config,
# xfail_strict, a pytest-timeout default per test).
#
# No silent skips. Every skip prints its reason (addopts -ra), and a skip (or an xfail: a test that
# is expected to fail checks nothing) FAILS the run unless the test is marked
# @pytest.mark.optional(reason=KEY) with KEY from OPTIONAL_REASONS, and what KEY names is really
# missing on this machine. A module-level skip fails collection. AFFINE_HOMOTOPY_ALLOW_SKIPS=1 turns
# the failures back into skips for a local run (for example as a non-root user, where the SLURM test
# cannot start its cluster); it is refused when CI is set.
ALLOW_SKIPS = os.environ.get("AFFINE_HOMOTOPY_ALLOW_SKIPS") == "1"


# The only things a machine may legitimately lack: key -> (what it is, is it missing here?)
def cuda_missing() -> bool:
    """Whether this machine has no CUDA device (most of the project's machines, and CI, have none)."""
    import torch

    return not torch.cuda.is_available()


OPTIONAL_REASONS = {
    "shared_glue": (f"the real GLUE files ({', '.join(GLUE_FOLDERS)}) in ../shared/glue beside the clone",
                    shared_glue_missing),
    "cuda": ("a CUDA device", cuda_missing),
}
# Markers that make a test slow by themselves: `pytest -m "not slow"` is the fast inner loop.
IMPLY_SLOW = ("workflow", "install")


def pytest_configure(config: pytest.Config) -> None:
    if ALLOW_SKIPS and os.environ.get("CI"):
        raise pytest.UsageError("AFFINE_HOMOTOPY_ALLOW_SKIPS=1 is refused when CI is set: CI runs every test.")
    if not config.pluginmanager.hasplugin("timeout"):
        raise pytest.UsageError("pytest-timeout is not installed (pip install -e '.[test]' -c constraints.txt): "
                                "without it a hung test hangs the run.")


def _optional_key(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("optional")
    if marker is None:
        return None
    return marker.kwargs.get("reason", marker.args[0] if marker.args else None)


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so that "not slow" sees the implied marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bad = []
    for item in items:
        if any(item.get_closest_marker(name) for name in IMPLY_SLOW) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("optional") is not None and _optional_key(item) not in OPTIONAL_REASONS:
            bad.append(f"{item.nodeid}: {_optional_key(item)!r}")
    if bad:
        raise pytest.UsageError("@pytest.mark.optional(reason=...) takes one of "
                                f"{sorted(OPTIONAL_REASONS)} (tests/conftest.py: OPTIONAL_REASONS); got\n  "
                                + "\n  ".join(bad))


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _tolerated(item: pytest.Item) -> bool:
    """A skip that is allowed: an optional test whose named resource is really missing here."""
    key = _optional_key(item)
    return key in OPTIONAL_REASONS and OPTIONAL_REASONS[key][1]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or ALLOW_SKIPS or _tolerated(item):
        return
    if hasattr(report, "wasxfail"):
        reason = f"XFAIL ({report.wasxfail or 'no reason'}), but an expected failure checks nothing"
    else:
        reason = f"SKIPPED, but this test must run: {_skip_reason(report)}"
    key = _optional_key(item)
    if key in OPTIONAL_REASONS:
        reason += f" (it is optional only where {OPTIONAL_REASONS[key][0]} are missing, and they are here)"
    report.outcome = "failed"
    report.longrepr = (f"{reason}\n(Install what it needs, or mark it @pytest.mark.optional(reason=KEY) with KEY "
                       f"from {sorted(OPTIONAL_REASONS)} if a machine may legitimately lack it; see README.)")
    if hasattr(report, "wasxfail"):
        del report.wasxfail


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not ALLOW_SKIPS:
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} was skipped as a whole: {_skip_reason(report)}"


@pytest.fixture
def unreachable_hub(monkeypatch: pytest.MonkeyPatch) -> str:
    """The hub switched on but pointed at a closed local port: every request fails to connect."""
    import socket

    import huggingface_hub.constants as constants

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    return constants.ENDPOINT
