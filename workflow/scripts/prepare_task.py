"""Write both splits of a task, from one load of it, as standard tables (text_a, text_b, label) with a
fingerprint each, and each split's examples' ids in the table's order (``<split>_ids.json``; their
fingerprint ``ids_sha256``, and that of both splits' ids, train then dev, ``task_ids_sha256``: an
embeddings file without ids is tied to that order).

Your own data (``table``, ``hf_dataset``) is checked here too, after the caps (``n_train``, ``n_validation``)
and before anything is written; its class mapping (``classes``: class id k is the label classes[k]), its
files with their sha256 (``files``) or its data set's commit (``dataset``) go into the sidecar and provenance.
"""

import logging

from affine_homotopy.jobs.io import fingerprint_frame, write_json, write_parquet
from affine_homotopy.jobs.runner import run
from affine_homotopy.models.task_data import load_task
from affine_homotopy.study.user_files import ids_sha256


def main(snakemake):
    task, spec = snakemake.wildcards.task, snakemake.params.spec
    prepared = load_task(task, spec, snakemake.params.staged)
    if prepared.classes is not None:
        logging.info("classes (class id: label): %s", dict(enumerate(prepared.classes)))
    for split in ("train", "dev"):
        frame, ids = prepared.frames[split], prepared.ids[split]
        counts = frame["label"].value_counts().sort_index()
        logging.info("task %s, split %s: %d examples, labels %s", task, split, len(frame), counts.to_dict())
        meta = {
            "task": task,
            "split": split,
            "source": spec,
            "n_examples": len(frame),
            "n_classes": prepared.n_classes,
            "is_pair": prepared.is_pair,
            "label_counts": {str(k): int(v) for k, v in counts.items()},
            "fingerprint_sha256": fingerprint_frame(frame),
            "ids_sha256": ids_sha256(ids),
            "task_ids_sha256": ids_sha256(prepared.ids["train"] + prepared.ids["dev"]),
        }
        if prepared.classes is not None:
            meta["classes"] = prepared.classes
        meta.update({key: value for key, value in prepared.record.items() if key != "classes"})
        write_json(snakemake.output[f"{split}_ids"], ids)
        write_parquet(snakemake.output[f"{split}_table"], frame)
        write_json(snakemake.output[f"{split}_meta"], meta)


run(snakemake, main)
