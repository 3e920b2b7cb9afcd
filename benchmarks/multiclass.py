"""The multi-class certificate: its relative gap, split by cause, and its CPU beside the local search's.

    python -m benchmarks multiclass [--quick] [--n 2000] [--randoms 4] [--glue-dir DIR]
    python -m benchmarks multiclass --two-class-run results/demo [--task sentiment] [--layer 6]

Data: a real 3-class task with no download, sentences of SST-2, CoLA and MRPC (``--glue-dir``'s
training files, one third each, seeded) labelled by their corpus; all-MiniLM-L6-v2 (mean pooling, the
demo's encoder) at layers 3 and 6, and the demo's derived copies of layer 6 (``svd_truncate`` 0.4,
``gaussian_noise`` 0.1). Without the GLUE files, or with ``--quick``: synthetic encoders.

Per ordered pair: the target's task probe (3 classes, the ``d_psi`` path) and ``--randoms`` random-label
probes of 3 and of 5 classes (the ``d_worst`` path). For each classifier, on the whitened source: the
local search (:func:`~affine_homotopy.core.extrinsic.local.fit_heads` from the least-squares start, the
engine's estimator) and the certificate
(:func:`~affine_homotopy.core.extrinsic.multiclass.certify_classifier` from the local search's map), each
timed in CPU seconds on one thread. Printed: per classifier the interval, its relative gap and why it
stopped (``tol``: closed; ``relaxation``: the relaxation's own optimum, the gap is the relaxation's;
``max_lp``: the solver's budget), then per number of classes the median and largest gap and the
median CPU ratio certificate / local search.

``--two-class-run`` checks the general path on two classes instead: every ordered pair of a finished
run's two-class task (its embeddings and task probes) certified by the engine's two-class path and by
the multi-class one; printed: whether every pair's intervals overlap (widened by ``tol``) and the
largest difference of their upper bounds.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchmarks.common import (Clock, add_glue_dir, load_text, minilm_encoder, say, setup_line,
                               synthetic_encoders)

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances  # noqa: E402
from affine_homotopy.core.extrinsic.local import Heads, fit_heads  # noqa: E402
from affine_homotopy.core.extrinsic.multiclass import certify_classifier  # noqa: E402
from affine_homotopy.core.linalg import factorise  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, fit_softmax_probe, random_labels  # noqa: E402
from affine_homotopy.models.derived import gaussian_noise, svd_truncate  # noqa: E402

CORPORA = (("SST-2", "sentence"), ("CoLA", 3), ("MRPC", "#1 String"))
PAIRS = ((0, 1), (1, 0), (1, 2), (2, 1), (3, 1), (1, 3))


def corpus_sentences(glue: Path, n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` sentences, a seeded third from each corpus's training file, and their corpus as the label."""
    sentences, labels = [], []
    rng = np.random.default_rng(seed)
    for label, (corpus, column) in enumerate(CORPORA):
        lines = [line.split("\t") for line in (glue / corpus / "train.tsv").read_text(encoding="utf-8-sig").splitlines()]
        index = column if isinstance(column, int) else lines[0].index(column)
        rows = [fields[index] for fields in (lines if isinstance(column, int) else lines[1:]) if len(fields) > index]
        count = n // len(CORPORA) + (label < n % len(CORPORA))
        sentences += [rows[k] for k in np.sort(rng.choice(len(rows), size=count, replace=False))]
        labels += [label] * count
    return sentences, np.array(labels)


def encoders(args: argparse.Namespace) -> tuple[list[np.ndarray], list[str], np.ndarray, str]:
    """The encoders, their names, the 3-class labels and a description of the data."""
    if all((args.glue_dir / corpus / "train.tsv").is_file() for corpus, _ in CORPORA) and not args.quick:
        from affine_homotopy.models.encoders import embed_texts

        sentences, labels = corpus_sentences(args.glue_dir, args.n)
        layer3, layer6 = embed_texts(minilm_encoder(), sentences, None, layers=[3, 6]).astype(np.float64)
        svd40 = svd_truncate(layer6, layer6[:1], 0.4)[0]
        noise = gaussian_noise(layer6, layer6[:1], 0.1, 0, 6)[0]
        return ([layer3, layer6, svd40, noise], ["minilm L3", "minilm L6", "minilm_svd40 L6", "minilm_noise L6"],
                labels, f"all-MiniLM-L6-v2 of {args.n} sentences of SST-2, CoLA and MRPC, labelled by corpus")
    reps, names = synthetic_encoders(4, args.n, 48)
    labels = np.argmax(reps[1][:, :3], axis=1)
    return reps, names, labels, "synthetic encoders (--quick or no GLUE files)"


def whitened(X: np.ndarray) -> torch.Tensor:
    """``sqrt(N) Q`` of the centred source under the rank rule (the engine's coordinates)."""
    return factorise(np.asarray(X, dtype=np.float64)).Q * math.sqrt(len(X))


def relative_gap(interval) -> float:
    """The engine's convention: 0 for an interval closed by the absolute floor (an exact fit)."""
    return 0.0 if interval.stop == "floor" else interval.relative_gap


def measure_classifier(Z: torch.Tensor, logits: np.ndarray, settings: ExtrinsicSettings) -> dict[str, object]:
    """The local search and the certificate of one classifier's target probabilities."""
    P = torch.softmax(torch.as_tensor(logits), dim=1)
    A = (Z.T @ torch.as_tensor(logits)) / Z.shape[0]  # least squares in whitened coordinates
    c = torch.as_tensor(logits).mean(dim=0)
    with Clock() as local_clock:
        local = fit_heads(Z, Heads(P[:, None], {"least_squares": (A[:, None], c[None])}), settings)
    with Clock() as certificate_clock:
        found = certify_classifier(Z, P.numpy(), local.A[:, 0].numpy(), local.c[0].numpy(), settings)
    interval = found.interval
    return {"local": float(local.upper[0]), "interval": interval, "local_cpu": local_clock.cpu,
            "certificate_cpu": certificate_clock.cpu, "cuts": found.cuts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks multiclass", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="synthetic data, N = 400, 1 random probe per C")
    parser.add_argument("--n", type=int, default=2000, help="examples (default 2000)")
    parser.add_argument("--randoms", type=int, default=4, help="random-label probes per target and C (default 4)")
    parser.add_argument("--two-class-run", type=Path, help="a finished run's results folder: the general path on its "
                                                          "two-class task instead")
    parser.add_argument("--task", default="sentiment", help="--two-class-run's task (default sentiment)")
    parser.add_argument("--layer", type=int, default=6, help="--two-class-run's layer (default 6)")
    add_glue_dir(parser, "SST-2, CoLA and MRPC train.tsv (synthetic encoders without them)")
    args = parser.parse_args(argv)
    if args.two_class_run is not None:
        return two_class_check(args.two_class_run, args.task, args.layer)
    if args.quick:
        args.n, args.randoms = 400, 1
    torch.set_num_threads(1)
    reps, names, labels, data = encoders(args)
    settings = ExtrinsicSettings()
    say(setup_line(data, f"N = {args.n}, D = {reps[0].shape[1]}, {len(PAIRS)} ordered pairs, the task probe and "
                         f"{args.randoms} random probes of 3 and 5 classes per pair", "float64", "cpu (1 thread)"))
    rows = []
    for i, j in PAIRS:
        Z = whitened(reps[i])
        task = fit_softmax_probe(reps[j], labels, 3)
        classifiers = [("task", 3, reps[j] @ task.weight + task.bias)]
        for C in (3, 5):
            probes = fit_random_probes_sgd(reps[j], random_labels(len(labels), C, range(args.randoms)), C)
            classifiers += [(f"random {k}", C, reps[j] @ probes.weight[k] + probes.bias[k]) for k in range(args.randoms)]
        for label, C, logits in classifiers:
            row = {"pair": f"{names[i]} -> {names[j]}", "classifier": label, "C": C,
                   **measure_classifier(Z, np.asarray(logits, dtype=np.float64), settings)}
            rows.append(row)
            interval = row["interval"]
            say(f"{row['pair']:<34} {label:<9} C={C}  local {row['local']:.5f}  [{interval.lower:.5f}, "
                f"{interval.upper:.5f}]  gap {relative_gap(interval):7.2%}  {interval.stop:<10} cuts {row['cuts']:4d}  "
                f"CPU s local {row['local_cpu']:6.2f} certificate {row['certificate_cpu']:7.2f}")
    summarise(rows)
    say(load_text())
    return 0


def two_class_check(run: Path, task: str, layer: int) -> int:
    """The two-class engine against the general path on every ordered pair of ``run``'s ``task``."""
    from affine_homotopy.core.probes import SoftmaxProbe
    from affine_homotopy.jobs.io import read_embeddings

    names = sorted(path.name for path in (run / "embeddings").iterdir() if (path / task / "train.npy").is_file())
    reps = [read_embeddings(run / "embeddings" / name / task / "train.npy", layer).astype(np.float64) for name in names]
    files = [np.load(run / "probes" / task / "weights" / name / f"layer{layer}.npz") for name in names]
    probes = [SoftmaxProbe(f["weight"], f["bias"], float(f["l2"]), 0) for f in files]
    settings = ExtrinsicSettings(measures=("d_psi",))
    torch.set_num_threads(1)
    say(setup_line(f"{run}: task {task}, layer {layer}, {len(names)} encoders", f"N = {len(reps[0])}",
                   "float64", "cpu (1 thread)"))
    result = extrinsic_distances(reps, probes, names, settings=settings)
    overlaps, largest = 0, 0.0
    pairs = [(i, j) for i in range(len(names)) for j in range(len(names)) if i != j]
    for i, j in pairs:
        two = result.interval(i, j)
        general = measure_classifier(whitened(reps[i]), probes[j].logits(reps[j]), settings)["interval"]
        overlaps += bool(general.lower <= two.upper * (1 + settings.tol) + settings.atol
                         and two.lower <= general.upper * (1 + settings.tol) + settings.atol)
        largest = max(largest, abs(general.upper - two.upper) / max(two.upper, settings.atol))
    say(f"{overlaps} of {len(pairs)} ordered pairs: the two paths' intervals overlap (widened by tol = {settings.tol:g}); "
        f"largest relative difference of the upper bounds {largest:.2e}")
    return 0 if overlaps == len(pairs) else 1


def summarise(rows: list[dict[str, object]]) -> None:
    for C in (3, 5):
        part = [row for row in rows if row["C"] == C]
        gaps = np.array([relative_gap(row["interval"]) for row in part])
        stops = [row["interval"].stop for row in part]
        ratios = np.array([row["certificate_cpu"] / max(row["local_cpu"], 1e-9) for row in part])
        by_cause = ", ".join(f"{stop} {stops.count(stop)}" for stop in sorted(set(stops)))
        say(f"C = {C}: {len(part)} classifiers, relative gap median {np.median(gaps):.2%}, largest {gaps.max():.2%} "
            f"(stopped: {by_cause}); CPU certificate / local search median {np.median(ratios):.1f}x, "
            f"largest {ratios.max():.1f}x")


if __name__ == "__main__":
    raise SystemExit(main())
