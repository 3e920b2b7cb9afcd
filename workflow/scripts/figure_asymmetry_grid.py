"""Figures 1/4: d_aff asymmetry grids, one panel per (task, layer), with median strips."""

from affine_homotopy.jobs.io import read_matrix
from affine_homotopy.report.plotting import asymmetry_grid, save_figure
from affine_homotopy.jobs.runner import keyed_inputs, run


def main(snakemake):
    tasks, layers = snakemake.params.tasks, snakemake.params.layers
    paths = keyed_inputs(snakemake.params.d_aff, snakemake.input)  # {(task, layer): path}
    matrices = {key: read_matrix(path) for key, path in paths.items()}
    fig = asymmetry_grid(matrices, tasks, layers, f"d_aff: row i mapped onto column j (run {snakemake.params.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
