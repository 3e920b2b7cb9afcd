"""Stage one hub encoder (weights + tokenizer at its resolved commit) into resources/models/: from the
hub, or from the local Hugging Face cache when HF_HUB_OFFLINE=1 or the hub is unreachable."""

from affine_homotopy.study.lock import job_lock
from affine_homotopy.jobs.runner import run
from affine_homotopy.models.staging import stage_model


def main(snakemake):
    locked, lock_file = job_lock(snakemake.config, "models", snakemake.wildcards.encoder)
    stage_model(snakemake.wildcards.encoder, snakemake.params.spec, snakemake.params.folder,
                locked_commit=locked, lock_file=lock_file)


run(snakemake, main, offline=False)
