"""Embed one split of one task with one model encoder: all configured layers, one forward pass.

Layer positions (absolute, ``last`` or relative depths) are resolved here, with the model's depth;
the sidecar records the absolute index (``layers``) and the label (``positions``) of each slice.
"""

import logging

import pandas as pd
import torch

from affine_homotopy.models.encoders import check_finite, embed_texts, encoder_pooling, load_encoder
from affine_homotopy.jobs.io import write_embeddings
from affine_homotopy.study.layers import resolve_layers
from affine_homotopy.jobs.devices import select_device
from affine_homotopy.jobs.runner import run


def main(snakemake):
    encoder_name, task, split = (snakemake.wildcards[k] for k in ("encoder", "task", "split"))
    settings = snakemake.params.embedding
    pooling = encoder_pooling(snakemake.params.spec, settings)
    torch.set_num_threads(max(1, snakemake.threads))
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    logging.info("encoder %s on %s", encoder_name, device)
    encoder = load_encoder(encoder_name, snakemake.params.spec, device, snakemake.params.staged)
    positions = list(snakemake.params.positions)
    layers = resolve_layers(snakemake.params.layers, encoder.depth)
    logging.info("depth %d: positions %s are hidden states %s; pooling %s", encoder.depth, positions, layers, pooling)
    frame = pd.read_parquet(snakemake.input.table)
    texts_b = None if frame["text_b"].isna().all() else frame["text_b"].tolist()
    array = embed_texts(
        encoder, frame["text_a"].tolist(), texts_b, layers, pooling, settings["max_length"],
        settings["batch_size"], device, encoder_name,
    )
    check_finite(array, layers, encoder_name, task, split)
    write_embeddings(
        snakemake.output.array,
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
        },
        settings["storage_dtype"],
    )


run(snakemake, main)
