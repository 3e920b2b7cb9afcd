"""Extrinsic distances of one (task, layer) for all ordered pairs, or, in a job split by source
(extrinsic.sources_per_job), for the pairs its encoders are mapped from (params.sources; the other rows
of its matrices stay empty): the measures extrinsic.measures selects (d_psi always; d_worst;
d_worst_search), their certified lower bounds and Lemma 5.2's bounds. Every bound is checked before
anything is written: a violation is a bug and fails the job with a NumericalError, leaving no output."""

import logging

import numpy as np

from affine_homotopy.core.extrinsic import extrinsic_distances
from affine_homotopy.jobs.extrinsic_tables import diagnostics_frame, tightness_summary
from affine_homotopy.jobs.io import read_embeddings, read_matrix, write_csv, write_matrix
from affine_homotopy.core.linalg import check_finite_representations
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.extrinsic_parts import part_pairs
from affine_homotopy.jobs.probe_files import load_probe_file
from affine_homotopy.jobs.runner import run
from affine_homotopy.study.settings import extrinsic_settings


def measures_line(settings, n_random):
    """What the job computes, for its log: each selected measure with its budget."""
    parts = ["d_psi (task probe)"]
    if "d_worst" in settings.measures:
        parts.append(f"d_worst (task probe and {n_random} random classifiers each)")
    if "d_worst_search" in settings.measures:
        parts.append(f"worst-case search d_worst_search ({settings.search_candidates} aimed classifiers and "
                     f"{settings.search_steps} ascent steps per pair)")
    else:
        parts.append("worst-case search: not selected (d_worst_search is not in extrinsic.measures)")
    return "; ".join(parts)


def main(snakemake):
    layer = snakemake.wildcards.layer  # position label, e.g. layer6
    names = list(snakemake.params.encoders)
    reps = [read_embeddings(path, layer) for path in snakemake.input.embeddings]
    check_finite_representations(reps, names, snakemake.wildcards.task, layer)
    probes, randoms = zip(*(load_probe_file(path) for path in snakemake.input.probes))
    d_aff = read_matrix(snakemake.input.d_aff)
    if list(d_aff.index) != names:
        raise ValueError(f"{snakemake.input.d_aff} names {list(d_aff.index)}, expected {names}")
    d_aff = d_aff.to_numpy()
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    settings = extrinsic_settings(snakemake.params.study, device)
    logging.info("%d encoders, N = %d, %d classes, on %s; certified tol %g (atol %g); measures (extrinsic.measures): "
                 "%s", len(names), reps[0].shape[0], probes[0].weight.shape[1], device, settings.tol, settings.atol,
                 measures_line(settings, randoms[0].weight.shape[0]))
    # d_worst is the only measure that evaluates the random-label probes (the search starts from its classifiers)
    randoms = randoms if "d_worst" in settings.measures else None
    sources = snakemake.params.sources  # None: every ordered pair
    pairs = None if sources is None else part_pairs(names, sources)
    if pairs is not None:
        logging.info("part of a job split by source (extrinsic.sources_per_job): the %d pairs mapped from %s",
                     len(pairs), ", ".join(sources))
    result = extrinsic_distances(reps, probes, names, np.load(snakemake.input.map_weights), randoms, settings, d_aff,
                                 pairs)
    if pairs is None:  # a part's log has no whole table to summarise: the merge job logs it
        logging.info("Lemma 5.2 tightness d_psi / bound: %s",
                     tightness_summary(result.values.d_psi, result.bounds.task, result.values.d_worst,
                                       slack=result.bounds.task_slack))
    result.check_bounds()  # NumericalError before anything is written
    matrices = result.matrices()
    declared = [name for name in snakemake.output.keys() if name != "diagnostics"]
    # the rule declares the same selection's files (affine_homotopy.core.measures.extrinsic_outputs)
    if sorted(matrices) != sorted(declared):
        raise ValueError(f"the engine computed {sorted(matrices)}, but the rule declares {sorted(declared)}")
    for name, matrix in matrices.items():
        write_matrix(snakemake.output[name], matrix, names)
    write_csv(snakemake.output.diagnostics, diagnostics_frame(result, d_aff))
    logging.info("phase seconds: %s", {k: round(v, 2) for k, v in result.seconds.items()})


run(snakemake, main)
