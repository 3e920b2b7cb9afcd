"""Derived encoder: transform the base encoder's representations of both splits, layer by layer."""

import logging

from affine_homotopy.models.derived import derive
from affine_homotopy.models.encoders import check_finite
from affine_homotopy.jobs.io import read_embeddings, read_json, write_embeddings
from affine_homotopy.jobs.runner import run


def main(snakemake):
    name, task = snakemake.wildcards.encoder, snakemake.wildcards.task
    spec = snakemake.params.spec
    base_meta = read_json(snakemake.input.train.replace(".npy", ".json"))
    layers = base_meta["layers"]
    train, dev, details = derive(
        spec, read_embeddings(snakemake.input.train), read_embeddings(snakemake.input.dev), layers,
        snakemake.params.rank_multiplier,
    )
    logging.info("derived %s from %s: %s", name, spec["base"], details)
    for split, array in (("train", train), ("dev", dev)):
        check_finite(array, layers, name, task, split)
        meta = {key: base_meta[key] for key in ("task", "layers", "pooling", "max_length", "revision")}
        meta.update(positions=base_meta.get("positions"), depth=base_meta.get("depth"))  # the base's resolution
        meta.update(encoder=name, split=split, source=spec, base=spec["base"], details=details)
        write_embeddings(snakemake.output[split], array, meta, snakemake.params.storage_dtype)


run(snakemake, main)
