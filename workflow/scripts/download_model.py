"""Stage one hub encoder (weights + tokenizer at its resolved commit) into resources/models/: from the
hub, or from the local Hugging Face cache when HF_HUB_OFFLINE=1 or the hub is unreachable."""

from affine_homotopy.runner import run
from affine_homotopy.staging import stage_model


def main(snakemake):
    stage_model(snakemake.wildcards.encoder, snakemake.params.spec, snakemake.params.folder)


run(snakemake, main, offline=False)
