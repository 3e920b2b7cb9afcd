"""Evidence for the worst-case extrinsic measures: d_worst over L-BFGS random-label probes beside the
paper-style d_worst and the searched d_worst_search, on the demo's data and on real GLUE data.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.worst_case_evidence [--glue-dir DIR] [--quick]

Settings (each an "encoder family" at one layer, every ordered pair measured):

* ``demo``: the demo study's encoders (all-MiniLM-L6-v2 and its SVD truncations to 80/60/40/20 %,
  a random affine image and a noisy copy, as ``config/config.yaml``) on the demo's synthetic
  sentiment task (2,000 fit examples), layer 6;
* ``rte``, ``mrpc``: the same seven encoders on the GLUE training sets ``<glue-dir>/RTE/train.tsv``
  (N = 2,490) and ``<glue-dir>/MRPC/train.tsv`` (N = 3,668), layer 6 (skipped with a message when
  the folder is missing);
* ``rte_layers``: MiniLM's layers 1..6 as six encoders on RTE (30 pairs: six genuinely different
  representations);
* ``real_models_rte``: three real encoders (paraphrase-MiniLM-L3-v2, all-MiniLM-L6-v2,
  all-mpnet-base-v2) and their SVD truncations to half rank, last layer, on RTE (first 2,000), read
  from a run of ``config/real_models.yaml`` (``--real-models``, default ``results/real_models``;
  skipped with a message when its embeddings are missing).

For each: d_aff (tol 1e-2, the demo's), task probes (the workflow's defaults) and ``--n-random``
random-label probes per encoder fitted two ways: **lbfgs** (the task probe's model and chosen L2
penalty, 100 L-BFGS iterations: ``random_probes.method: lbfgs``) and **paper** (the paper's SGD
protocol, the default). Printed: the probes' sharpness (training accuracy on their random labels, spectral
norms) and, on the first GLUE setting, a check of our multi-head SGD against a one-classifier-at-a-
time re-implementation of the paper's protocol (``nn.Linear`` + ``torch.optim.SGD``); then for
the lbfgs d_worst, the paper-style d_worst and d_worst_search: the share of pairs whose worst
classifier is the task probe, the medians of d_worst / d_psi and d_worst_search / d_worst, Table 1's
rows (Spearman rho and Pearson r of each intrinsic measure with each extrinsic one, Mantel
permutation p of rho; all K! permutations are enumerated) and CPU seconds (``time.process_time``,
all threads) per pair and per pair and random classifier. Threads: torch's default (printed); the
machine may be shared, so the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, add_glue_dir, cached_array, minilm_encoder, say

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402
from scipy import stats as sps  # noqa: E402

from affine_homotopy.core import stats  # noqa: E402
from affine_homotopy.models.derived import derive  # noqa: E402
from affine_homotopy.models.encoders import embed_texts  # noqa: E402
from affine_homotopy.core.extrinsic import ExtrinsicSettings, extrinsic_distances, worst_case_summary  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.probes import (  # noqa: E402
    fit_random_probes_sgd,
    fit_softmax_probe,
    fit_softmax_probes,
    random_labels,
)
from affine_homotopy.models.synthetic import make_sentiment_task  # noqa: E402
from affine_homotopy.models.task_data import read_glue_tsv  # noqa: E402

# the demo's derived encoders (config/config.yaml)
DERIVED = {
    "svd80": {"source": "derived", "transform": "svd_truncate", "fraction": 0.8},
    "svd60": {"source": "derived", "transform": "svd_truncate", "fraction": 0.6},
    "svd40": {"source": "derived", "transform": "svd_truncate", "fraction": 0.4},
    "svd20": {"source": "derived", "transform": "svd_truncate", "fraction": 0.2},
    "affine": {"source": "derived", "transform": "random_affine", "seed": 0, "condition_number": 4.0},
    "noise": {"source": "derived", "transform": "gaussian_noise", "sigma": 0.1, "seed": 0},
}
INTRINSIC = ("d_aff", "procrustes", "cca_r2", "pwcca", "cka")  # the paper's Table 1 columns
LBFGS_ITERATIONS = 100  # probe.random_max_iter of the lbfgs random probes


def cpu_clock() -> float:
    return time.process_time()


def minilm_layers(name: str, texts_a: list[str], texts_b: list[str] | None, layers: list[int]) -> np.ndarray:
    """(len(layers), N, 384) MiniLM mean-pooled representations, cached under /tmp."""
    file = f"evidence_{name}_{len(texts_a)}_{'-'.join(map(str, layers))}.npy"

    def embed() -> np.ndarray:
        start = time.perf_counter()
        array = embed_texts(minilm_encoder("minilm"), texts_a, texts_b, layers)
        say(f"  embedded {len(texts_a)} examples of {name} in {time.perf_counter() - start:.0f} s (cached as {file})")
        return array

    return cached_array(file, embed)[0]


def derived_family(base: np.ndarray) -> tuple[list[str], list[np.ndarray]]:
    """MiniLM at one layer and the demo's six derived encoders of it."""
    names, reps = ["minilm"], [base.astype(np.float64)]
    for name, spec in DERIVED.items():
        train, _, _ = derive(spec, base[None], base[None, :2], [6])
        names.append(f"minilm_{name}")
        reps.append(train[0].astype(np.float64))
    return names, reps


REAL_MODELS = ("minilm_l3", "minilm_l6", "mpnet", "minilm_l3_svd50", "minilm_l6_svd50", "mpnet_svd50")


def real_models_setting(results: Path) -> tuple[str, list[str], list[np.ndarray], np.ndarray] | None:
    """RTE at each model's last layer from a run of config/real_models.yaml, or None when absent."""
    import pandas as pd

    from affine_homotopy.jobs.io import read_embeddings

    paths = [results / "embeddings" / name / "rte" / "train.npy" for name in REAL_MODELS]
    table = results / "data" / "rte" / "train.parquet"
    if not table.exists() or not all(path.exists() for path in paths):
        say(f"SKIP real_models_rte: no embeddings of {', '.join(REAL_MODELS)} under {results} "
            "(run config/real_models.yaml first, or pass --real-models)")
        return None
    reps = [read_embeddings(path, "depth1.00").astype(np.float64) for path in paths]
    return "real_models_rte", list(REAL_MODELS), reps, pd.read_parquet(table)["label"].to_numpy().copy()


def settings_to_run(glue_dir: Path, quick: bool) -> list[tuple[str, list[str], list[np.ndarray], np.ndarray]]:
    cap = 600 if quick else None
    out = []
    train, _ = make_sentiment_task(seed=0, n_train=600 if quick else 2000, n_dev=10)
    base = minilm_layers("demo_sentiment", train["text_a"].tolist(), None, [6])[0]
    out.append(("demo", *derived_family(base), train["label"].to_numpy().copy()))
    for task, folder in (("rte", "RTE"), ("mrpc", "MRPC")):
        path = glue_dir / folder / "train.tsv"
        if not path.exists():
            say(f"SKIP {task}: {path} is missing (pass --glue-dir)")
            continue
        frame = read_glue_tsv(path, task)
        frame = frame if cap is None else frame.iloc[:cap]
        layers = [1, 2, 3, 4, 5, 6] if task == "rte" else [6]
        array = minilm_layers(task, frame["text_a"].tolist(), frame["text_b"].tolist(), layers)
        out.append((task, *derived_family(array[-1]), frame["label"].to_numpy().copy()))
        if task == "rte" and not quick:
            out.append(("rte_layers", [f"L{layer}" for layer in layers], [a.astype(np.float64) for a in array],
                        frame["label"].to_numpy().copy()))
    return out


def paper_protocol_check(rep: np.ndarray, labels: np.ndarray, seeds: int = 3) -> None:
    """Our multi-head SGD against one nn.Linear + torch.optim.SGD run per classifier and learning rate."""
    from benchmarks.extrinsic_benchmark import sgd_probe  # the benchmark's re-implementation of the paper's loop

    Y = random_labels(len(labels), 2, range(seeds))
    ours = fit_random_probes_sgd(rep, Y, 2)
    X = torch.as_tensor(rep, dtype=torch.float32)
    for seed in range(seeds):
        layer = sgd_probe(X, torch.as_tensor(Y[:, seed]), 2)
        weight, bias = layer.weight.detach().numpy().T.astype(np.float64), layer.bias.detach().numpy()
        theirs_accuracy = float(((rep @ weight + bias).argmax(1) == Y[:, seed]).mean())
        say(f"  paper protocol check, seed {seed}: train accuracy ours {ours.train_accuracy(rep, Y)[seed]:.4f} / "
            f"theirs {theirs_accuracy:.4f}; ||W||_2 ours {ours.norms()[seed]:.4f} / theirs "
            f"{np.linalg.norm(weight, 2):.4f}; max |W_ours - W_theirs| {np.abs(ours.weight[seed] - weight).max():.1e}")


def table_rows(intrinsic: dict[str, np.ndarray], extrinsic: dict[str, np.ndarray]) -> list[str]:
    """Spearman rho (Mantel p) and Pearson r of every intrinsic with every extrinsic measure."""
    lines = [f"  {'extrinsic':<17}{'stat':<6}" + "".join(f"{m:>18}" for m in INTRINSIC)]
    for name, y in extrinsic.items():
        rhos, rs = [], []
        for measure in INTRINSIC:
            x = intrinsic[measure]
            xs, ys = stats.off_diagonal(x), stats.off_diagonal(y)
            p = stats.mantel(x, y, "spearman", 10_000, 0).p_value
            rhos.append(f"{sps.spearmanr(xs, ys)[0]:.3f}{'*' if p < 0.05 else ' '} (p {p:.3f})")
            rs.append(f"{sps.pearsonr(xs, ys)[0]:.3f}")
        lines.append(f"  {name:<17}{'rho':<6}" + "".join(f"{c:>18}" for c in rhos))
        lines.append(f"  {'':<17}{'r':<6}" + "".join(f"{c:>18}" for c in rs))
    return lines


def run_setting(name: str, names: list[str], reps: list[np.ndarray], labels: np.ndarray, n_random: int,
                check_protocol: bool) -> dict[str, object]:
    n, count = len(labels), len(reps)
    pairs = count * (count - 1)
    n_classes = int(labels.max()) + 1
    say(f"\n=== {name}: K = {count} encoders ({', '.join(names)}), N = {n}, D = {reps[0].shape[1]}, "
        f"{pairs} ordered pairs, {n_random} random classifiers per encoder")
    start = cpu_clock()
    intrinsic = pairwise_intrinsic(reps, names, IntrinsicSettings(tol=1e-2, max_iter=100, keep_weights=True,
                                                               measures=INTRINSIC))
    say(f"  intrinsic (d_aff tol 1e-2 + baselines): {cpu_clock() - start:.0f} s CPU")
    d_aff = intrinsic.matrices["d_aff"]
    probes = [fit_softmax_probe(r, labels, n_classes) for r in reps]
    Y = random_labels(n, n_classes, range(n_random))
    start = cpu_clock()
    lbfgs = [fit_softmax_probes(r, Y, n_classes, p.l2, LBFGS_ITERATIONS) for r, p in zip(reps, probes)]
    lbfgs_cpu = cpu_clock() - start
    start = cpu_clock()
    paper = [fit_random_probes_sgd(r, Y, n_classes) for r in reps]
    paper_cpu = cpu_clock() - start
    say(f"  task probes: l2 {[p.l2 for p in probes]}, ||W||_2 median {np.median([np.linalg.norm(p.weight, 2) for p in probes]):.2f}")
    for label, fitted, cpu in (("lbfgs (task l2)", lbfgs, lbfgs_cpu), ("paper (SGD)", paper, paper_cpu)):
        accuracy = np.concatenate([f.train_accuracy(r, Y) for f, r in zip(fitted, reps)])
        norms = np.concatenate([f.norms() for f in fitted])
        say(f"  random probes {label:<24}: train accuracy mean {accuracy.mean():.3f} [{accuracy.min():.3f}, "
            f"{accuracy.max():.3f}], ||W||_2 median {np.median(norms):.2f} [{norms.min():.2f}, {norms.max():.2f}]; "
            f"fit {cpu / count:.1f} s CPU per encoder")
    if check_protocol:
        paper_protocol_check(reps[0], labels)

    no_search = ExtrinsicSettings(search_steps=0, search_candidates=0)
    old = extrinsic_distances(reps, probes, names, intrinsic.weights, lbfgs, no_search, d_aff)
    new = extrinsic_distances(reps, probes, names, intrinsic.weights, paper, ExtrinsicSettings(), d_aff)
    for result in (old, new):
        assert result.bounds.violations.sum() == 0, "a classifier broke its Lemma 5.2 bound"
        values = result.values
        assert np.all(values.d_psi <= values.d_worst) and np.all(values.d_worst <= values.d_worst_search)
    off = ~np.eye(count, dtype=bool)
    record: dict[str, object] = {"setting": name, "K": count, "N": n, "n_random": n_random}
    say(f"  {'':<28}{'task probe worst':>17}{'med d_worst/d_psi':>19}{'med search/d_worst':>20}{'improved':>10}")
    for label, result, searched in (("lbfgs d_worst", old, False), ("paper-style d_worst", new, False),
                                    ("d_worst_search", new, True)):
        summary = worst_case_summary(result.values.d_psi, result.values.d_worst, result.values.d_worst_search,
                                     result.bounds.worst, result.worst_case.classifier < 0)
        if searched:
            say(f"  {label:<28}{summary['task_probe_worst_share_after_search']:>17.2f}{'':>19}"
                f"{summary['d_worst_search_over_d_worst_median']:>20.3f}{summary['d_worst_search_improved_pairs']:>10d}")
        else:
            say(f"  {label:<28}{summary['task_probe_worst_share']:>17.2f}{summary['d_worst_over_d_psi_median']:>19.3f}")
        record[label] = summary
    say(f"  medians: d_psi {np.median(new.values.d_psi[off]):.4f}, "
        f"lbfgs d_worst {np.median(old.values.d_worst[off]):.4f}, "
        f"paper-style d_worst {np.median(new.values.d_worst[off]):.4f}, "
        f"d_worst_search {np.median(new.values.d_worst_search[off]):.4f}, "
        f"bound_worst {np.median(new.bounds.worst[off]):.3f} (radius median {np.median(new.worst_case.radius):.2f})")
    say("  Table 1 rows (Spearman rho, * Mantel p < 0.05; Pearson r):")
    for line in table_rows(intrinsic.matrices, {"d_psi": new.values.d_psi, "d_worst (lbfgs)": old.values.d_worst,
                                                "d_worst (paper)": new.values.d_worst, "d_worst_search": new.values.d_worst_search}):
        say(line)
    s_old, s_new = old.seconds, new.seconds
    cost = {
        "d_psi_cpu_per_pair": s_new["cpu_d_psi"] / pairs,
        "d_worst_cpu_per_pair_per_classifier_lbfgs": s_old["cpu_d_worst"] / (pairs * n_random),
        "d_worst_cpu_per_pair_per_classifier_paper": s_new["cpu_d_worst"] / (pairs * n_random),
        "d_worst_search_cpu_per_pair": s_new["cpu_d_worst_search"] / pairs,
        "random_probe_fit_cpu_per_encoder_per_classifier_lbfgs": lbfgs_cpu / (count * n_random),
        "random_probe_fit_cpu_per_encoder_per_classifier_paper": paper_cpu / (count * n_random),
    }
    say(f"  CPU per pair: d_psi {cost['d_psi_cpu_per_pair']:.2f} s; d_worst {s_old['cpu_d_worst'] / pairs:.2f} s "
        f"(lbfgs probes) / {s_new['cpu_d_worst'] / pairs:.2f} s (paper's), i.e. "
        f"{1e3 * cost['d_worst_cpu_per_pair_per_classifier_lbfgs']:.1f} / "
        f"{1e3 * cost['d_worst_cpu_per_pair_per_classifier_paper']:.1f} ms per pair per classifier; "
        f"d_worst_search {cost['d_worst_search_cpu_per_pair']:.2f} s "
        f"({cost['d_worst_search_cpu_per_pair'] / max(s_new['cpu_d_worst'] / pairs, 1e-12):.2f}x paper-style d_worst)")
    say(f"  random-probe fits: {1e3 * cost['random_probe_fit_cpu_per_encoder_per_classifier_lbfgs']:.1f} ms (lbfgs) / "
        f"{1e3 * cost['random_probe_fit_cpu_per_encoder_per_classifier_paper']:.1f} ms (paper) CPU per encoder per classifier")
    record["cost"] = cost
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "RTE/ and MRPC/ train.tsv")
    parser.add_argument("--n-random", type=int, default=20, help="random classifiers per encoder (paper: 100)")
    parser.add_argument("--quick", action="store_true", help="600 examples, 4 random classifiers (smoke test)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these settings (demo, rte, mrpc, rte_layers)")
    parser.add_argument("--real-models", type=Path, default=REPO / "results" / "real_models",
                        help="results folder of a config/real_models.yaml run (default: results/real_models)")
    parser.add_argument("--out", type=Path, default=None, help="also write every number as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n_random = 4 if args.quick else args.n_random
    say(f"load average {os.getloadavg()[0]:.2f}; torch threads {torch.get_num_threads()}; cores {os.cpu_count()}")
    records, checked = [], False
    settings = settings_to_run(args.glue_dir, args.quick)
    real = None if args.quick else real_models_setting(args.real_models)
    for name, names, reps, labels in settings + ([real] if real else []):
        if args.only is not None and name not in args.only:
            continue
        records.append(run_setting(name, names, reps, labels, n_random, check_protocol=name != "demo" and not checked))
        checked = checked or name != "demo"
    say(f"\nload average {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text(json.dumps(records, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
