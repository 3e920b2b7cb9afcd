"""One (task, layer)'s extrinsic files from the parts of its job split by source
(extrinsic.sources_per_job): each matrix's rows from the part that maps from that row's encoder, and the
parts' d_psi_diagnostics.csv rows in the encoders' order; the Lemma 5.2 tightness line one job logs."""

import logging

from affine_homotopy.jobs.extrinsic_tables import pair_matrix, tightness_summary
from affine_homotopy.jobs.extrinsic_parts import merge_diagnostics, merge_matrices
from affine_homotopy.jobs.io import read_matrix, write_csv, write_matrix
from affine_homotopy.jobs.runner import run


def main(snakemake):
    from pathlib import Path

    import pandas as pd

    names = list(snakemake.params.encoders)
    parts = list(snakemake.params.parts)
    folders = [Path(path).parent for path in snakemake.input.parts]  # each part's d_psi_diagnostics.csv
    merged = {}
    for name in snakemake.params.matrices:
        matrices = []
        for sources, folder in zip(parts, folders):
            frame = read_matrix(folder / f"{name}.csv")
            if list(frame.index) != names:
                raise ValueError(f"{folder}/{name}.csv names {list(frame.index)}, expected {names}")
            matrices.append((sources, frame.to_numpy()))
        merged[name] = merge_matrices(names, matrices)
    diagnostics = merge_diagnostics(names, [pd.read_csv(folder / "d_psi_diagnostics.csv") for folder in folders])
    if "bound" in merged:
        logging.info("Lemma 5.2 tightness d_psi / bound: %s",
                     tightness_summary(merged["d_psi"], merged["bound"], merged.get("d_worst"),
                                       slack=pair_matrix(diagnostics, names, "bound_slack", 0.0)))
    for name, matrix in merged.items():
        write_matrix(snakemake.output[name], matrix, names)
    write_csv(snakemake.output.diagnostics, diagnostics)
    logging.info("merged %d parts of %s encoders", len(parts), len(names))


run(snakemake, main)
