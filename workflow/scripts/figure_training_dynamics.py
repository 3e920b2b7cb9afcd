"""Training dynamics: d_aff between the checkpoints of each family with a step axis, per (task, layer)."""

import pandas as pd

from affine_homotopy.report.analysis import training_dynamics as dynamics_table
from affine_homotopy.jobs.io import read_matrix, write_csv
from affine_homotopy.report.plotting import save_figure, training_dynamics
from affine_homotopy.jobs.runner import keyed_inputs, run


def main(snakemake):
    p = snakemake.params
    frames = []
    for (task, layer), path in keyed_inputs(p.d_aff, snakemake.input).items():
        d_aff = read_matrix(path)
        for family, members in p.families.items():
            frames.append(dynamics_table(d_aff, members).assign(family=family, task=task, layer=layer))
    table = pd.concat(frames, ignore_index=True)
    columns = ["family", "task", "layer", "line", "step", "encoder", "final"]
    table = table[columns + [c for c in table.columns if c not in columns]]
    write_csv(snakemake.output.table, table)
    fig = training_dynamics(table, f"Training dynamics: d_aff between checkpoints (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
