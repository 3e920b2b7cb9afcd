"""All ordered pairs of intrinsic distances for one (task, layer)."""

import pandas as pd

from affine_homotopy.intrinsic import pairwise_affine_ls
from affine_homotopy.io import read_embeddings, write_csv, write_matrix
from affine_homotopy.linalg import DTYPES, select_device
from affine_homotopy.runner import run


def main(snakemake):
    layer = int(snakemake.wildcards.layer)
    settings = snakemake.params.settings
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input]
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    distances, ranks = pairwise_affine_ls(
        reps, names, settings["rank_tolerance_multiplier"], DTYPES[settings["dtype"]], device, settings["block_mb"]
    )
    write_matrix(snakemake.output.d_aff, distances, names)
    write_csv(
        snakemake.output.rank,
        pd.DataFrame({"encoder": names, "rank": ranks, "dim": [r.shape[1] for r in reps], "n": [r.shape[0] for r in reps]}),
    )


run(snakemake, main)
