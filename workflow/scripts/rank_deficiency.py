"""Figure 3 data for one task: d_aff between SVD truncation levels of each encoder of a group."""

import logging

from affine_homotopy.report.analysis import rank_deficiency
from affine_homotopy.jobs.io import read_embeddings, write_csv
from affine_homotopy.core.linalg import DTYPES
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.runner import keyed_inputs, run

log = logging.getLogger("affine_homotopy.job")


def main(snakemake):
    p = snakemake.params
    # {encoder: path}, in the group's order (the frame's encoder order)
    reps = {name: read_embeddings(path, p.layer) for name, path in keyed_inputs(p.embeddings, snakemake.input).items()}
    device = select_device(p.device, snakemake.resources.get("gpu", 0))
    frame = rank_deficiency(reps, p.levels, p.settings["tol"], p.settings["max_iter"], p.multiplier, device, log.info,
                            solver=p.solver["solver"], anderson_memory=p.solver["anderson_memory"],
                            power=p.solver["lawson_power"], iterate_dtype=DTYPES[p.solver["iterate_dtype"]])
    write_csv(snakemake.output[0], frame.assign(task=snakemake.wildcards.task, layer=p.layer))


run(snakemake, main)
