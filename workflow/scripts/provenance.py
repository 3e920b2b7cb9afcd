"""Write results/<run>/provenance.json."""

from affine_homotopy.jobs.io import write_json
from affine_homotopy.jobs.provenance import collect, stage_environments
from affine_homotopy.jobs.runner import run


def main(snakemake):
    record = collect(snakemake.params.config, snakemake.params.repo, snakemake.input.data, snakemake.input.embeddings,
                     snakemake.input.staging)
    # every stage's own environment (recorded by each job beside its log), not just this job's
    record["environments"] = stage_environments(snakemake.params.logs)
    write_json(snakemake.output[0], record)


run(snakemake, main)
