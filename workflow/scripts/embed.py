"""Embed one split of one task with one model encoder: all configured layers, one forward pass."""

import logging

import pandas as pd
import torch

from affine_homotopy.encoders import check_finite, embed_texts, load_encoder
from affine_homotopy.io import write_embeddings
from affine_homotopy.linalg import select_device
from affine_homotopy.runner import run


def main(snakemake):
    encoder_name, task, split = (snakemake.wildcards[k] for k in ("encoder", "task", "split"))
    settings = snakemake.params.embedding
    layers = list(snakemake.params.layers)
    torch.set_num_threads(max(1, snakemake.threads))
    device = select_device(snakemake.params.device, snakemake.resources.get("gpu", 0))
    logging.info("encoder %s on %s", encoder_name, device)
    encoder = load_encoder(encoder_name, snakemake.params.spec, device, snakemake.params.staged)
    frame = pd.read_parquet(snakemake.input.table)
    texts_b = None if frame["text_b"].isna().all() else frame["text_b"].tolist()
    array = embed_texts(
        encoder, frame["text_a"].tolist(), texts_b, layers, settings["pooling"], settings["max_length"],
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
            "pooling": settings["pooling"],
            "max_length": settings["max_length"],
            "source": snakemake.params.spec,
            "revision": encoder.revision,
            "depth": encoder.depth,
            "device": str(device),
        },
        settings["storage_dtype"],
    )


run(snakemake, main)
