"""Extrinsic distances of one (task, layer) for all ordered pairs: d_psi, d_worst, d_worst_search, their
certified lower bounds and Lemma 5.2's bounds. Every bound is checked before anything is written: a
violation is a bug and fails the job with a NumericalError, leaving no output."""

import logging

import numpy as np

from affine_homotopy.extrinsic import ExtrinsicSettings, extrinsic_distances, tightness_summary
from affine_homotopy.extrinsic.summary import diagnostics_frame
from affine_homotopy.io import read_embeddings, read_matrix, write_csv, write_matrix
from affine_homotopy.linalg import check_finite_representations, select_device
from affine_homotopy.probes import load_probe_file
from affine_homotopy.runner import run


def main(snakemake):
    layer = snakemake.wildcards.layer  # position label, e.g. layer6
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input.embeddings]
    check_finite_representations(reps, names, snakemake.wildcards.task, layer)
    probes, randoms = zip(*(load_probe_file(path) for path in snakemake.input.probes))
    d_aff = read_matrix(snakemake.input.d_aff)
    if list(d_aff.index) != names:
        raise ValueError(f"{snakemake.input.d_aff} names {list(d_aff.index)}, expected {names}")
    d_aff = d_aff.to_numpy()
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    settings = ExtrinsicSettings.from_config(snakemake.params.study, device)
    logging.info("%d encoders, N = %d, %d classes, %d random classifiers each, worst-case search: %d aimed "
                 "classifiers and %d ascent steps per pair, on %s; certified tol %g (atol %g)", len(names),
                 reps[0].shape[0], probes[0].weight.shape[1], randoms[0].weight.shape[0], settings.search_candidates,
                 settings.search_steps, device, settings.tol, settings.atol)
    result = extrinsic_distances(reps, probes, names, np.load(snakemake.input.map_weights), randoms, settings, d_aff)
    logging.info("Lemma 5.2 tightness d_psi / bound: %s",
                 tightness_summary(result.d_psi, result.bound, result.d_worst, slack=result.bound_slack))
    result.check_bounds()  # NumericalError before anything is written
    for name, matrix in result.matrices().items():
        write_matrix(snakemake.output[name], matrix, names)
    write_csv(snakemake.output.diagnostics, diagnostics_frame(result, d_aff))
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})


run(snakemake, main)
