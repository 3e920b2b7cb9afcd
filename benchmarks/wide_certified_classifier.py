"""The certified interval of one random-label classifier at D = 768, LP by LP: where its LPs go.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.wide_certified_classifier [--glue-dir DIR] [--n 2000] \\
        [--classifiers 5]

Data (as ``cost_model.py measure --wide-only``): all-MiniLM-L6-v2 (mean pooling) on the first N SST-2
training sentences; the source is layers 1 and 2 side by side (768 wide), the target layers 3 and 4.
The target's classifiers are the paper's SGD random-label probes (seeds 0-9, fitted on the target).
For each chosen classifier: :func:`affine_homotopy.core.extrinsic.binary.certify` from the
least-squares start in logit space, to ``tol`` 1e-3 without a dominance floor, one thread. Printed
per LP: CPU seconds, half-spaces in the working set, dual simplex iterations, the LP's ``s``, the
dual root and the end of its domain (``t_end``: where a used half-space disappears), and the largest
error of the LP's map on all rows; then the interval, the LPs and the CPU seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.common import add_glue_dir, load_text, say, sst2_training_set

import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy.special import expit  # noqa: E402

from affine_homotopy.core.extrinsic import binary  # noqa: E402
from affine_homotopy.core.linalg import factorise  # noqa: E402
from affine_homotopy.core.probes import fit_random_probes_sgd, random_labels  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--classifiers", type=int, nargs="+", default=[5], help="random-label probe seeds (0-9)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    embedded, _ = sst2_training_set(args.glue_dir)
    n = args.n
    source = np.concatenate([embedded[0][:n], embedded[1][:n]], axis=1)
    target_rep = np.concatenate([embedded[2][:n], embedded[3][:n]], axis=1).astype(np.float64)
    randoms = fit_random_probes_sgd(target_rep, random_labels(n, 2, range(10)), 2)
    design = factorise(torch.as_tensor(source, dtype=torch.float64)).affine_design().numpy()
    say(f"source {source.shape}, design {design.shape}; one thread; {load_text()}")
    for k in args.classifiers:
        logits = target_rep @ np.asarray(randoms.weight[k]) + np.asarray(randoms.bias[k])
        gap = logits[:, 0] - logits[:, 1]
        target = binary.BinaryTarget(expit(gap), expit(-gap))
        start = np.linalg.lstsq(design, np.clip(gap, -30, 30), rcond=None)[0]
        lp = binary.ChebyshevLP(design, f"random classifier {k}")
        solve = lp.solve

        def traced(lp=lp, solve=solve, target=target):
            tick = time.process_time()
            w, s, y = solve()
            root, t_end = binary.dual_root(y, lp.hi_side, target, lp.rows)
            say(f"  LP {lp.lps}: {time.process_time() - tick:6.1f} CPU s, {lp.rows.size} half-spaces, "
                f"{lp.solver.getInfo().simplex_iteration_count} iterations, s {s:.4g}, root {root:.6f}, "
                f"t_end {t_end:.6f}, largest error {target.errors(design @ w).max():.6f}")
            return w, s, y

        lp.solve = traced
        tick = time.process_time()
        result = binary.certify(lp, target, [start], 1e-3, 1e-6, 100)
        say(f"classifier {k}: d in [{result.lower:.6f}, {result.upper:.6f}], stop {result.stop}, {result.lps} LPs, "
            f"{time.process_time() - tick:.1f} CPU s ({load_text()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
