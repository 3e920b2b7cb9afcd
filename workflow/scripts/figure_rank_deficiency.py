"""Figure 3: median d_aff between truncation levels, one grid per task."""

import pandas as pd

from affine_homotopy.report.plotting import rank_deficiency_grids, save_figure
from affine_homotopy.jobs.runner import keyed_inputs, run


def main(snakemake):
    p = snakemake.params
    frames = {task: pd.read_csv(path) for task, path in keyed_inputs(p.paths, snakemake.input).items()}
    fig = rank_deficiency_grids(frames, p.tasks, f"Rank deficiency: median d_aff between SVD truncations, "
                                f"{p.layer} (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
