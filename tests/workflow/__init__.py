"""Tests of the Snakemake workflow and its jobs (affine_homotopy.jobs): dry runs and tiny studies, SLURM,
resources and the cost model, operations, logs, figures."""
