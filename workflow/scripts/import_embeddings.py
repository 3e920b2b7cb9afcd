"""An embeddings encoder: import the representations of one task, computed elsewhere, from its file.

The file's rows are tied to the task's examples by its ``ids`` (or, without them, by the task's order:
the fit split's examples, then the eval split's, as listed in data/<task>/<split>_ids.json); the
configured layers are found by the encoder's ``layers`` or the file's keys
(:mod:`affine_homotopy.study.precomputed`). Every check (layers, rows, ids, NaN/Inf) runs before
anything is written. The sidecars record the file's sha256 as the encoder's ``revision``.
"""

import logging

from affine_homotopy.jobs.io import read_json, write_embeddings
from affine_homotopy.jobs.runner import run
from affine_homotopy.study.precomputed import file_key, layer_map, open_embeddings, selected_arrays, task_rows
from affine_homotopy.study.user_files import ids_sha256


def main(snakemake):
    encoder, task = snakemake.wildcards.encoder, snakemake.wildcards.task
    spec = snakemake.params.spec
    labels = list(snakemake.params.positions)
    file = open_embeddings(snakemake.input.file, file_key(encoder, task), f"encoder '{encoder}', task '{task}'")
    layers = layer_map(encoder, spec, file, labels, task)
    ids = {"train": read_json(snakemake.input.train_ids), "dev": read_json(snakemake.input.dev_ids)}
    rows = task_rows(encoder, task, file, ids, ids_file=str(snakemake.input.train_ids).replace("train_ids", "<split>_ids"))
    arrays = selected_arrays(encoder, task, file, layers, rows)
    sha256 = file.sha256()
    tied = "ids" if file.ids is not None else "order"
    logging.info("%s: %d rows x %d, layers %s from %s (sha256 %s); rows tied by %s: %d train, %d dev examples",
                 file.path, file.n, arrays["train"].shape[2], {k: str(v) for k, v in layers.items()}, file.fmt,
                 sha256, tied, len(ids["train"]), len(ids["dev"]))
    if file.ids is not None and file.n > len(ids["train"]) + len(ids["dev"]):
        logging.info("the file holds %d rows the task does not use", file.n - len(ids["train"]) - len(ids["dev"]))
    # hidden-state index of each slice: the configured index for absolute positions; an embeddings file has
    # no depth, so a relative or last position gets its slot (derived copies seed their maps by it)
    indices = [p if isinstance(p, int) and not isinstance(p, bool) else slot
               for slot, p in enumerate(snakemake.params.layers)]
    for split in ("train", "dev"):
        meta = {
            "encoder": encoder, "task": task, "split": split, "layers": indices, "positions": labels,
            "depth": None, "pooling": None, "max_length": None, "source": spec, "revision": f"sha256:{sha256}",
            "file": str(file.path), "file_sha256": sha256, "file_keys": {k: str(v) for k, v in layers.items()},
            "rows_tied_by": tied, "ids_sha256": ids_sha256(ids[split]), "device": "precomputed",
        }
        write_embeddings(snakemake.output[split], arrays[split], meta, snakemake.params.storage_dtype)


run(snakemake, main)
