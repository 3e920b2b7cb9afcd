"""Record what was staged (models at their commits, data sets with fingerprints) for this run."""

from affine_homotopy.io import read_json, write_json
from affine_homotopy.runner import run


def main(snakemake):
    write_json(snakemake.output[0], {
        "models": {path: read_json(path) for path in snakemake.input.models},
        "tasks": {path: read_json(path) for path in snakemake.input.tasks},
    })


run(snakemake, main)
