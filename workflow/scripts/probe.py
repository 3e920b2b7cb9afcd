"""Task probes of one encoder on one task, one per configured layer; scored on the eval split."""

import logging

import numpy as np
import pandas as pd

from affine_homotopy.io import atomic_path, read_embeddings, write_csv
from affine_homotopy.probes import fit_softmax_probe, score
from affine_homotopy.runner import run
from affine_homotopy.tasks import task_info


def main(snakemake):
    task, encoder = snakemake.wildcards.task, snakemake.wildcards.encoder
    info = task_info(task, snakemake.params.task_spec)
    settings = snakemake.params.settings
    y_train = pd.read_parquet(snakemake.input.train_table)["label"].to_numpy()
    y_dev = pd.read_parquet(snakemake.input.dev_table)["label"].to_numpy()
    train, dev = read_embeddings(snakemake.input.train), read_embeddings(snakemake.input.dev)
    rows = []
    for slot, (layer, weights_path) in enumerate(zip(snakemake.params.layers, snakemake.output.weights)):
        probe = fit_softmax_probe(
            train[slot], y_train, info.n_classes, settings["l2_grid"], settings["validation_fraction"],
            settings["max_iter"],
        )
        metrics = score(info.metrics, y_dev, probe.predict(dev[slot]))
        row = {"encoder": encoder, "layer": layer, **metrics,
               "train_accuracy": score(["accuracy"], y_train, probe.predict(train[slot]))["accuracy"],
               "l2": probe.l2, "iterations": probe.iterations,
               "n_train": len(y_train), "n_dev": len(y_dev)}
        logging.info("layer %d: %s", layer, row)
        rows.append(row)
        with atomic_path(weights_path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, weight=probe.weight, bias=probe.bias, l2=probe.l2, layer=layer)
    write_csv(snakemake.output.metrics, pd.DataFrame(rows))


run(snakemake, main)
