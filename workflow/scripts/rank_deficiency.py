"""Figure 3 data for one task: d_aff between SVD truncation levels of each encoder of a group."""

import logging

from affine_homotopy.analysis import rank_deficiency
from affine_homotopy.io import read_embeddings, write_csv
from affine_homotopy.linalg import DTYPES, select_device
from affine_homotopy.runner import run

log = logging.getLogger("affine_homotopy.job")


def main(snakemake):
    p = snakemake.params
    reps = {name: read_embeddings(path, p.layer) for name, path in zip(p.encoders, snakemake.input)}
    device = select_device(p.device, snakemake.resources.get("gpu", 0))
    frame = rank_deficiency(reps, p.levels, p.settings["tol"], p.settings["max_iter"], p.multiplier, device, log.info,
                            solver=p.solver["solver"], anderson_memory=p.solver["anderson_memory"],
                            power=p.solver["lawson_power"], iterate_dtype=DTYPES[p.solver["iterate_dtype"]])
    write_csv(snakemake.output[0], frame.assign(task=snakemake.wildcards.task, layer=p.layer))


run(snakemake, main)
