"""Embed both splits of one task with one model encoder: the model loaded once, all configured layers in
one forward pass a batch.

Layer positions (absolute, ``last`` or relative depths) are resolved here, with the model's depth;
the sidecar records the absolute index (``layers``) and the label (``positions``) of each slice.
"""

import logging
from pathlib import Path

import pandas as pd
import torch

from affine_homotopy.models.encoders import check_finite, embed_positions, encoder_pooling, load_encoder
from affine_homotopy.jobs.io import read_json, write_embeddings
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.runner import run

SPLITS = ("train", "dev")


def main(snakemake):
    encoder_name, task = snakemake.wildcards.encoder, snakemake.wildcards.task
    settings = snakemake.params.embedding
    pooling = encoder_pooling(snakemake.params.spec, settings)
    torch.set_num_threads(max(1, snakemake.threads))
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    logging.info("encoder %s on %s", encoder_name, device)
    encoder = load_encoder(encoder_name, snakemake.params.spec, device, snakemake.params.staged)
    positions = list(snakemake.params.positions)
    for split in SPLITS:
        table = snakemake.input[f"{split}_table"]
        frame = pd.read_parquet(table)
        texts_b = None if frame["text_b"].isna().all() else frame["text_b"].tolist()
        logging.info("%s split: %d examples", split, len(frame))
        # the same code as affine_homotopy.embed: positions resolved with the model's depth, one forward pass a batch
        array, layers = embed_positions(
            encoder, frame["text_a"].tolist(), texts_b, snakemake.params.layers, pooling, settings["max_length"],
            settings["batch_size"], device, encoder_name,
        )
        logging.info("depth %d: positions %s are hidden states %s; pooling %s", encoder.depth, positions, layers,
                     pooling)
        check_finite(array, layers, encoder_name, task, split)
        write_embeddings(
            snakemake.output[split],
            array,
            {
                "encoder": encoder_name,
                "task": task,
                "split": split,
                "layers": layers,
                "positions": positions,
                "pooling": pooling,
                "max_length": settings["max_length"],
                "source": snakemake.params.spec,
                "revision": encoder.revision,
                "depth": encoder.depth,
                "device": str(device),
                # the examples' ids in row order (prepare_task): every encoder's rows are the same examples
                "ids_sha256": read_json(Path(table).with_suffix(".json")).get("ids_sha256"),
            },
            settings["storage_dtype"],
        )


run(snakemake, main)
