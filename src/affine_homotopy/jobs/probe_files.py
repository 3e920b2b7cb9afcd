"""The probe files of the probe stage: a task probe and its random-label probes in one ``.npz``,
written atomically and read back with a named error for a file that is not one."""

from __future__ import annotations

import numpy as np

from ..core.probes import ProbeSet, SoftmaxProbe
from ..errors import DataError
from .io import atomic_path

PROBE_FILE_KEYS = ("weight", "bias", "l2", "layer", "random_weight", "random_bias", "random_norm",
                   "random_train_accuracy")


def save_probe_file(path, layer: str, task: SoftmaxProbe, random: ProbeSet | None = None,
                    random_train_accuracy: np.ndarray | None = None) -> None:
    """Write the task probe (``weight`` (D, C), ``bias`` (C,), ``l2``) and the random-label probes
    (``random_weight`` (n, D, C), ``random_bias`` (n, C), their spectral norms ``random_norm`` and
    training accuracy on their own labels ``random_train_accuracy``; n may be 0) atomically."""
    width, n_classes = np.shape(task.weight)
    random = random or ProbeSet(np.zeros((0, width, n_classes)), np.zeros((0, n_classes)), task.l2, 0)
    accuracy = np.zeros(random.weight.shape[0]) if random_train_accuracy is None else random_train_accuracy
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, weight=task.weight, bias=task.bias, l2=task.l2, layer=layer,
                     random_weight=random.weight, random_bias=random.bias, random_norm=random.norms(),
                     random_train_accuracy=accuracy)


def load_probe_file(path) -> tuple[SoftmaxProbe, ProbeSet]:
    """The task probe and the random-label probes of a file written by :func:`save_probe_file`."""
    with np.load(path, allow_pickle=False) as data:
        missing = [key for key in PROBE_FILE_KEYS if key not in data.files]
        if missing:
            raise DataError(f"{path}: not a probe file (missing {missing}); rerun the probe rule to rewrite it")
        task = SoftmaxProbe(np.array(data["weight"]), np.array(data["bias"]), float(data["l2"]), 0)
        random = ProbeSet(np.array(data["random_weight"]), np.array(data["random_bias"]), float(data["l2"]), 0)
    return task, random
