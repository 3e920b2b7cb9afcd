"""Fixed-classifier extrinsic distances d_psi for all ordered pairs of one (task, layer)."""

import numpy as np
import pandas as pd

from affine_homotopy.extrinsic import fixed_classifier_distances
from affine_homotopy.io import read_embeddings, write_csv, write_matrix
from affine_homotopy.linalg import select_device
from affine_homotopy.probes import SoftmaxProbe
from affine_homotopy.runner import run


def load_probe(path):
    with np.load(path) as data:
        return SoftmaxProbe(data["weight"], data["bias"], float(data["l2"]), 0)


def main(snakemake):
    layer = int(snakemake.wildcards.layer)
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input.embeddings]
    probes = [load_probe(path) for path in snakemake.input.probes]
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    result = fixed_classifier_distances(
        reps, probes, names, snakemake.params.multiplier, snakemake.params.settings["max_iter"], device=device
    )
    write_matrix(snakemake.output.d_psi, result.distances, names)
    rows = [
        {"mapped_from": names[i], "mapped_to": names[j], "d_psi": result.distances[i, j],
         "winning_start": result.winning_start[i][j], "source_iterations": result.iterations[i]}
        for i in range(len(names)) for j in range(len(names)) if i != j
    ]
    write_csv(snakemake.output.diagnostics, pd.DataFrame(rows))


run(snakemake, main)
