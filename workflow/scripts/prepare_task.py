"""Write one split of a task as a standard table (text_a, text_b, label) with a fingerprint."""

import logging

from affine_homotopy.jobs.io import fingerprint_frame, write_json, write_parquet
from affine_homotopy.jobs.runner import run
from affine_homotopy.models.task_data import load_task_split
from affine_homotopy.study.tasks import task_info


def main(snakemake):
    task, split = snakemake.wildcards.task, snakemake.wildcards.split
    spec = snakemake.params.spec
    frame = load_task_split(task, spec, split, snakemake.params.staged)
    info = task_info(task, spec)
    counts = frame["label"].value_counts().sort_index()
    logging.info("task %s, split %s: %d examples, labels %s", task, split, len(frame), counts.to_dict())
    write_parquet(snakemake.output.table, frame)
    write_json(
        snakemake.output.meta,
        {
            "task": task,
            "split": split,
            "source": spec,
            "n_examples": len(frame),
            "n_classes": info.n_classes,
            "is_pair": info.is_pair,
            "label_counts": {str(k): int(v) for k, v in counts.items()},
            "fingerprint_sha256": fingerprint_frame(frame),
        },
    )


run(snakemake, main)
