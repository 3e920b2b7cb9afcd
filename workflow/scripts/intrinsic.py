"""All intrinsic measures for all ordered encoder pairs of one (task, layer)."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.core.intrinsic import missed_tol_warning, pairwise_intrinsic, solver_table, undefined_relative_note
from affine_homotopy.jobs.io import read_embeddings, write_csv, write_matrix, write_npy
from affine_homotopy.core.linalg import check_finite_representations
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.runner import run
from affine_homotopy.study.settings import intrinsic_settings


def main(snakemake):
    layer = snakemake.wildcards.layer  # position label, e.g. layer6
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input]
    check_finite_representations(reps, names, snakemake.wildcards.task, layer)
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    # keep_weights: d_aff_weights.npy, from which the extrinsic stage rebuilds each pair's map
    settings = intrinsic_settings(snakemake.params.study, device, keep_weights=True)
    logging.info("%d encoders, N = %d, on %s (%s), %s solver", len(names), reps[0].shape[0], device,
                 settings.dtype, settings.solver)
    result = pairwise_intrinsic(reps, names, settings)
    for measure in snakemake.params.measures:
        write_matrix(snakemake.output[measure], result.matrices[measure], names)
    # (K, K, N): weights whose weighted least-squares fit is the map attaining d_aff(i, j)
    write_npy(snakemake.output.weights, result.weights)
    write_csv(snakemake.output.rank, pd.DataFrame(
        {"encoder": names, "rank": result.ranks, "dim": result.dims, "n": [r.shape[0] for r in reps]}))
    write_csv(snakemake.output.solver, pd.DataFrame(solver_table(result)))
    warning = missed_tol_warning(result, settings.tol, settings.max_iter)
    if warning:
        logging.warning("%s (config keys intrinsic.max_iter, intrinsic.tol)", warning)
    undefined = undefined_relative_note(result)
    if undefined:
        logging.warning("%s", undefined)
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})
    upper, lower = result.matrices["d_aff"], result.matrices["d_aff_lower"]
    off = ~np.eye(len(names), dtype=bool) & (upper > 1e-5)
    gaps = (upper[off] - lower[off]) / upper[off]
    if gaps.size:
        logging.info("certified relative gap over %d non-zero pairs: median %.2e, max %.2e",
                     gaps.size, np.median(gaps), gaps.max())


run(snakemake, main)
