"""d_aff's cost in data passes: the working-set solver against the solver of another commit, on real pairs.

Run from the repository root (2-core machine: keep OpenMP threads from spinning)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.daff_passes [--sizes 2000 20000 67349] [--baseline REV] \\
        [--stability] [--first-set] [--breakdown]

Data: SST-2's training sentences (``<glue-dir>/SST-2/train.tsv``, all 67,349, in file order; the first
N rows at each size) embedded with mean pooling by all-MiniLM-L6-v2 (layers 3 and 6) and
paraphrase-MiniLM-L3-v2 (``minilm_l3`` of config/real_models.yaml, layer 3), cached under /tmp
(:mod:`benchmarks.common`). The four ordered pairs of the cost question: MiniLM-L3 -> MiniLM-L6 and
back (last layers), and MiniLM-L6 layer 3 -> layer 6 and back. Each pair is factorised (the rank
rule) and solved exactly as the engine does (affine design ``[Q, 1/sqrt(N)]``, target ``Q diag(s)``,
float32 floor, tol 1e-3, jacobi, one torch thread).

A **data pass** is the CPU time of one residual pass over all N rows in float64 (``[X, 1] B - Y``
and its row norms, the unit a certificate cannot avoid: the upper bound is one such pass of the
final map), measured in the same process at each N. A pair's cost in passes is its solver CPU time
over that unit. Both solvers run one after the other on each pair (``--baseline``: the
``core/minimax.py`` of that git revision, loaded beside the current one; its intervals are checked
to overlap the current ones). The last lines are the goal table of the cost question
(d_aff passes per pair at N = 67,349: at most 8). ``--first-set`` then solves each pair again with a
known support joining its first working set (``working_set_fit``'s ``first_rows``): its own final support
(what no related problem can beat) and its reverse direction's. ``--breakdown`` solves each pair once
more with clocks on the working-set loop's parts and prints where its passes go: the loose rounds' and
the tight rounds' weighted fits (fits, rows), the float32 screens, the exact checks of a closing map in
the design's precision, and the rest (the least-squares fit that chooses the first set, and the loop's
bookkeeping).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, add_glue_dir, load_text, say, sst2_training_set, sst2_training_set_l3
from benchmarks.goals import record

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core import minimax  # noqa: E402
from affine_homotopy.core.linalg import factorise, float32_floor, residual_norms  # noqa: E402

TOL = 1e-3
MAX_ITER = 5000
DEFAULT_BASELINE = "393ec4f"  # the solver the cost question measured (26-92 passes at N = 67,349)
PAIRS = (("MiniLM-L3 L3", "MiniLM-L6 L6"), ("MiniLM-L6 L6", "MiniLM-L3 L3"),
         ("MiniLM-L6 L3", "MiniLM-L6 L6"), ("MiniLM-L6 L6", "MiniLM-L6 L3"))
GOAL_PASSES = 8
FULL_SET = 67349  # SST-2's training set


def _module_at(revision: str, path: str, name: str):
    """The module at ``path`` as it is at git ``revision``, imported beside the current package (its relative
    imports resolve against the current one)."""
    source = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "affine_homotopy.core"
    sys.modules[name] = module
    exec(compile(source, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def baseline_solver(revision: str):
    """``affine_homotopy.core.minimax`` as it is at git ``revision``, with the weighted least squares and
    residual passes of that revision's ``core/linalg.py``, imported beside the current modules."""
    linalg = _module_at(revision, "src/affine_homotopy/core/linalg.py", "affine_homotopy.core._linalg_baseline")
    module = _module_at(revision, "src/affine_homotopy/core/minimax.py", "affine_homotopy.core._minimax_baseline")
    for name in ("WeightedLeastSquares", "residual_norms", "weighted_fit"):
        if hasattr(linalg, name) and name in module.__dict__:
            module.__dict__[name] = getattr(linalg, name)
    return module


def encoders(glue_dir: Path) -> dict[str, np.ndarray]:
    l6 = sst2_training_set(glue_dir)[0]  # layers 1-6
    l3 = sst2_training_set_l3(glue_dir)  # layers 1-3
    return {"MiniLM-L6 L3": l6[2], "MiniLM-L6 L6": l6[5], "MiniLM-L3 L3": l3[2]}


def problem(source: np.ndarray, target: np.ndarray, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    fx, fy = factorise(source[:n]), factorise(target[:n])
    atol = torch.tensor([float32_floor(fy.row_norm_max)], dtype=torch.float64)
    return fx.affine_design(), (fy.Q * fy.s)[None], atol


def pass_seconds(design: torch.Tensor, target: torch.Tensor, repeats: int = 5) -> float:
    """CPU seconds of one residual pass ``design @ B - target`` and its row norms (the median of ``repeats``)."""
    coef = torch.randn(design.shape[1], target.shape[2], dtype=design.dtype)
    times = []
    for _ in range(repeats):
        tick = time.process_time()
        torch.linalg.vector_norm(target[0] - design @ coef, dim=1).max()
        times.append(time.process_time() - tick)
    return float(np.median(times))


def materialised_pass_seconds(design: torch.Tensor, target: torch.Tensor, repeats: int = 5) -> tuple[float, float]:
    """CPU seconds of one residual pass in the materialised form (the (N, q) residual matrix built, then its
    row norms) and in linalg.residual_norms' blocks, side by side on the same map (medians of ``repeats``)."""
    coef = torch.randn(design.shape[1], target.shape[2], dtype=design.dtype)
    times: dict[str, list[float]] = {"materialised": [], "blocked": []}
    for _ in range(repeats):
        for name, run in (("materialised", lambda: torch.linalg.vector_norm(target[0] - design @ coef, dim=1)),
                          ("blocked", lambda: residual_norms(design, target[0], coef))):
            tick = time.process_time()
            run()
            times[name].append(time.process_time() - tick)
    return float(np.median(times["materialised"])), float(np.median(times["blocked"]))


def fit_kernel_seconds(design: torch.Tensor, target: torch.Tensor, rows: int = 6000, repeats: int = 5
                       ) -> dict[str, tuple[float, float]]:
    """CPU seconds of the two per-fit kernels that changed, in the form they had before and in today's, side by
    side on the same float32 fit (the first ``rows`` rows, uniform weights; the working set's tight rounds
    iterate in float32 on about 5,000-7,000 rows at N = 67,349): the leverages by a triangular solve with
    every row as a right-hand side against ``WeightedLeastSquares.leverages`` (the inverted factor times the
    rows, in blocks), and the squared residuals of the materialised residual matrix against
    ``residual_norms(..., squared=True)``. Medians of ``repeats``; returns {kernel: (before, today)}."""
    from affine_homotopy.core.linalg import WeightedLeastSquares

    x, y = design[:rows].float(), target[0, :rows].float()
    fit = WeightedLeastSquares(x, torch.full((x.shape[0],), 1.0 / x.shape[0]))
    coef = fit.solve(y)
    forms = {"leverages": (lambda: (torch.linalg.solve_triangular(fit.factor[0], x.T, upper=False) ** 2).sum(0),
                           lambda: fit.leverages()[0]),
             "squared residuals": (lambda: ((y - x @ coef) ** 2).sum(1),
                                   lambda: residual_norms(x, y, coef, squared=True))}
    out = {}
    for name, (before, today) in forms.items():
        times: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(repeats):
            for slot, run in enumerate((before, today)):
                tick = time.process_time()
                run()
                times[slot].append(time.process_time() - tick)
        out[name] = (float(np.median(times[0])), float(np.median(times[1])))
    return out


def stability(source: np.ndarray, target: np.ndarray, n: int, base: minimax.MinimaxResult) -> tuple[float, float]:
    """Relative change of the reported d_aff (the upper bound) under a 1e-7 relative jitter of both inputs
    (as benchmarks/extrinsic_stability.py jitters) and under 2 torch threads instead of 1."""
    rng = np.random.default_rng(0)
    jitter = [(a[:n].astype(np.float64) * (1 + 1e-7 * rng.standard_normal(a[:n].shape))).astype(np.float32)
              for a in (source, target)]
    value = float(base.upper[0])
    jittered, _ = solve(minimax, *problem(jitter[0], jitter[1], n))
    torch.set_num_threads(2)
    try:
        threaded, _ = solve(minimax, *problem(source, target, n))
    finally:
        torch.set_num_threads(1)
    return abs(float(jittered.upper[0]) - value) / value, abs(float(threaded.upper[0]) - value) / value


class PassClock:
    """Clocks on the parts of ``minimax.working_set_fit`` while it is active (a context manager): the rounds'
    weighted fits (the nested ``minimax_fit`` calls, loose or tight by their ``tol``), the float32 screens and
    the exact checks (``_Screen.residuals``, ``_Screen.exact``). CPU seconds by ``time.process_time``."""

    def __init__(self) -> None:
        self.seconds = {"loose rounds": 0.0, "tight rounds": 0.0, "screens": 0.0, "exact checks": 0.0}
        self.counts = {key: 0 for key in self.seconds}
        self.fits = {"loose rounds": 0, "tight rounds": 0}
        self.rows: dict[str, list[int]] = {"loose rounds": [], "tight rounds": []}

    def __enter__(self) -> "PassClock":
        self.saved = (minimax.minimax_fit, minimax._Screen.residuals, minimax._Screen.exact)
        fit, residuals, exact = self.saved

        def clocked_fit(design, targets, atol, tol=1e-3, *args, **kwargs):
            part = "tight rounds" if tol <= TOL else "loose rounds"
            tick = time.process_time()
            result = fit(design, targets, atol, tol, *args, **kwargs)
            self._add(part, time.process_time() - tick)
            self.fits[part] += int(result.iterations[0])
            self.rows[part].append(design.shape[0])
            return result

        def clocked(method, part):
            def run(screen, coef):
                tick = time.process_time()
                out = method(screen, coef)
                self._add(part, time.process_time() - tick)
                return out
            return run

        minimax.minimax_fit = clocked_fit  # working_set_fit's rounds look the name up in the module
        minimax._Screen.residuals = clocked(residuals, "screens")
        minimax._Screen.exact = clocked(exact, "exact checks")
        return self

    def __exit__(self, *exc) -> None:
        minimax.minimax_fit, minimax._Screen.residuals, minimax._Screen.exact = self.saved

    def _add(self, part: str, seconds: float) -> None:
        self.seconds[part] += seconds
        self.counts[part] += 1


def breakdown_line(design: torch.Tensor, y: torch.Tensor, atol: torch.Tensor, unit: float) -> str:
    """Where one pair's passes go (:class:`PassClock`), solved once more as :func:`solve` does."""
    top = minimax.minimax_fit
    with PassClock() as clock:
        tick = time.process_time()
        top(design, y, atol, TOL, MAX_ITER, orthonormal=True, working_set=True)
        total = time.process_time() - tick
    parts = []
    for part, seconds in clock.seconds.items():
        text = f"{part} {seconds / unit:.1f}"
        if part in clock.fits and clock.rows[part]:
            low, high = min(clock.rows[part]), max(clock.rows[part])
            rows = f"{low:,}" if low == high else f"{low:,}-{high:,}"
            rounds = clock.counts[part]
            text += f" ({rounds} round{'s' if rounds > 1 else ''}, {clock.fits[part]} fits on {rows} rows)"
        elif clock.counts[part]:
            text += f" ({clock.counts[part]})"
        parts.append(text)
    rest = total - sum(clock.seconds.values())
    parts.append(f"least squares and the rest {rest / unit:.1f}")
    return f"where the {total / unit:.1f} passes go: " + "; ".join(parts)


def first_set_lines(reps: dict[str, np.ndarray], n: int, supports: dict[tuple[str, str], torch.Tensor]) -> None:
    """Each pair solved again with a known support joining its first working set (``working_set_fit``'s
    ``first_rows``): its own final support, and its reverse direction's where that pair was solved too."""
    say(f"{'':6}  first set joined by a known support (working_set_fit's first_rows), N = {n}:")
    for (source, target), own in supports.items():
        design, y, atol = problem(reps[source], reps[target], n)
        unit = pass_seconds(design, y)
        starts = {"own support": own, "reverse's support": supports.get((target, source))}
        for label, rows in starts.items():
            if rows is None:
                continue
            tick = time.process_time()  # the options of solve()'s path (minimax_fit's defaults)
            result = minimax.working_set_fit(design, y, atol, TOL, MAX_ITER, orthonormal=True, first_rows=[rows])
            seconds = time.process_time() - tick
            say(f"{'':6}  {source + ' -> ' + target:<29} from {label:<17} ({rows.numel():5d} rows): "
                f"{seconds / unit:5.1f} passes, {int(result.iterations[0]):3d} fits, {int(result.rounds[0])} rounds, "
                f"d in [{float(result.lower[0]):.6f}, {float(result.upper[0]):.6f}]")


def solve(module, design, target, atol) -> tuple[minimax.MinimaxResult, float]:
    tick = time.process_time()
    result = module.minimax_fit(design, target, atol, TOL, MAX_ITER, orthonormal=True, working_set=True)
    return result, time.process_time() - tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_glue_dir(parser, "SST-2/train.tsv")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 67349])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision of the solver to compare with")
    parser.add_argument("--pairs", type=int, default=len(PAIRS), help="the first this many pairs")
    parser.add_argument("--stability", action="store_true",
                        help="also solve each pair under a 1e-7 jitter and with 2 threads, and print the change")
    parser.add_argument("--first-set", action="store_true",
                        help="also solve each pair with a known support joining its first working set: its own final "
                             "support (the best any related problem could give) and its reverse direction's")
    parser.add_argument("--breakdown", action="store_true",
                        help="also solve each pair once more with clocks on the working-set loop's parts, and print "
                             "where its passes go")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reps = encoders(args.glue_dir)
    baseline = baseline_solver(args.baseline)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), 1 torch thread, torch {torch.__version__}, "
        f"{load_text()}; current solver: working tree at {head.strip()}, baseline: {args.baseline}")
    say("data: SST-2 train (first N rows), mean-pooled; D = 384, p = rank + 1; tol 1e-3, float64, jacobi")
    say(f"{'N':>6}  {'pair':<29} {'pass s':>7} | {'baseline: CPU s':>15} {'fits':>5} {'passes':>6} | "
        f"{'current: CPU s':>14} {'fits':>5} {'rounds':>6} {'passes':>6} | {'ratio':>5} {'gap':>8} overlap")
    table: dict[int, list[tuple[float, float]]] = {}
    for n in args.sizes:
        supports: dict[tuple[str, str], torch.Tensor] = {}  # each pair's final support (--first-set)
        for source, target in PAIRS[: args.pairs]:
            design, y, atol = problem(reps[source], reps[target], n)
            unit = pass_seconds(design, y)
            materialised, blocked = materialised_pass_seconds(design, y)
            old, old_seconds = solve(baseline, design, y, atol)
            new, new_seconds = solve(minimax, design, y, atol)
            overlap = (max(float(old.lower[0]), float(new.lower[0]))
                       <= min(float(old.upper[0]), float(new.upper[0])) * (1 + 1e-12))
            gap = float((new.upper - new.lower)[0] / new.upper[0])
            rounds = int(new.rounds[0]) if new.rounds is not None else 0
            table.setdefault(n, []).append((old_seconds / unit, new_seconds / unit))
            say(f"{n:6d}  {source + ' -> ' + target:<29} {unit:7.3f} | {old_seconds:15.2f} "
                f"{int(old.iterations[0]):5d} {old_seconds / unit:6.1f} | {new_seconds:14.2f} "
                f"{int(new.iterations[0]):5d} {rounds:6d} {new_seconds / unit:6.1f} | "
                f"{old_seconds / new_seconds:5.1f} {gap:8.1e} {overlap}")
            say(f"{'':6}  residual pass: materialised {materialised:.3f} s, blocked (linalg.residual_norms) "
                f"{blocked:.3f} s: {materialised / blocked:.2f}x")
            if n >= 6000:
                kernels = fit_kernel_seconds(design, y)
                say(f"{'':6}  one float32 fit on 6,000 rows, before -> today: " + "; ".join(
                    f"{name} {old:.4f} -> {new:.4f} s ({old / new:.2f}x)" for name, (old, new) in kernels.items()))
            if args.breakdown and new.rounds is not None and int(new.rounds[0]):
                say(f"{'':6}  {breakdown_line(design, y, atol, unit)}")
            supports[(source, target)] = torch.nonzero(new.weights_lower[0] > 0).squeeze(1)
            if args.stability:
                jitter, threads = stability(reps[source], reps[target], n, new)
                say(f"{'':6}  reported d_aff's relative change: jitter 1e-7 {jitter:.1e}, threads 1 -> 2 {threads:.1e} "
                    f"(tol {TOL:g})")
        if args.first_set:
            first_set_lines(reps, n, supports)
    say(load_text())
    say("\ngoal table (d_aff passes per pair; baseline -> current):")
    say("| N | pairs | baseline passes | current passes | goal |")
    say("|---|---|---|---|---|")
    for n, rows in table.items():
        old = [r[0] for r in rows]
        new = [r[1] for r in rows]
        goal = f"<= {GOAL_PASSES}" if n == max(table) else ""
        met = "" if not goal else (" (met)" if max(new) <= GOAL_PASSES else " (missed)")
        say(f"| {n} | {len(rows)} | {min(old):.0f}-{max(old):.0f} | {min(new):.1f}-{max(new):.1f} | {goal}{met} |")
    if FULL_SET in table and len(table[FULL_SET]) == len(PAIRS):
        new = [r[1] for r in table[FULL_SET]]
        record("daff_passes", max(new), "passes", f"benchmarks.daff_passes, {len(new)} pairs at N = {FULL_SET}: "
               f"{min(new):.1f}-{max(new):.1f} passes (baseline {args.baseline}: "
               f"{min(r[0] for r in table[FULL_SET]):.1f}-{max(r[0] for r in table[FULL_SET]):.1f})")


if __name__ == "__main__":
    main()
