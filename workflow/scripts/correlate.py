"""Spearman and Pearson correlations between d_aff and d_psi per (task, layer)."""

import pandas as pd

from affine_homotopy.io import read_matrix, write_csv, write_text
from affine_homotopy.runner import run
from affine_homotopy.stats import correlate, to_markdown


def main(snakemake):
    rows = []
    for (task, layer), intrinsic_path, extrinsic_path in zip(
        snakemake.params.task_layers, snakemake.input.intrinsic, snakemake.input.extrinsic
    ):
        stats = correlate(read_matrix(intrinsic_path), read_matrix(extrinsic_path), snakemake.params.group)
        rows.append({"task": task, "layer": layer, "intrinsic": "d_aff", "extrinsic": "d_psi",
                     "n_pairs": int(stats["n_pairs"]), "spearman_rho": stats["spearman_rho"],
                     "spearman_p": stats["spearman_p"], "pearson_r": stats["pearson_r"],
                     "pearson_p": stats["pearson_p"]})
    table = pd.DataFrame(rows)
    write_csv(snakemake.output.csv, table)
    note = ("\nOrdered pairs i != j; p-values are the classical ones and assume independent pairs, "
            "which overstates significance because pairs share encoders.\n")
    write_text(snakemake.output.markdown, "# Intrinsic vs extrinsic distance\n\n" + to_markdown(table) + note)


run(snakemake, main)
