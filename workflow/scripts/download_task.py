"""Stage both splits of one GLUE task, or of a Hugging Face dataset (source: hf_dataset, checked as it is
staged), into resources/data/: from the hub, or from the local Hugging Face cache when
HF_DATASETS_OFFLINE=1 (or HF_HUB_OFFLINE=1) or the hub is unreachable."""

from pathlib import Path

from affine_homotopy.study.lock import job_lock
from affine_homotopy.jobs.runner import run
from affine_homotopy.models.staging import stage_task


def main(snakemake):
    locked, lock_file = job_lock(snakemake.config, "datasets", snakemake.wildcards.task)
    stage_task(snakemake.wildcards.task, snakemake.params.spec, Path(snakemake.output.marker).parent,
               locked_commit=locked, lock_file=lock_file)


run(snakemake, main, offline=False)
