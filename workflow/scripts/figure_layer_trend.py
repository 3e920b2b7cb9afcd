"""Layer trend: rho(intrinsic, extrinsic) against layer, from the Table 1 CSV."""

import pandas as pd

from affine_homotopy.report.plotting import layer_trend, save_figure
from affine_homotopy.jobs.runner import run


def main(snakemake):
    p = snakemake.params
    table = pd.read_csv(snakemake.input[0])
    fig = layer_trend(table, p.tasks, p.extrinsic, f"Spearman ρ(intrinsic, extrinsic) by layer (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
