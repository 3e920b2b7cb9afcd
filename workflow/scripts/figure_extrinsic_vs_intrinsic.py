"""Figure: extrinsic d_psi against intrinsic d_aff over ordered pairs, per task."""

from affine_homotopy.io import read_matrix
from affine_homotopy.plotting import extrinsic_vs_intrinsic, save_figure
from affine_homotopy.runner import run


def main(snakemake):
    tasks, layers = snakemake.params.tasks, snakemake.params.layers
    keys = [(t, l) for t in tasks for l in layers]
    pairs = {
        key: (read_matrix(a), read_matrix(b))
        for key, a, b in zip(keys, snakemake.input.intrinsic, snakemake.input.extrinsic)
    }
    fig = extrinsic_vs_intrinsic(pairs, tasks, layers, snakemake.params.group,
                                 f"Extrinsic vs intrinsic distance (run {snakemake.params.run})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
