"""Write results/<run>/provenance.json."""

from affine_homotopy.io import write_json
from affine_homotopy.provenance import collect
from affine_homotopy.runner import run


def main(snakemake):
    record = collect(snakemake.params.config, snakemake.params.repo, snakemake.input.data, snakemake.input.embeddings)
    write_json(snakemake.output[0], record)


run(snakemake, main)
