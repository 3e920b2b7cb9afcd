"""Run summary of the extrinsic stage: one row per (task, layer) with Lemma 5.2's tightness
(d_psi / bound: median and range), violations (must be 0), medians of d_psi and d_worst, and the
probes' eval-split accuracy (median and range over encoders)."""

import pandas as pd

from affine_homotopy.extrinsic import tightness_summary
from affine_homotopy.io import read_matrix, write_csv
from affine_homotopy.runner import run


def main(snakemake):
    rows = []
    inputs = zip(snakemake.params.task_layers, snakemake.input.d_psi, snakemake.input.d_worst,
                 snakemake.input.bound, snakemake.input.probes)
    for (task, layer), d_psi, d_worst, bound, probes in inputs:
        stats = tightness_summary(read_matrix(d_psi).to_numpy(), read_matrix(bound).to_numpy(),
                                  read_matrix(d_worst).to_numpy())
        accuracy = pd.read_csv(probes)["accuracy"]
        rows.append({"task": task, "layer": layer, **stats, "probe_accuracy_median": accuracy.median(),
                     "probe_accuracy_min": accuracy.min(), "probe_accuracy_max": accuracy.max()})
    write_csv(snakemake.output[0], pd.DataFrame(rows))


run(snakemake, main)
