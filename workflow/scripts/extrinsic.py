"""Extrinsic distances of one (task, layer) for all ordered pairs: d_psi, d_worst and Lemma 5.2's bound."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.extrinsic import ExtrinsicSettings, extrinsic_distances, lemma_bound, tightness_summary
from affine_homotopy.io import read_embeddings, read_matrix, write_csv, write_matrix
from affine_homotopy.linalg import DTYPES, select_device
from affine_homotopy.probes import ProbeSet, SoftmaxProbe
from affine_homotopy.runner import run


def load_probes(path):
    with np.load(path) as data:
        task = SoftmaxProbe(data["weight"], data["bias"], float(data["l2"]), 0)
        random = ProbeSet(data["random_weight"], data["random_bias"], float(data["l2"]), 0)
    return task, random


def main(snakemake):
    layer = int(snakemake.wildcards.layer)
    names = list(snakemake.params.encoders)
    config = snakemake.params.settings
    reps = [read_embeddings(path, layer) for path in snakemake.input.embeddings]
    loaded = [load_probes(path) for path in snakemake.input.probes]
    probes, randoms = [p for p, _ in loaded], [r for _, r in loaded]
    d_aff = read_matrix(snakemake.input.d_aff)
    if list(d_aff.index) != names:
        raise ValueError(f"{snakemake.input.d_aff} names {list(d_aff.index)}, expected {names}")
    map_weights = np.load(snakemake.input.map_weights)
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    settings = ExtrinsicSettings(
        max_iter=config["max_iter"], refine_iter=config["refine_iter"], rounds=config["rounds"],
        temperatures=tuple(config["temperatures"]), working_set=config["working_set"],
        working_budget=config["working_budget"], inverse_temperature=config["inverse_temperature"],
        multiplier=snakemake.params.multiplier, block_mb=config["block_mb"], dtype=DTYPES[config["dtype"]],
        device=device,
    )
    logging.info("%d encoders, N = %d, %d random classifiers each, on %s", len(names), reps[0].shape[0],
                 randoms[0].weight.shape[0], device)
    result = extrinsic_distances(reps, probes, names, map_weights, randoms, settings)
    bound = lemma_bound(probes, d_aff.to_numpy(), settings.inverse_temperature)
    write_matrix(snakemake.output.d_psi, result.d_psi, names)
    write_matrix(snakemake.output.d_worst, result.d_worst, names)
    write_matrix(snakemake.output.bound, bound, names)
    frame = pd.DataFrame(result.diagnostics)
    index = {name: k for k, name in enumerate(names)}
    frame.insert(3, "bound", [bound[index[a], index[b]] for a, b in zip(frame["mapped_from"], frame["mapped_to"])])
    frame.insert(4, "d_aff", [d_aff.loc[a, b] for a, b in zip(frame["mapped_from"], frame["mapped_to"])])
    write_csv(snakemake.output.diagnostics, frame)
    summary = tightness_summary(result.d_psi, bound, result.d_worst)
    logging.info("Lemma 5.2 tightness d_psi / bound: %s", summary)
    if summary["violations"]:
        # the composed candidate attains the bound, so a violation is a bug, not a finding
        logging.error("%d pairs violate d_psi <= bound", summary["violations"])
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})


run(snakemake, main)
