"""Task probes of one encoder on one task, one per extrinsic layer (``params.layers``: the labels of
``extrinsic.layers``, each read from the embeddings by its label); scored on the eval split.

Also the random-label probes of the worst-case measures (``n_random`` label sets, seeds 0..n-1, the
task's number of classes; none when ``extrinsic.measures`` does not select d_worst), fitted as one
multi-head problem as ``extrinsic.random_probes`` says (default: the paper's SGD protocol) and stored
beside the task probe as ``random_weight`` (n, D, C), ``random_bias`` (n, C), with each one's spectral
norm ``random_norm`` and training accuracy on its own labels ``random_train_accuracy``; the metrics
table summarises both per encoder.
"""

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from affine_homotopy.jobs.io import read_embeddings, read_json, write_csv
from affine_homotopy.core.probes import fit_random_probes, fit_softmax_probe, random_labels, score
from affine_homotopy.jobs.probe_files import save_probe_file
from affine_homotopy.jobs.runner import run
from affine_homotopy.study.tasks import task_info


def main(snakemake):
    task, encoder = snakemake.wildcards.task, snakemake.wildcards.encoder
    info = task_info(task, snakemake.params.task_spec, read_json(snakemake.input.train_meta))
    settings = snakemake.params.settings
    n_random = int(snakemake.params.n_random)
    y_train = pd.read_parquet(snakemake.input.train_table)["label"].to_numpy()
    y_dev = pd.read_parquet(snakemake.input.dev_table)["label"].to_numpy()
    labels = random_labels(len(y_train), info.n_classes, range(n_random))
    rows = []
    # each layer's probe file is found by its name (probes/<task>/weights/<encoder>/<layer>.npz), and each
    # layer's representations by its label in the embeddings' sidecar, not by position: the probes run at
    # the extrinsic layers, which may be a part of the embedded ones
    weights_paths = {Path(path).stem: path for path in snakemake.output.weights}
    for layer in snakemake.params.layers:
        weights_path = weights_paths[layer]
        train = read_embeddings(snakemake.input.train, layer)
        dev = read_embeddings(snakemake.input.dev, layer)
        probe = fit_softmax_probe(
            train, y_train, info.n_classes, settings["l2_grid"], settings["validation_fraction"],
            settings["max_iter"], rank_multiplier=snakemake.params.rank_multiplier,
        )
        metrics = score(info.metrics, y_dev, probe.predict(dev))
        row = {"encoder": encoder, "layer": layer, **metrics,
               "train_accuracy": score(["accuracy"], y_train, probe.predict(train))["accuracy"],
               "l2": probe.l2, "iterations": probe.iterations,
               "n_train": len(y_train), "n_dev": len(y_dev)}
        randoms, random_accuracy = None, None
        if n_random:
            randoms = fit_random_probes(train, labels, info.n_classes, snakemake.params.random_probes, probe.l2,
                                        settings["random_max_iter"], rank_multiplier=snakemake.params.rank_multiplier)
            random_norm, random_accuracy = randoms.norms(), randoms.train_accuracy(train, labels)
            # how sharp the classifiers are: memorised random labels (above 1/C) and Lemma 5.2's factor
            row.update({
                "random_method": snakemake.params.random_probes["method"],
                "random_train_accuracy_mean": float(random_accuracy.mean()),
                "random_train_accuracy_min": float(random_accuracy.min()),
                "random_train_accuracy_max": float(random_accuracy.max()),
                "random_norm_median": float(np.median(random_norm)),
                "random_norm_max": float(random_norm.max()),
                "task_norm": float(np.linalg.norm(probe.weight, 2)),
                "random_iterations": randoms.iterations,
            })
        logging.info("%s: %s", layer, row)
        rows.append(row)
        save_probe_file(weights_path, layer, probe, randoms, random_accuracy)
    write_csv(snakemake.output.metrics, pd.DataFrame(rows))


run(snakemake, main)
