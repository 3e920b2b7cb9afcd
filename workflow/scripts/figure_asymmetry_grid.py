"""Figures 1/4: d_aff asymmetry grids, one panel per (task, layer), with median strips."""

from affine_homotopy.io import read_matrix
from affine_homotopy.plotting import asymmetry_grid, save_figure
from affine_homotopy.runner import run


def main(snakemake):
    tasks, layers = snakemake.params.tasks, snakemake.params.layers
    keys = [(t, l) for t in tasks for l in layers]
    matrices = {key: read_matrix(path) for key, path in zip(keys, snakemake.input)}
    fig = asymmetry_grid(matrices, tasks, layers, f"d_aff: row i mapped onto column j (run {snakemake.params.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
