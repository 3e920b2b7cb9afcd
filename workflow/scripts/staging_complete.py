"""Record what was staged (models at their commits, data sets with fingerprints, and the route each
came by: hub, cache or by hand) for this run, keyed by encoder and task name; and write the study's
lock of resolved commits (and of the sha256 of every local data and embeddings file) when there is
none yet, or when asked to (update_lock)."""

import logging
from pathlib import Path

from affine_homotopy.jobs.io import read_json, write_json
from affine_homotopy.study.lock import build_lock, write_lock
from affine_homotopy.jobs.runner import run

log = logging.getLogger("staging_complete")


def main(snakemake):
    staged = {
        "models": {Path(path).parent.name: read_json(path) for path in snakemake.input.models},
        "tasks": {Path(path).parent.name: read_json(path) for path in snakemake.input.tasks},
    }
    write_json(snakemake.output[0], staged)
    lock_file = Path(snakemake.params.lock_file)
    lock = build_lock(snakemake.params.study, staged)
    if (snakemake.params.update_lock or not lock_file.is_file()) and (lock["models"] or lock["datasets"]
                                                                          or lock["files"]):
        write_lock(lock_file, lock)
        log.info("wrote the lock %s (%d models, %d data sets, %d local files): commit it with the config",
                 lock_file, len(lock["models"]), len(lock["datasets"]), len(lock["files"]))


run(snakemake, main)
