"""Rank analysis: numerical rank vs median d_aff to / from each encoder, per (task, layer)."""

import pandas as pd

from affine_homotopy.report.analysis import rank_analysis
from affine_homotopy.jobs.io import read_matrix, write_csv
from affine_homotopy.report.plotting import rank_vs_distance, save_figure
from affine_homotopy.jobs.runner import keyed_inputs, run


def main(snakemake):
    p = snakemake.params
    rank_paths = keyed_inputs(p.ranks, snakemake.input.ranks)  # {(task, layer): path}
    d_aff_paths = keyed_inputs(p.d_aff, snakemake.input.d_aff)
    encoders, correlations = [], []
    for (task, layer), rank_path in rank_paths.items():
        d_aff_path = d_aff_paths[(task, layer)]
        per_encoder, records = rank_analysis(pd.read_csv(rank_path), read_matrix(d_aff_path), p.group,
                                             p.settings["n_permutations"], p.settings["seed"])
        encoders.append(per_encoder.assign(task=task, layer=layer))
        correlations += [{"task": task, "layer": layer, **r} for r in records]
    per_encoder = pd.concat(encoders, ignore_index=True)
    per_encoder = per_encoder[["task", "layer", *[c for c in per_encoder.columns if c not in ("task", "layer")]]]
    correlations = pd.DataFrame(correlations)
    write_csv(snakemake.output.encoders, per_encoder)
    write_csv(snakemake.output.correlations, correlations)
    fig = rank_vs_distance(per_encoder, correlations, p.tasks, p.layers,
                           f"Numerical rank vs median d_aff (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
