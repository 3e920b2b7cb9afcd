"""Extrinsic distances of one (task, layer) for all ordered pairs: d_psi, d_worst, d_worst_search and
Lemma 5.2's bounds. Every bound is checked before anything is written: a violation is a bug (the
composed candidate attains each bound) and fails the job with a NumericalError, leaving no output."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.extrinsic import (
    ExtrinsicSettings,
    check_bounds,
    extrinsic_distances,
    lemma_bound,
    tightness_summary,
)
from affine_homotopy.io import read_embeddings, read_matrix, write_csv, write_matrix
from affine_homotopy.linalg import DTYPES, check_finite_representations, select_device
from affine_homotopy.probes import ProbeSet, SoftmaxProbe
from affine_homotopy.runner import run


def load_probes(path):
    with np.load(path) as data:
        task = SoftmaxProbe(data["weight"], data["bias"], float(data["l2"]), 0)
        random = ProbeSet(data["random_weight"], data["random_bias"], float(data["l2"]), 0)
    return task, random


def main(snakemake):
    layer = snakemake.wildcards.layer  # position label, e.g. layer6
    names = list(snakemake.params.encoders)
    config = snakemake.params.settings
    search = config["worst_search"]
    reps = [read_embeddings(path, layer) for path in snakemake.input.embeddings]
    check_finite_representations(reps, names, snakemake.wildcards.task, layer)
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
        multiplier=snakemake.params.multiplier, block_mb=config["block_mb"], search_steps=search["steps"],
        search_step_size=search["step_size"], search_radius=search["radius"], search_candidates=search["candidates"],
        dtype=DTYPES[config["dtype"]], device=device,
    )
    logging.info("%d encoders, N = %d, %d random classifiers each (%s), worst-case search: %d aimed classifiers "
                 "and %d ascent steps per pair, on %s", len(names), reps[0].shape[0], randoms[0].weight.shape[0],
                 config["random_probes"]["method"], search["candidates"], search["steps"], device)
    result = extrinsic_distances(reps, probes, names, map_weights, randoms, settings, d_aff.to_numpy())
    bound = lemma_bound(probes, d_aff.to_numpy(), settings.inverse_temperature)
    index = {name: k for k, name in enumerate(names)}
    slack = np.zeros_like(bound)  # per pair: the target's discarded tail in the bound's units (extrinsic._LemmaCheck)
    for row in result.diagnostics:
        slack[index[row["mapped_from"]], index[row["mapped_to"]]] = row["bound_slack"]
    logging.info("Lemma 5.2 tightness d_psi / bound: %s", tightness_summary(result.d_psi, bound, result.d_worst,
                                                                            slack=slack))
    check_bounds(result.d_psi, bound, result.bound_violations, slack)  # NumericalError before anything is written
    write_matrix(snakemake.output.d_psi, result.d_psi, names)
    write_matrix(snakemake.output.d_worst, result.d_worst, names)
    write_matrix(snakemake.output.d_worst_search, result.d_worst_search, names)
    write_matrix(snakemake.output.bound, bound, names)
    write_matrix(snakemake.output.bound_worst, result.bound_worst, names)
    frame = pd.DataFrame(result.diagnostics)
    pairs = list(zip(frame["mapped_from"], frame["mapped_to"]))
    frame.insert(3, "bound", [bound[index[a], index[b]] for a, b in pairs])
    frame.insert(4, "d_aff", [d_aff.loc[a, b] for a, b in pairs])
    frame["bound_worst"] = [result.bound_worst[index[a], index[b]] for a, b in pairs]
    write_csv(snakemake.output.diagnostics, frame)
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})


run(snakemake, main)
