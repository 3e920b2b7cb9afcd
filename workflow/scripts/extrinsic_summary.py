"""Run summary of the extrinsic stage: one row per (task, layer) of the extrinsic layers
(affine_homotopy.jobs.extrinsic_tables). It reads the matrices the selection wrote (``params.matrices``:
d_psi and bound always, d_worst and bound_worst with d_worst, d_worst_search with the search); the
columns of an unselected measure are absent."""

import pandas as pd

from affine_homotopy.jobs.extrinsic_tables import summary_row
from affine_homotopy.jobs.io import read_matrix, write_csv
from affine_homotopy.jobs.runner import run


def main(snakemake):
    rows = []
    for task, layer in snakemake.params.task_layers:
        key = f"{task}__{layer}"  # named inputs per (task, layer): no positional pairing of lists
        matrices = {name: read_matrix(snakemake.input[f"{name}__{key}"]) for name in snakemake.params.matrices}
        rows.append(summary_row(task, layer, matrices, pd.read_csv(snakemake.input[f"diagnostics__{key}"]),
                                pd.read_csv(snakemake.input[f"solver__{key}"]),
                                pd.read_csv(snakemake.input[f"probes__{key}"]), snakemake.params.tol))
    write_csv(snakemake.output[0], pd.DataFrame(rows))


run(snakemake, main)
