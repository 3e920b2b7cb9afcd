"""Glue for ``workflow/scripts``: logging to the job's log file and clean errors.

A script does ``run(snakemake, main)``. Expected failures (bad input, missing model, non-finite
representations) end the job with one clear message in the log and on stderr instead of a
traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..errors import AffineHomotopyError
from .cost_record import job_record_path, process_cpu_seconds, write_job_record

EXPECTED_ERRORS = (AffineHomotopyError,)


def keyed_inputs(mapping: Any, inputs: Any) -> dict[Any, str]:
    """A rule's ``{key: path}`` parameter (``(task, layer)``, ``task``, ...) after checking that its
    paths are exactly the job's input files: scripts look each file up by its key instead of zipping
    the inputs against a key list built elsewhere (a different order would mislabel results)."""
    paths = {key: str(path) for key, path in dict(mapping).items()}
    listed = sorted(str(path) for path in inputs)
    if sorted(paths.values()) != listed:
        missing, extra = sorted(set(listed) - set(paths.values())), sorted(set(paths.values()) - set(listed))
        raise RuntimeError(f"the rule's keyed paths do not match its inputs: inputs without a key {missing[:3]}, "
                           f"keys without an input {extra[:3]} (a bug in the rule file)")
    return paths


def configure_logging(log_path: str | None) -> logging.Logger:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", handlers=handlers, force=True
    )
    # Python warnings go to the job's log too (logger py.warnings, level WARNING, with the file and
    # line that raised them), not only to Snakemake's stderr: tests/workflow/test_workflow.py reads them there.
    logging.captureWarnings(True)
    return logging.getLogger("affine_homotopy.job")


def run(snakemake: Any, main: Callable[[Any], None], offline: bool = True) -> None:
    """Run a job's ``main``; compute jobs (``offline``) never touch the Hugging Face hub."""
    if offline:  # before transformers/datasets are imported: they read these at import time
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
    log_path = snakemake.log[0] if len(snakemake.log) else None
    log = configure_logging(log_path)
    if "torch" in sys.modules:
        # torch otherwise starts one thread per core in every job: with several jobs at once the
        # cores are oversubscribed and everything slows down many times over.
        sys.modules["torch"].set_num_threads(max(1, int(snakemake.threads)))
    started = time.monotonic()
    # CPU before the work: the interpreter, Snakemake's script preamble and the script's imports
    cpu_started = process_cpu_seconds()
    log.info("rule %s, wildcards %s", snakemake.rule, dict(snakemake.wildcards.items()))
    if log_path:  # the versions this stage ran with, collected into provenance.json
        from .provenance import record_stage_environment

        record_stage_environment(snakemake.rule, log_path)
    try:
        main(snakemake)
    except EXPECTED_ERRORS as error:
        log.error("%s: %s", type(error).__name__, error)
        sys.exit(1)
    wall, cpu = time.monotonic() - started, process_cpu_seconds() - cpu_started
    # wall and CPU time of the work (all threads); the cost record beside the job's benchmark file adds the
    # start-up (`python -m affine_homotopy.costs check` reads it)
    log.info("done in %.1f s (CPU %.1f s, %d thread(s); CPU %.1f s before the work)", wall, cpu,
             int(snakemake.threads), cpu_started)
    if log_path and job_record_path(log_path):  # a workflow job's log (results/<run>/logs/...)
        write_job_record(log_path, snakemake.rule, dict(snakemake.wildcards.items()), snakemake.config, cpu_started,
                         cpu, wall, int(snakemake.threads))
