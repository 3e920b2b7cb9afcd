"""Task-probe fit: scipy's L-BFGS-B (the package's ``fit_softmax_probe``) against PyTorch's L-BFGS
(``_lbfgs_logistic``), side by side in one process on the same standardised features and the same l2 grid.

For each encoder, layer and grid value it fits both, then prints the CPU-time ratio (PyTorch /
scipy), each fit's iterations, the objective gap, and whether the hold-out accuracy (which picks l2)
agrees. Input: a finished run's embeddings and labels (``--run results/demo``: every model or
derived encoder of one task there), else a synthetic stand-in of the demo's size.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.probe_fit --run results/demo --task sentiment
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.probe_fit            # synthetic, N = 2,000, D = 384

``--stability`` instead fits each task probe (``fit_softmax_probe``, the whole grid and refit) three
ways: as it is, with the embeddings multiplied by ``1 + 1e-7 eps`` (eps standard normal, seed 0),
and with 2 BLAS threads instead of 1; it prints whether the chosen l2 agrees, the largest change
of the probe's class probabilities on the training rows, whether the columns left at weight 0 (those at
the rounding level, ``probes._standardise``) are the same three ways, and how far from the threshold
that choice is: the largest such column's centred norm and the smallest other one's, over the threshold.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

from benchmarks.common import cpu_seconds

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from affine_homotopy.core.probes import (  # noqa: E402
    _lbfgs_logistic, _lbfgs_softmax, _standardise, column_spread, fit_softmax_probe,
)
from affine_homotopy.jobs.io import read_embeddings, read_json  # noqa: E402

GRID = (1e-4, 1e-3, 1e-2, 1e-1)


def objective(Z: np.ndarray, y: np.ndarray, weight: np.ndarray, bias: np.ndarray, l2: float) -> float:
    logits = Z @ weight + bias
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(y)), y].mean() + 0.5 * l2 * (weight**2).sum())


def problems(args: argparse.Namespace):
    if args.run is None:
        rng = np.random.default_rng(0)
        direction = rng.standard_normal(384)
        X = rng.standard_normal((2000, 384)) @ np.diag(rng.uniform(0.1, 2.0, 384))
        y = (X @ direction + 3.0 * rng.standard_normal(2000) > 0).astype(np.int64)
        yield "synthetic", "-", X, y
        return
    run = Path(args.run)
    y = pd.read_parquet(run / "data" / args.task / "train.parquet")["label"].to_numpy().astype(np.int64)
    for folder in sorted((run / "embeddings").iterdir()):
        path = folder / args.task / "train.npy"
        if not path.exists():
            continue
        for layer in read_json(path.with_suffix(".json"))["layers"][: args.layers]:
            yield folder.name, layer, read_embeddings(path, layer).astype(np.float64), y


def stability(args: argparse.Namespace) -> None:
    from threadpoolctl import threadpool_limits

    jitter_rng = np.random.default_rng(0)
    worst = {"jitter": 0.0, "threads": 0.0}
    flips = {"jitter": 0, "threads": 0}
    fits = 0
    margins = {"dropped": 0.0, "kept": np.inf}
    column_flips = 0
    print(f"{'encoder':<16}{'layer':<8}{'l2':>8}{'jitter: l2, max |dp|':>24}{'2 threads: l2, max |dp|':>27}"
          f"{'zero cols':>10}{'largest zeroed / cut':>22}{'smallest kept / cut':>21}")
    for encoder, layer, X, y in problems(args):
        n_classes = int(y.max()) + 1
        with threadpool_limits(1):
            base = fit_softmax_probe(X, y, n_classes, GRID, args.validation_fraction, args.max_iter)
            jittered_X = X * (1 + 1e-7 * jitter_rng.standard_normal(X.shape))
            jittered = fit_softmax_probe(jittered_X, y, n_classes, GRID, args.validation_fraction, args.max_iter)
        with threadpool_limits(2):
            threaded = fit_softmax_probe(X, y, n_classes, GRID, args.validation_fraction, args.max_iter)
        reference = base.predict_proba(X)
        cells = []
        for name, other in (("jitter", jittered), ("threads", threaded)):
            change = float(np.abs(other.predict_proba(X) - reference).max())
            worst[name] = max(worst[name], change)
            flips[name] += other.l2 != base.l2
            cells.append(f"{other.l2:g}, {change:.1e}")
        _, std, cutoff = column_spread(X)
        relative = std * np.sqrt(X.shape[0]) / cutoff
        zeroed = (base.weight == 0).all(axis=1)
        column_flips += sum(int(((other.weight == 0).all(axis=1) != zeroed).sum()) for other in (jittered, threaded))
        largest_zeroed = float(relative[zeroed].max()) if zeroed.any() else 0.0
        smallest_kept = float(relative[~zeroed].min()) if (~zeroed).any() else np.inf
        margins["dropped"] = max(margins["dropped"], largest_zeroed)
        margins["kept"] = min(margins["kept"], smallest_kept)
        fits += 1
        print(f"{encoder:<16}{layer:<8}{base.l2:>8g}{cells[0]:>24}{cells[1]:>27}{int(zeroed.sum()):>10}"
              f"{largest_zeroed:>22.1e}{smallest_kept:>21.1e}")
    print(f"\n{fits} task probes: chosen l2 differs under jitter on {flips['jitter']}, under 2 threads on "
          f"{flips['threads']}; largest change of a class probability {worst['jitter']:.1e} (jitter), "
          f"{worst['threads']:.1e} (2 threads)")
    print(f"columns at weight 0 that differ from the plain fit's (jitter and 2 threads together): {column_flips}; "
          f"centred norms over the threshold: zeroed columns at most {margins['dropped']:.1e}, the others at least "
          f"{margins['kept']:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a finished run's results folder (default: synthetic data)")
    parser.add_argument("--task", default="sentiment")
    parser.add_argument("--layers", type=int, default=3, help="the first LAYERS layers of each encoder")
    parser.add_argument("--max-iter", type=int, default=500)
    parser.add_argument("--validation-fraction", type=float, default=0.2)
    parser.add_argument("--stability", action="store_true", help="the task probe under jitter and 2 threads")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.stability:
        stability(args)
        return
    print(f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}; "
          f"1 torch thread, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"load average {os.getloadavg()[0]:.2f}; max_iter {args.max_iter}, grid {GRID}")
    totals = {"torch": 0.0, "scipy": 0.0}
    worst_gap, disagreements, fits = 0.0, 0, 0
    print(f"{'encoder':<16}{'layer':<8}{'l2':>8}{'N':>6}{'D':>5}{'torch s':>9}{'scipy s':>9}{'ratio':>7}"
          f"{'it torch':>9}{'it scipy':>9}{'objective gap':>15}{'hold-out acc':>15}")
    for encoder, layer, X, y in problems(args):
        n_classes = int(y.max()) + 1
        order = np.random.default_rng(0).permutation(len(y))
        n_val = max(1, int(round(args.validation_fraction * len(y))))
        val, fit = order[:n_val], order[n_val:]
        mean, std = _standardise(X[fit])
        Z_fit, Z_val = (X[fit] - mean) / std, (X[val] - mean) / std
        for l2 in GRID:
            (w_t, b_t, it_t), t_torch = cpu_seconds(lambda: _lbfgs_logistic(
                torch.from_numpy(Z_fit), torch.from_numpy(y[fit]), n_classes, l2, args.max_iter))
            (w_s, b_s, it_s), t_scipy = cpu_seconds(
                lambda: _lbfgs_softmax(Z_fit, y[fit], n_classes, l2, args.max_iter))
            w_t, b_t = w_t.numpy(), b_t.numpy()
            gap = objective(Z_fit, y[fit], w_s, b_s, l2) - objective(Z_fit, y[fit], w_t, b_t, l2)
            acc_t = float(((Z_val @ w_t + b_t).argmax(1) == y[val]).mean())
            acc_s = float(((Z_val @ w_s + b_s).argmax(1) == y[val]).mean())
            totals["torch"] += t_torch
            totals["scipy"] += t_scipy
            worst_gap = max(worst_gap, abs(gap))
            disagreements += acc_t != acc_s
            fits += 1
            print(f"{encoder:<16}{layer:<8}{l2:>8g}{len(fit):>6}{X.shape[1]:>5}{t_torch:>9.2f}{t_scipy:>9.2f}"
                  f"{t_torch / t_scipy:>7.2f}{it_t:>9}{it_s:>9}{gap:>15.2e}{acc_t:>7.4f}/{acc_s:.4f}")
    print(f"\n{fits} fits: PyTorch L-BFGS {totals['torch']:.1f} CPU s, scipy L-BFGS-B {totals['scipy']:.1f} "
          f"CPU s: ratio {totals['torch'] / totals['scipy']:.2f}x; largest |objective gap| {worst_gap:.1e} "
          f"(scipy minus PyTorch); hold-out accuracy differs on {disagreements} of {fits} fits")


if __name__ == "__main__":
    main()
