"""The all-pairs intrinsic engine (:func:`affine_homotopy.core.intrinsic.pairwise_intrinsic`) side by side
with its naive references.

    python -m benchmarks intrinsic [--quick] [--encoders 12 --rows 4000 --dim 384] [--glue-dir DIR]

1. **engine against a naive loop** (synthetic encoders, :func:`benchmarks.common.synthetic_encoders`):
   the engine with ``max_iter=1`` (the least-squares map only: the naive loop has no minimax solver)
   and d_aff_ls, procrustes, the CCA family, cka and d_iso, against textbook numpy recomputing every
   ordered pair from scratch. Printed: the largest relative difference per measure and the speed-up.
2. **certified d_aff against the paper's SGD** (MiniLM layers of SST-2 sentences when ``--glue-dir``
   holds them, else the synthetic encoders): per ordered pair an affine ``torch.nn.Linear`` fitted by
   plain SGD on the MSE (batch 64, 20 epochs, each learning rate of ``SGD_RATES``), its largest row
   residual against the certified value. Printed: CPU seconds per pair and their ratio, and the
   SGD values below ``upper (1 - tol)``, under the certified lower bound of a converged pair (expected:
   none, no affine map can beat that bound).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from benchmarks.common import (DEFAULT_GLUE_DIR, Clock, add_glue_dir, minilm_embeddings, ratio, say, setup_line,
                               synthetic_encoders, train_sgd)

import numpy as np  # noqa: E402  (after benchmarks.common: its environment defaults come first)
import torch  # noqa: E402

from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic  # noqa: E402
from affine_homotopy.core.linalg import FLOAT32_EPS  # noqa: E402

ENGINE_MEASURES = ("d_aff_ls", "procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka", "d_iso")
SGD_RATES = (1e-4, 1e-3, 1e-2, 1e-1)
RANK_MULTIPLIER = 5.0  # the engine's rank rule: singular values below 5 eps(float32) max(N, D) are dropped


def _cca_terms(xn: np.ndarray, yn: np.ndarray) -> dict[str, float]:
    """CCA, PWCCA (Morcos et al. 2018, weights from the mapped-from side) and SVCCA (99 % variance)."""
    qx, _ = np.linalg.qr(xn)
    qy, _ = np.linalg.qr(yn)
    a, rho, _ = np.linalg.svd(qx.T @ qy)
    m = min(qx.shape[1], qy.shape[1])
    rho = np.minimum(rho[:m], 1.0)
    alpha = np.abs((qx @ a[:, :m]).T @ xn).sum(axis=1)
    kept = []
    for side in (xn, yn):
        u, s, _ = np.linalg.svd(side, full_matrices=False)
        keep = int(np.searchsorted(np.cumsum(s**2) / np.sum(s**2), 0.99)) + 1
        kept.append(np.linalg.qr(u[:, :keep] * s[:keep])[0])
    rho_sv = np.minimum(np.linalg.svd(kept[0].T @ kept[1], compute_uv=False), 1.0)
    return {"cca_r2": float(1 - np.mean(rho**2)), "cca_rho": float(1 - np.mean(rho)),
            "pwcca": float(1 - np.sum(alpha * rho) / np.sum(alpha)), "svcca": float(1 - np.mean(rho_sv))}


def naive_pair(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Every measure of the comparison for ``x`` mapped onto ``y``, from scratch, in textbook numpy."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    # least squares on the centred data with the engine's rank rule; the intercept follows from the means
    b, *_ = np.linalg.lstsq(xc, yc, rcond=RANK_MULTIPLIER * FLOAT32_EPS * max(x.shape))
    out = {"d_aff_ls": float(np.linalg.norm(yc - xc @ b, axis=1).max())}
    xn, yn = xc / np.linalg.norm(xc), yc / np.linalg.norm(yc)  # Ding et al. (2021): centred, Frobenius-normalised
    out.update(_cca_terms(xn, yn))
    out["cka"] = float(1 - np.linalg.norm(yn.T @ xn) ** 2 / (np.linalg.norm(xn.T @ xn) * np.linalg.norm(yn.T @ yn)))
    out["procrustes"] = float(2 - 2 * np.linalg.svd(xn.T @ yn, compute_uv=False).sum())
    u, _, vt = np.linalg.svd(xc.T @ yc, full_matrices=False)
    out["d_iso"] = float(np.linalg.norm(yc - xc @ (u @ vt), axis=1).max())
    return out


def engine_against_naive(reps: Sequence[np.ndarray], names: Sequence[str]) -> None:
    count = len(reps)
    off = ~np.eye(count, dtype=bool)
    settings = IntrinsicSettings(max_iter=1, measures=ENGINE_MEASURES)
    pairwise_intrinsic(reps[:2], names[:2], settings)  # warm-up: imports and first-call costs
    with Clock() as engine_clock:
        engine = pairwise_intrinsic(reps, names, settings)
    data = [rep.astype(np.float64) for rep in reps]
    naive = {measure: np.zeros((count, count)) for measure in ENGINE_MEASURES}
    with Clock() as naive_clock:
        for i, j in zip(*np.nonzero(off)):
            for measure, value in naive_pair(data[i], data[j]).items():
                naive[measure][i, j] = value
    say(f"\n1. engine against a naive per-pair loop, {off.sum()} ordered pairs, float64 (ranks {engine.ranks.tolist()})")
    say(f"{'measure':<11} {'largest relative difference':>28}")
    for measure in ENGINE_MEASURES:
        a, b = engine.matrices[measure][off], naive[measure][off]
        difference = np.max(np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), np.finfo(float).tiny))
        say(f"{measure:<11} {difference:28.1e}")
    say(f"CPU s: engine {engine_clock.cpu:.2f}, naive {naive_clock.cpu:.2f}: naive / engine "
        f"{ratio(naive_clock.cpu, engine_clock.cpu)} (wall {ratio(naive_clock.wall, engine_clock.wall)})")


def sgd_max_residual(x: torch.Tensor, y: torch.Tensor, lr: float) -> float:
    """The paper's protocol at one learning rate: the largest row residual of the SGD-fitted affine map."""
    layer = train_sgd(x, y.shape[1], lambda out, index: torch.nn.functional.mse_loss(out, y[index]), lr)
    with torch.no_grad():
        value = float(torch.linalg.vector_norm(y.double() - layer(x).double(), dim=1).max())
    return value if np.isfinite(value) else np.inf


def certified_against_sgd(reps: Sequence[np.ndarray], names: Sequence[str], tol: float) -> None:
    pairs = [(i, j) for i in range(len(reps)) for j in range(len(reps)) if i != j]
    with Clock() as ours_clock:
        ours = pairwise_intrinsic(reps, names, IntrinsicSettings(measures=("d_aff",), tol=tol))
    tensors = [torch.as_tensor(rep, dtype=torch.float32) for rep in reps]
    say(f"\n2. certified d_aff (tol {tol:g}) against the paper's SGD (learning rates {SGD_RATES}), {len(pairs)} pairs")
    say(f"{'pair':<22} {'d_aff':>9} {'SGD':>9} {'SGD/d_aff':>10} {'SGD CPU s':>10}")
    sgd_cpu, below = 0.0, 0
    for i, j in pairs:
        with Clock() as clock:
            sgd = min(sgd_max_residual(tensors[i], tensors[j], lr) for lr in SGD_RATES)
        sgd_cpu += clock.cpu
        upper = ours.matrices["d_aff"][i, j]
        below += bool(ours.converged[i, j]) and sgd < upper * (1 - tol)
        say(f"{names[i] + ' -> ' + names[j]:<22} {upper:9.4f} {sgd:9.4f} {ratio(sgd, upper):>10} {clock.cpu:10.2f}")
    per_pair = ours_clock.cpu / len(pairs)
    say(f"CPU s per pair: certified {per_pair:.3f}, SGD {sgd_cpu / len(pairs):.2f}: SGD / certified "
        f"{ratio(sgd_cpu / len(pairs), per_pair)}; SGD values below the certified lower bound: {below} (expected 0)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks intrinsic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--encoders", type=int, default=12)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--sentences", type=int, default=2000, help="SST-2 sentences for part 2")
    parser.add_argument("--tol", type=float, default=1e-3)
    add_glue_dir(parser, "SST-2/train.tsv (part 2; synthetic encoders without it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.encoders, args.rows, args.dim, args.sentences = 4, 600, 64, 300
    reps, names = synthetic_encoders(args.encoders, args.rows, args.dim)
    say(setup_line(f"synthetic encoders {', '.join(names)}", f"K = {args.encoders}, N = {args.rows}, D = {args.dim}",
                   "float32 inputs, float64 solves"))
    engine_against_naive(reps, names)
    sst2 = args.glue_dir / "SST-2" / "train.tsv"
    if sst2.is_file() and not args.quick:
        layers = (2, 4, 6)
        embedded = minilm_embeddings(sst2, args.sentences, layers)[0]
        reps, names = [embedded[k] for k in range(len(layers))], [f"MiniLM L{layer}" for layer in layers]
        say(setup_line(f"all-MiniLM-L6-v2 layers {layers} of SST-2 sentences", f"N = {args.sentences}, D = 384",
                       "float32 inputs, float64 solves"))
    else:
        reps, names = reps[:3], names[:3]
        say(f"(part 2 on three synthetic encoders: {'--quick' if args.quick else f'{sst2} is missing'}; "
            f"default glue dir {DEFAULT_GLUE_DIR})")
    certified_against_sgd(reps, names, args.tol)
    return 0
