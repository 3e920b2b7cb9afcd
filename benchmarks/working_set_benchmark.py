"""The working-set minimax solver on real SST-2 embeddings: support shares, fits against N, ratio to Lawson.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.working_set_benchmark support [--sizes 20000 67349]
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.working_set_benchmark ratio [--n 20000] [--pairs 2]
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.working_set_benchmark growth [--sizes 2000 8000 20000 67349]

Data: the cost model's real pairs (:mod:`benchmarks.cost_model`): all-MiniLM-L6-v2 mean-pooled
embeddings of the SST-2 training sentences (``<glue-dir>/SST-2/train.tsv``), layers 4, 5 and 6 as
"encoders", the first N rows; embeddings cached under /tmp (:func:`benchmarks.common.sst2_training_set`).
Each pair is factorised (the rank rule) and solved by ``minimax_fit`` exactly as the engine does
(affine design ``[Q, 1/sqrt(N)]``, target ``Q diag(s)``, float32 floor, tol 1e-3), one torch thread.

``support``
    The jacobi solver on every row (no working set): the share of rows with weight > 0 at the end
    and the share with residual >= (1 - tol) * upper. A working set pays when these are small.
``ratio``
    Lawson (every row), jacobi on every row, and jacobi with the working set, one after the other on
    each pair in the same run: CPU seconds (``time.process_time``), weighted fits, rounds, the
    certified intervals (checked to overlap) and the ratios Lawson / working set and jacobi / working set.
``growth``
    Weighted fits and working-set rounds of the default solver against N (the question: do they
    stop growing with N?).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from benchmarks.common import add_glue_dir, say, sst2_training_set

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core import minimax  # noqa: E402
from affine_homotopy.core.linalg import factorise, float32_floor  # noqa: E402

TOL = 1e-3
PAIRS = [(3, 4), (5, 3), (4, 5), (3, 5), (5, 4), (4, 3)]  # layers 4, 5, 6 (0-based indices): 6 ordered pairs


def embeddings(glue_dir: Path) -> np.ndarray:
    return sst2_training_set(glue_dir)[0]


def problem(embedded: np.ndarray, pair: tuple[int, int], n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    fx, fy = factorise(embedded[pair[0]][:n]), factorise(embedded[pair[1]][:n])
    atol = torch.tensor([float32_floor(fy.row_norm_max)], dtype=torch.float64)
    return fx.affine_design(), (fy.Q * fy.s)[None], atol


def solve(design, target, atol, solver: str, working_set: bool) -> tuple[minimax.MinimaxResult, float]:
    tick = time.process_time()
    result = minimax.minimax_fit(design, target, atol, TOL, 5000, solver=solver, orthonormal=True,
                                 working_set=working_set)
    return result, time.process_time() - tick


def header(args: argparse.Namespace) -> None:
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), 1 torch thread, "
        f"torch {torch.__version__}, load {os.getloadavg()[0]:.2f}; data: all-MiniLM-L6-v2 mean-pooled SST-2 "
        f"training sentences, layers 4-6 as encoders, first N rows; tol {TOL:g}, float64")


def support(args: argparse.Namespace) -> None:
    embedded = embeddings(Path(args.glue_dir))
    header(args)
    for n in args.sizes:
        for pair in PAIRS[: args.pairs]:
            design, target, atol = problem(embedded, pair, n)
            result, seconds = solve(design, target, atol, "jacobi", False)
            residual = torch.linalg.vector_norm(target[0] - design @ result.coef[0], dim=1)
            upper = float(result.upper[0])
            carrying = float((result.weights[0] > 0).double().mean())
            near = float((residual >= (1 - TOL) * upper).double().mean())
            say(f"N = {n:6d}  L{pair[0] + 1} -> L{pair[1] + 1}: rows with weight > 0 {100 * carrying:5.1f} %, with "
                f"residual >= (1 - tol) upper {100 * near:5.1f} %  ({int(result.iterations[0])} fits on all rows, "
                f"{seconds:.1f} s)")


def ratio(args: argparse.Namespace) -> None:
    embedded = embeddings(Path(args.glue_dir))
    header(args)
    say(f"N = {args.n}: Lawson (all rows) | jacobi (all rows) | jacobi + working set, one after the other per pair")
    totals = {"lawson": 0.0, "jacobi": 0.0, "working set": 0.0}
    for pair in PAIRS[: args.pairs]:
        design, target, atol = problem(embedded, pair, args.n)
        runs = {"lawson": solve(design, target, atol, "lawson", False),
                "jacobi": solve(design, target, atol, "jacobi", False),
                "working set": solve(design, target, atol, "jacobi", True)}
        lowers = [float(r.lower[0]) for r, _ in runs.values()]
        uppers = [float(r.upper[0]) for r, _ in runs.values()]
        overlap = max(lowers) <= min(uppers) * (1 + 1e-12)
        parts = []
        for name, (result, seconds) in runs.items():
            totals[name] += seconds
            rounds = f", {int(result.rounds[0])} rounds" if result.rounds is not None else ""
            parts.append(f"{name} {seconds:.1f} s ({int(result.iterations[0])} fits{rounds}, "
                         f"gap {float((result.upper - result.lower)[0] / result.upper[0]):.1e})")
        say(f"  L{pair[0] + 1} -> L{pair[1] + 1}: " + "; ".join(parts) + f"; intervals overlap: {overlap}")
        say(f"    Lawson / working set {runs['lawson'][1] / runs['working set'][1]:.1f}x, "
            f"jacobi / working set {runs['jacobi'][1] / runs['working set'][1]:.1f}x")
    say(f"total over {args.pairs} pairs: Lawson / working set = {totals['lawson'] / totals['working set']:.1f}x "
        f"(target 20x), jacobi / working set = {totals['jacobi'] / totals['working set']:.1f}x; "
        f"load at the end {os.getloadavg()[0]:.2f}")


def growth(args: argparse.Namespace) -> None:
    embedded = embeddings(Path(args.glue_dir))
    header(args)
    for n in args.sizes:
        fits, rounds, seconds = [], [], []
        for pair in PAIRS[: args.pairs]:
            design, target, atol = problem(embedded, pair, n)
            result, cpu = solve(design, target, atol, "jacobi", True)
            fits.append(int(result.iterations[0]))
            rounds.append(int(result.rounds[0]) if result.rounds is not None else 0)
            seconds.append(cpu)
        say(f"N = {n:6d}: fits {fits} (median {np.median(fits):.0f}), working-set rounds {rounds} (0: all rows at "
            f"once), {np.mean(seconds):.1f} CPU s per pair")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("support")
    one.add_argument("--sizes", type=int, nargs="+", default=[20000])
    one.add_argument("--pairs", type=int, default=3)
    two = sub.add_parser("ratio")
    two.add_argument("--n", type=int, default=20000)
    two.add_argument("--pairs", type=int, default=2)
    three = sub.add_parser("growth")
    three.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 20000])
    three.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    {"support": support, "ratio": ratio, "growth": growth}[args.command](args)


if __name__ == "__main__":
    main()
