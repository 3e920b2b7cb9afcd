"""All intrinsic measures for all ordered encoder pairs of one (task, layer)."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.intrinsic import SolverSettings, pairwise_intrinsic
from affine_homotopy.io import read_embeddings, write_csv, write_matrix, write_npy
from affine_homotopy.linalg import DTYPES, select_device
from affine_homotopy.runner import run


def main(snakemake):
    layer = int(snakemake.wildcards.layer)
    settings = snakemake.params.settings
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input]
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    logging.info("%d encoders, N = %d, on %s (%s)", len(names), reps[0].shape[0], device, settings["dtype"])
    solver = SolverSettings(
        tol=settings["tol"], max_iter=settings["max_iter"], multiplier=settings["rank_tolerance_multiplier"],
        power=settings["lawson_power"], block_mb=settings["block_mb"], dtype=DTYPES[settings["dtype"]], device=device,
        keep_weights=True,
    )
    result = pairwise_intrinsic(reps, names, solver)
    for measure in snakemake.params.measures:
        write_matrix(snakemake.output[measure], result.matrices[measure], names)
    # (K, K, N): weights whose weighted least-squares fit is the map attaining d_aff(i, j)
    write_npy(snakemake.output.weights, result.weights)
    write_csv(snakemake.output.rank, pd.DataFrame(
        {"encoder": names, "rank": result.ranks, "dim": result.dims, "n": [r.shape[0] for r in reps]}))
    upper, lower = result.matrices["d_aff"], result.matrices["d_aff_lower"]
    pairs = [(i, j) for i in range(len(names)) for j in range(len(names)) if i != j]
    write_csv(snakemake.output.solver, pd.DataFrame([
        {"mapped_from": names[i], "mapped_to": names[j], "d_aff": upper[i, j], "d_aff_lower": lower[i, j],
         "gap": upper[i, j] - lower[i, j], "relative_gap": (upper[i, j] - lower[i, j]) / upper[i, j] if upper[i, j] > 0 else 0.0,
         "d_aff_ls": result.matrices["d_aff_ls"][i, j], "iterations": int(result.iterations[i, j]),
         "d_lin": result.matrices["d_lin"][i, j], "d_lin_lower": result.matrices["d_lin_lower"][i, j]}
        for i, j in pairs
    ]))
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})
    gaps = np.array([(upper[i, j] - lower[i, j]) / upper[i, j] for i, j in pairs if upper[i, j] > 1e-5])
    if gaps.size:
        logging.info("certified relative gap over %d non-zero pairs: median %.2e, max %.2e",
                     gaps.size, np.median(gaps), gaps.max())


run(snakemake, main)
