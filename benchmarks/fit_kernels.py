"""The minimax solver's per-fit kernels in their earlier and today's forms, side by side on the demo's d_aff.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.fit_kernels [--embeddings results/demo/embeddings] [--repeats 2]

For every task x layer of a finished demo (``config/config.yaml``; ``--embeddings``: its embeddings
folder), ``pairwise_intrinsic`` solves ``d_aff`` on all 42 ordered pairs of its 7 encoders (one torch
thread, the config's tol) twice per repeat, alternating between two forms of the two kernels of each
weighted fit:

* **earlier**: the leverages ``k_n = ||L^-1 x_n||^2`` by a triangular solve with every row as a
  right-hand side, and each fit's squared residuals from the materialised (B, N, q) residual array;
* **today**: ``WeightedLeastSquares.leverages`` (the inverted factor times the rows, in blocks) and
  ``residual_norms(..., squared=True)`` (blocks of rows into one buffer).

The leverages only scale the jacobi solver's steps, so the two may take different paths: the script
prints the CPU seconds of each, their ratio, the fits of each and whether every pair's certified
intervals overlap.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from benchmarks.common import REPO, load_text, say

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402
import yaml  # noqa: E402

from affine_homotopy.core import linalg, minimax  # noqa: E402
from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.jobs.io import read_embeddings  # noqa: E402
from affine_homotopy.study.layers import layer_label  # noqa: E402


def triangular_solve_leverages(self: linalg.WeightedLeastSquares, select: torch.Tensor | None = None) -> torch.Tensor:
    """The leverages by one triangular solve with every row of the design as a right-hand side."""
    factor = self.factor if select is None else self.factor[select]
    solved = torch.linalg.solve_triangular(factor, self.design.T.expand(factor.shape[0], -1, -1), upper=False)
    return (solved * solved).sum(dim=1)


def materialised_residual_norms(design: torch.Tensor, targets: torch.Tensor, coef: torch.Tensor,
                                squared: bool = False) -> torch.Tensor:
    """The squared residuals as the solver's fits computed them before (the whole residual array at once);
    the unsquared passes as today."""
    if not squared:
        return linalg.residual_norms(design, targets, coef)
    residual = targets - design @ coef
    return (residual * residual).sum(dim=-1)


EARLIER = {"leverages": triangular_solve_leverages, "residual_norms": materialised_residual_norms}
TODAY = {"leverages": linalg.WeightedLeastSquares.leverages, "residual_norms": linalg.residual_norms}


def use(form: dict) -> None:
    linalg.WeightedLeastSquares.leverages = form["leverages"]
    minimax.residual_norms = form["residual_norms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embeddings", type=Path, default=REPO / "results" / "demo" / "embeddings")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    names = list(config["encoders"])
    if not args.embeddings.is_dir():
        raise SystemExit(f"{args.embeddings} is missing: run the demo first (snakemake --cores 2), or pass "
                         "--embeddings FOLDER of a finished demo")
    torch.set_num_threads(1)
    settings = IntrinsicSettings(measures=("d_aff",), tol=config["intrinsic"]["tol"])
    forms = {"earlier": EARLIER, "today": TODAY}
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores, 1 torch thread, torch {torch.__version__}, "
        f"{load_text()}; data: {args.embeddings} ({len(names)} encoders, d_aff on 42 ordered pairs, tol "
        f"{settings.tol:g}); {args.repeats} repeats, the two forms alternating")
    totals = dict.fromkeys(forms, 0.0)
    say(f"{'task':<12} {'layer':<7} | {'earlier: CPU s':>14} {'fits':>5} | {'today: CPU s':>12} {'fits':>5} | "
        f"{'ratio':>5} overlap")
    for task in config["tasks"]:
        for layer in config["layers"]:
            label = layer_label(layer)
            reps = [read_embeddings(args.embeddings / name / task / "train.npy", label) for name in names]
            seconds = dict.fromkeys(forms, 0.0)
            results = {}
            for _ in range(args.repeats):
                for form, kernels in forms.items():
                    use(kernels)
                    tick = time.process_time()
                    results[form] = pairwise_intrinsic(reps, names, settings)
                    seconds[form] += time.process_time() - tick
            use(TODAY)
            old, new = (results[form] for form in forms)
            off = ~np.eye(len(names), dtype=bool)
            overlap = bool(np.all(np.maximum(old.matrices["d_aff_lower"], new.matrices["d_aff_lower"])[off]
                                  <= np.minimum(old.matrices["d_aff"], new.matrices["d_aff"])[off] * (1 + 1e-12)))
            for form in forms:
                totals[form] += seconds[form]
            say(f"{task:<12} {label:<7} | {seconds['earlier'] / args.repeats:14.2f} {int(old.iterations[off].sum()):5d} | "
                f"{seconds['today'] / args.repeats:12.2f} {int(new.iterations[off].sum()):5d} | "
                f"{seconds['earlier'] / seconds['today']:5.2f} {overlap}")
    say(f"all: earlier {totals['earlier'] / args.repeats:.1f} CPU s, today {totals['today'] / args.repeats:.1f} CPU s: "
        f"{totals['earlier'] / totals['today']:.2f}x; {load_text()}")


if __name__ == "__main__":
    main()
