"""Record what was staged (models at their commits, data sets with fingerprints, and the route each
came by: hub, cache or by hand) for this run, keyed by encoder and task name."""

from pathlib import Path

from affine_homotopy.io import read_json, write_json
from affine_homotopy.runner import run


def main(snakemake):
    write_json(snakemake.output[0], {
        "models": {Path(path).parent.name: read_json(path) for path in snakemake.input.models},
        "tasks": {Path(path).parent.name: read_json(path) for path in snakemake.input.tasks},
    })


run(snakemake, main)
