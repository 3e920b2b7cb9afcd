"""Figure 2: extrinsic against intrinsic distance per target encoder, with least-squares fits (CSV)."""

import pandas as pd

from affine_homotopy.report.analysis import regression_fit
from affine_homotopy.jobs.io import read_matrix, write_csv
from affine_homotopy.report.plotting import extrinsic_vs_intrinsic, save_figure
from affine_homotopy.jobs.runner import keyed_inputs, run


def main(snakemake):
    p = snakemake.params
    intrinsic = {t: read_matrix(path) for t, path in keyed_inputs(p.intrinsic_paths, snakemake.input.intrinsic).items()}
    extrinsic = keyed_inputs(p.extrinsic_paths, snakemake.input.extrinsic)  # {(task, measure): path}
    keys = [(t, e) for t in p.tasks for e in p.extrinsic]
    pairs = {key: (intrinsic[key[0]], read_matrix(extrinsic[key])) for key in keys}
    s = p.settings
    fits = pd.DataFrame([{"task": t, "layer": p.layer, "intrinsic": "d_aff", "extrinsic": e,
                          **regression_fit(*pairs[(t, e)], p.group, s["n_permutations"], s["seed"])} for t, e in keys])
    write_csv(snakemake.output.fits, fits)
    fig = extrinsic_vs_intrinsic(pairs, fits, p.tasks, p.extrinsic, p.group,
                                 f"Extrinsic vs intrinsic distance per target encoder, {p.layer} (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
