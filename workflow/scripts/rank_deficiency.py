"""Figure 3 data for one task: d_aff between SVD truncation levels of each encoder of a group."""

import logging

from affine_homotopy.report.analysis import rank_deficiency
from affine_homotopy.jobs.io import read_embeddings, write_csv
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.runner import keyed_inputs, run
from affine_homotopy.study.settings import intrinsic_settings

log = logging.getLogger("affine_homotopy.job")


def main(snakemake):
    p = snakemake.params
    # {encoder: path}, in the group's order (the frame's encoder order)
    reps = {name: read_embeddings(path, p.layer) for name, path in keyed_inputs(p.embeddings, snakemake.input).items()}
    device = select_device(p.device, snakemake.resources.get("gpu", 0))
    # the intrinsic stage's rank rule and solver, to the grid's own gap (analysis.rank_deficiency.tol, max_iter)
    settings = intrinsic_settings(p.study, device, tol=p.settings["tol"], max_iter=p.settings["max_iter"])
    frame = rank_deficiency(reps, p.levels, settings, log.info)
    write_csv(snakemake.output[0], frame.assign(task=snakemake.wildcards.task, layer=p.layer))


run(snakemake, main)
