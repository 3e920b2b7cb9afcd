"""Run summary of the extrinsic stage: one row per (task, layer) with Lemma 5.2's tightness
(d_psi / bound: median and range), violations of both bounds (must be 0), what the worst case adds
(share of pairs whose worst classifier is the task probe, median d_worst / d_psi, median
d_worst_search / d_worst), the ordered pairs whose d_aff missed the solver's tol, and the probes'
eval-split accuracy and random-label sharpness (median and range over encoders)."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.extrinsic import tightness_summary, worst_case_summary
from affine_homotopy.io import read_matrix, write_csv
from affine_homotopy.runner import run


def pair_matrix(diagnostics, names, column, fill):
    """(K, K) matrix of a per-pair column of d_psi_diagnostics.csv (rows mapped from, columns mapped to)."""
    matrix = pd.DataFrame(fill, index=names, columns=names)
    for source, target, value in zip(diagnostics["mapped_from"], diagnostics["mapped_to"], diagnostics[column]):
        matrix.loc[source, target] = value
    return matrix.to_numpy()


def missed_tol(solver):
    # d_aff_solver.csv states per pair whether the certified interval met tol ("converged"); a file
    # written before that column existed carries no such record, so all its pairs count as converged
    if "converged" not in solver.columns:
        logging.info("d_aff_solver.csv has no 'converged' column: all pairs counted as converged")
        return 0
    return int((~solver["converged"].astype(bool)).sum())


def main(snakemake):
    rows = []
    inputs = zip(snakemake.params.task_layers, snakemake.input.d_psi, snakemake.input.d_worst,
                 snakemake.input.d_worst_search, snakemake.input.bound, snakemake.input.bound_worst,
                 snakemake.input.diagnostics, snakemake.input.solver, snakemake.input.probes)
    for (task, layer), d_psi, d_worst, d_search, bound, bound_worst, diagnostics, solver, probes in inputs:
        d_psi, d_worst = read_matrix(d_psi), read_matrix(d_worst).to_numpy()
        names = list(d_psi.index)
        d_psi = d_psi.to_numpy()
        diagnostics = pd.read_csv(diagnostics)
        # the extrinsic job's per-pair slack on Lemma 5.2 (float32 rounding of the rebuilt d_aff map)
        stats = tightness_summary(d_psi, read_matrix(bound).to_numpy(), d_worst,
                                  slack=pair_matrix(diagnostics, names, "bound_slack", 0.0))
        worst = worst_case_summary(d_psi, d_worst, read_matrix(d_search).to_numpy(), read_matrix(bound_worst).to_numpy(),
                                   pair_matrix(diagnostics, names, "worst_classifier", "") == "task",
                                   slack=pair_matrix(diagnostics, names, "bound_worst_slack", 0.0))
        stats["classifier_bound_violations"] = int(diagnostics["bound_violations"].sum())
        probe_table = pd.read_csv(probes)
        row = {"task": task, "layer": layer, **stats, **worst, "d_aff_missed_tol": missed_tol(pd.read_csv(solver)),
               "probe_accuracy_median": probe_table["accuracy"].median(),
               "probe_accuracy_min": probe_table["accuracy"].min(), "probe_accuracy_max": probe_table["accuracy"].max()}
        for column in ("random_train_accuracy_mean", "random_norm_median", "task_norm"):
            if column in probe_table.columns:  # absent with n_random_classifiers: 0
                row[f"{column}_median"] = float(np.median(probe_table[column]))
        rows.append(row)
    write_csv(snakemake.output[0], pd.DataFrame(rows))


run(snakemake, main)
