"""Extrinsic (task-level) distances through linear softmax classifiers, for all ordered pairs.

Orientation as everywhere in this project: entry ``(i, j)`` is encoder ``i`` (row) mapped onto
encoder ``j`` (column). Each matrix has a zero diagonal (``psi = psi'_j`` attains 0).

``d_psi`` (the paper's Eq. 20, fixed classifier)
    ``min over affine psi of max_n || softmax(lam * psi'_j(y_n)) - softmax(psi(x_n)) ||_2`` with
    ``x_n``, ``y_n`` encoder ``i``'s and ``j``'s fit-split representations and ``psi'_j`` encoder
    ``j``'s task probe (logits ``y W_j + b_j``); ``lam`` is the inverse temperature (default 1).
    L2 distance between probability vectors, so values lie in ``[0, sqrt(2)]``.
``d_worst`` (the paper's approximation of Eq. 23)
    ``max over classifiers psi'`` of the same fixed-classifier distance, the classifiers being
    encoder ``j``'s task probe and its random-label probes (seeds ``0..n-1``). The task probe is one
    of them and enters with the very value reported as ``d_psi``, so ``d_worst >= d_psi`` holds
    exactly.
``bound`` (Lemma 5.2)
    ``c(lam) * ||W_j||_2 * d_aff(i, j)``, ``||W_j||_2`` the spectral norm of the probe's weight
    matrix and ``c(lam) = lam / 2`` the L2 Lipschitz constant of ``z -> softmax(lam z)`` (see
    :func:`softmax_lipschitz`). It holds because the *composed* candidate below is
    ``psi'_j o (the map attaining d_aff)``.

Estimator of a fixed-classifier distance (the problem is non-convex; every candidate map is
evaluated on all examples, so every reported number is attained by an actual affine map and is an
upper bound of the minimum):

1. *composed*: ``psi'_j o A_ij`` with ``A_ij`` the certified minimax affine map ``i -> j`` of the
   intrinsic stage, rebuilt from its solver weights (the weighted least-squares fit of
   :func:`affine_homotopy.intrinsic.affine_map`, batched here over all classifiers of a pair);
   without weights, the plain least-squares map;
2. *least_squares*: the logits of ``psi'`` regressed on encoder ``i`` by least squares;
3. *soft_label*: the soft-label cross-entropy fit (convex), started from (2), by accelerated
   gradient descent (FISTA with per-head gradient restart) with the exact step ``1/L``: in the
   whitened coordinates used here the loss's gradient is ``1/2``-Lipschitz (Gershgorin bound on the
   softmax Jacobian times an identity design Gram matrix), so no line search is needed and the
   heads stay exactly separate;
4. *refined*: from the best of (1)-(3) per classifier, minimise a smooth maximum of the squared
   per-example errors, ``tau * logsumexp(e_n^2 / (s tau))`` (``s`` the current largest squared
   error, so every classifier's objective is O(1)), over a working set of each classifier's worst
   examples, with ``tau`` annealed over ``temperatures`` (L-BFGS per stage); after each stage all
   examples are evaluated, the best map so far is kept and the working set is re-chosen.

The value is the smallest maximum error of (1)-(4); ``winning_start`` says which of (1)-(3) was best
before refinement, ``refined`` whether (4) improved on it.

Engine: maps work in the whitened coordinates ``sqrt(N) U_i`` of the source (orthonormal basis of
its centred column space after the rank rule, from :func:`affine_homotopy.linalg.factorise`, the
intrinsic stage's factorisation), which is the same family of affine maps but well conditioned. For one source, all classifiers of all targets form one multi-head problem (the
losses separate), so each iteration is a couple of ``N x rank x (heads * C)`` matrix products.
The task probes (``d_psi``) and the random-label probes are separate problems, so ``d_psi`` does
not depend on the number of random classifiers; random-label heads are processed in blocks of at
most ``block_mb`` of working memory (blocks only share the refinement's line search).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .linalg import WeightedLeastSquares, consecutive_blocks, factorise
from .probes import ProbeSet, SoftmaxProbe

log = logging.getLogger(__name__)

STARTS = ("composed", "least_squares", "soft_label")
# errors below this are float rounding of an exact fit: refining them cannot help
REFINE_FLOOR = 1e-7


def softmax_lipschitz(inverse_temperature: float = 1.0) -> float:
    """L2 Lipschitz constant ``c(lam)`` of ``z -> softmax(lam z)``: exactly ``lam / 2``.

    The Jacobian is ``lam (diag(p) - p p^T)``, symmetric positive semi-definite. By Gershgorin its
    eigenvalues lie in ``[0, max_k 2 p_k (1 - p_k)]`` (diagonal ``p_k - p_k^2``, absolute
    off-diagonal row sum ``p_k (1 - p_k)``), and ``2 p (1 - p) <= 1/2``; the mean-value theorem on
    the convex domain turns the Jacobian bound into a Lipschitz bound. It is attained: two classes
    with equal logits (``p = (1/2, 1/2)``) give eigenvalue ``lam / 2`` in direction ``(1, -1)``.
    (The often quoted constant ``lam`` is valid but loose by a factor of 2.)
    """
    return 0.5 * float(inverse_temperature)


@dataclass
class ExtrinsicSettings:
    max_iter: int = 200  # soft-label fit: accelerated gradient iterations
    refine_iter: int = 10  # smooth-max refinement: L-BFGS iterations per round
    rounds: int = 3  # refinement rounds per temperature (a fresh working set each)
    temperatures: tuple[float, ...] = (0.1, 0.03, 0.01, 0.003)
    working_set: int = 64  # fewest examples per classifier in a refinement working set (its worst)
    working_budget: int = 8192  # examples x classifiers per working set (more examples when few heads)
    inverse_temperature: float = 1.0  # lam: target probabilities are softmax(lam * probe logits)
    multiplier: float = 5.0  # the rank rule's n
    block_mb: int = 512  # working memory for one block of random-label classifiers
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"


@dataclass
class ExtrinsicResult:
    names: list[str]
    d_psi: np.ndarray  # (K, K)
    d_worst: np.ndarray | None  # (K, K); None without random classifiers
    worst_classifier: np.ndarray | None  # (K, K) int: -1 = the task probe, s = random seed s
    diagnostics: list[dict[str, object]]  # one row per ordered pair i != j
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class _Heads:
    """Fixed-classifier problems sharing one source: targets ``P`` (N, H, C) and start maps."""

    P: torch.Tensor
    starts: dict[str, tuple[torch.Tensor, torch.Tensor]]  # name -> (A (r, H, C), c (H, C))


@dataclass
class _HeadResult:
    value: torch.Tensor  # (H,) smallest max error found
    candidates: dict[str, torch.Tensor]  # start name or "refined" -> (H,) its max error
    winner: torch.Tensor  # (H,) index into STARTS
    soft_label_iterations: int
    soft_label_grad: torch.Tensor  # (H,)
    refine_iterations: int
    refine_grad: torch.Tensor  # (H,)


def lemma_bound(probes: Sequence[SoftmaxProbe], d_aff: np.ndarray, inverse_temperature: float = 1.0) -> np.ndarray:
    """Lemma 5.2 for every pair: ``c(lam) * ||W_j||_2 * d_aff[i, j]`` (column ``j`` = the probe's)."""
    norms = np.array([np.linalg.norm(np.asarray(p.weight, dtype=np.float64), 2) for p in probes])
    bound = softmax_lipschitz(inverse_temperature) * np.asarray(d_aff, dtype=np.float64) * norms[None, :]
    np.fill_diagonal(bound, 0.0)
    return bound


def tightness_summary(d_psi: np.ndarray, bound: np.ndarray, d_worst: np.ndarray | None = None,
                      atol: float = 1e-9, rtol: float = 1e-6) -> dict[str, float]:
    """How much of the extrinsic gap the bound explains: ``d_psi / bound`` over pairs ``i != j``.

    Pairs with ``bound <= atol`` carry no ratio (both sides are 0). ``violations`` counts pairs
    with ``d_psi > bound (1 + rtol) + atol``; it must be 0.
    """
    off = ~np.eye(len(d_psi), dtype=bool)
    ratio = d_psi[off & (bound > atol)] / bound[off & (bound > atol)]
    row: dict[str, float] = {
        "n_pairs": int(off.sum()), "n_ratio": int(ratio.size),
        "tightness_median": float(np.median(ratio)) if ratio.size else math.nan,
        "tightness_min": float(ratio.min()) if ratio.size else math.nan,
        "tightness_max": float(ratio.max()) if ratio.size else math.nan,
        "violations": int((d_psi[off] > bound[off] * (1 + rtol) + atol).sum()),
        "d_psi_median": float(np.median(d_psi[off])) if off.any() else math.nan,
        "bound_median": float(np.median(bound[off])) if off.any() else math.nan,
    }
    if d_worst is not None:
        row["d_worst_median"] = float(np.median(d_worst[off])) if off.any() else math.nan
        row["d_worst_below_d_psi"] = int((d_worst[off] < d_psi[off]).sum())
    return row


# ---------------------------------------------------------------------------------------------
# the per-source multi-head estimator


def _logits(Z: torch.Tensor, A: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(N, H, C) logits of every head: ``Z @ A[:, h] + c[h]``; ``A`` (r, H, C)."""
    r, h, k = A.shape
    return (Z @ A.reshape(r, h * k)).reshape(-1, h, k) + c


def _errors(Z: torch.Tensor, A: torch.Tensor, c: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """(N, H) L2 distance between the heads' probabilities and the targets, per example."""
    return torch.linalg.vector_norm(torch.softmax(_logits(Z, A, c), dim=2) - P, dim=2)


def _soft_label_fit(
    Z: torch.Tensor, P: torch.Tensor, A0: torch.Tensor, c0: torch.Tensor, max_iter: int, tol: float = 1e-9,
) -> tuple[torch.Tensor, torch.Tensor, int, torch.Tensor]:
    """FISTA on the mean soft-label cross entropy of every head; returns A, c, iterations, grad norms.

    ``Z^T Z = N I`` and ``Z^T 1 = 0``, so the Hessian in ``(A, c)`` is at most ``1/2`` times the
    identity: step 2 is the exact ``1/L`` step. Momentum restarts per head when the gradient and
    the last step point the same way (O'Donoghue & Candes), which keeps the heads independent.
    """
    n = Z.shape[0]
    x_A, x_c = A0.clone(), c0.clone()
    y_A, y_c = A0.clone(), c0.clone()
    t = torch.ones(P.shape[1], dtype=Z.dtype, device=Z.device)
    grad_norm = torch.zeros_like(t)
    steps = 0
    for steps in range(1, max_iter + 1):
        G = (torch.softmax(_logits(Z, y_A, y_c), dim=2) - P) / n  # (N, H, C)
        g_A = (Z.T @ G.reshape(n, -1)).reshape(y_A.shape)
        g_c = G.sum(dim=0)
        grad_norm = torch.sqrt((g_A**2).sum(dim=(0, 2)) + (g_c**2).sum(dim=1))
        if float(grad_norm.max()) <= tol:
            break
        new_A, new_c = y_A - 2.0 * g_A, y_c - 2.0 * g_c
        restart = ((g_A * (new_A - x_A)).sum(dim=(0, 2)) + (g_c * (new_c - x_c)).sum(dim=1)) > 0
        t = torch.where(restart, torch.ones_like(t), t)
        t_next = 0.5 * (1 + torch.sqrt(1 + 4 * t**2))
        beta = torch.where(restart, torch.zeros_like(t), (t - 1) / t_next)
        y_A = new_A + beta[None, :, None] * (new_A - x_A)
        y_c = new_c + beta[:, None] * (new_c - x_c)
        x_A, x_c, t = new_A, new_c, t_next
    return y_A, y_c, steps, grad_norm


def _refine(
    Z: torch.Tensor, P: torch.Tensor, A: torch.Tensor, c: torch.Tensor, settings: ExtrinsicSettings,
) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Annealed smooth-max refinement (module docstring, step 4); returns best values, iterations, grads.

    Each round optimises every head on its working set (its currently worst examples), then scores
    all examples and keeps, per head, the better of the new and the best map so far; the next round
    starts from the best map with a re-chosen working set. Short rounds matter: a long run on a
    small working set drives the examples outside it up.
    """
    n, heads, n_classes = P.shape
    rank = Z.shape[1]
    errors = _errors(Z, A, c, P)
    best = errors.max(dim=0).values
    grad_norm = torch.zeros_like(best)
    active = torch.nonzero(best > REFINE_FLOOR).squeeze(1)
    if active.numel() == 0 or rank == 0 or not settings.temperatures or settings.rounds == 0:
        return best, 0, grad_norm
    # few heads (the task probes): every example; many heads: at least `working_set` examples each
    k = min(n, max(settings.working_set, settings.working_budget // active.numel()))
    best_W = A[:, active].permute(1, 0, 2).contiguous()  # (h, r, C)
    best_b = c[active].clone()
    best_errors = errors[:, active]
    best_active = best[active]
    P_active = P[:, active]
    iterations = 0
    for tau in settings.temperatures:
        for _ in range(settings.rounds):
            rows = best_errors.topk(k, dim=0).indices.T  # (h, k): each head's worst examples
            Zs = Z[rows]  # (h, k, r)
            Ps = torch.gather(P_active, 0, rows.T[:, :, None].expand(k, -1, n_classes)).transpose(0, 1)
            scale = (best_active**2).clamp(min=torch.finfo(Z.dtype).tiny)[:, None]
            # The working-set loss only sees W through Zs W, and its gradients lie in the row span of
            # Zs. With fewer rows than dimensions, optimise in that span instead: W = W0 + Zs^T L^-T beta
            # with K = Zs Zs^T = L L^T gives Zs W = Zs W0 + L beta and ||W - W0|| = ||beta||, an
            # isometric change of variables that makes each evaluation k x k instead of k x rank.
            kernel = k < rank
            if kernel:
                gram = torch.bmm(Zs, Zs.transpose(1, 2))
                eye = torch.eye(k, dtype=Z.dtype, device=Z.device)
                ridge = 1e-10 * gram.diagonal(dim1=1, dim2=2).mean(dim=1)[:, None, None] * eye
                factor, info = torch.linalg.cholesky_ex(gram + ridge)
                if bool((info > 0).any()):
                    factor = torch.linalg.cholesky(gram + 1e3 * ridge)
                base = torch.bmm(Zs, best_W) + best_b[:, None, :]
                W = torch.zeros((active.numel(), k, n_classes), dtype=Z.dtype, device=Z.device)
                b = torch.zeros_like(best_b)
            else:
                W, b = best_W.clone(), best_b.clone()
            optimizer = torch.optim.LBFGS([W, b], lr=1.0, max_iter=settings.refine_iter, history_size=10,
                                          tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")

            def closure() -> torch.Tensor:
                # hand-written gradient: autograd's overhead dominates on these small batched problems
                if kernel:
                    logits = base + torch.bmm(factor, W) + b[:, None, :]
                else:
                    logits = torch.bmm(Zs, W) + b[:, None, :]
                q = torch.softmax(logits, dim=2)  # (h, k, C)
                diff = q - Ps
                squared = (diff**2).sum(dim=2) / scale
                loss = (tau * torch.logsumexp(squared / tau, dim=1)).sum()
                v = torch.softmax(squared / tau, dim=1)[:, :, None] * 2 * diff / scale[:, :, None]
                g = q * v - q * (q * v).sum(dim=2, keepdim=True)  # softmax Jacobian times v
                W.grad = torch.bmm((factor if kernel else Zs).transpose(1, 2), g)
                b.grad = g.sum(dim=1)
                return loss

            optimizer.step(closure)
            iterations += int(optimizer.state[optimizer._params[0]].get("n_iter", 0))
            closure()
            grad_norm[active] = torch.sqrt((W.grad**2).sum(dim=(1, 2)) + (b.grad**2).sum(dim=1))
            if kernel:  # back to a map on all examples
                coefficients = torch.linalg.solve_triangular(factor.transpose(1, 2), W, upper=True)
                W = best_W + torch.bmm(Zs.transpose(1, 2), coefficients)
                b = best_b + b
            errors = _errors(Z, W.permute(1, 0, 2).contiguous(), b, P_active)
            value = errors.max(dim=0).values
            better = value < best_active  # NaN (a diverged head) never counts as better
            best_W[better], best_b[better] = W[better], b[better]
            best_errors[:, better] = errors[:, better]
            best_active = torch.where(better, value, best_active)
    best[active] = best_active
    return best, iterations, grad_norm


def _fit_heads(Z: torch.Tensor, heads: _Heads, settings: ExtrinsicSettings) -> _HeadResult:
    candidates: dict[str, torch.Tensor] = {}
    maps: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name in ("composed", "least_squares"):
        A, c = heads.starts[name]
        candidates[name] = _errors(Z, A, c, heads.P).max(dim=0).values
        maps[name] = (A, c)
    A, c, ce_steps, ce_grad = _soft_label_fit(Z, heads.P, *heads.starts["least_squares"], settings.max_iter)
    candidates["soft_label"] = _errors(Z, A, c, heads.P).max(dim=0).values
    maps["soft_label"] = (A, c)
    stacked = torch.stack([candidates[name] for name in STARTS])  # (3, H)
    winner = stacked.argmin(dim=0)
    A0 = torch.stack([maps[name][0] for name in STARTS])[winner, :, torch.arange(len(winner))].transpose(0, 1)
    c0 = torch.stack([maps[name][1] for name in STARTS])[winner, torch.arange(len(winner))]
    refined, refine_steps, refine_grad = _refine(Z, heads.P, A0.contiguous(), c0, settings)
    candidates["refined"] = refined
    value = torch.minimum(stacked.min(dim=0).values, refined)
    return _HeadResult(value, candidates, winner, ce_steps, ce_grad, refine_steps, refine_grad)


# ---------------------------------------------------------------------------------------------
# all pairs


def _as_tensor(array: np.ndarray, settings: ExtrinsicSettings) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array)).to(device=settings.device, dtype=settings.dtype)


class _PairMaps:
    """Start maps for the classifiers of one pair ``i -> j`` (module docstring, starts 1 and 2).

    The composed start regresses a classifier's logits on encoder ``i`` with the intrinsic
    engine's weighted least squares (:class:`affine_homotopy.linalg.WeightedLeastSquares` on the
    design ``[U_i, 1/sqrt(N)]`` with the map's solver weights, exactly as
    :func:`affine_homotopy.intrinsic.affine_map`): the logits are linear in the target, so this
    *is* ``psi' o A_ij``. The normal equations are factorised once per pair.
    """

    def __init__(self, design: torch.Tensor, weights: torch.Tensor | None) -> None:
        self.U = design[:, :-1]
        self.root = math.sqrt(design.shape[0])
        self.fit: WeightedLeastSquares | None = None
        if weights is not None:
            self.fit = WeightedLeastSquares(design, weights, torch.nonzero(weights > 0).squeeze(1))

    def starts(self, logits: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"composed": (A, c), "least_squares": (A, c)}`` for logits (N, G, C): A (r, G, C), c (G, C)."""
        n, groups, n_classes = logits.shape
        rank = self.U.shape[1]
        flat = logits.reshape(n, -1)
        # least squares on the design [sqrt(N) U, 1]: U^T 1 = 0 and U^T U = I decouple it
        least_squares = ((self.U.T @ flat / self.root).reshape(rank, groups, n_classes),
                         flat.mean(dim=0).reshape(groups, n_classes))
        if self.fit is None:
            return {"composed": least_squares, "least_squares": least_squares}
        coef = self.fit.solve(flat)
        composed = ((coef[:rank] / self.root).reshape(rank, groups, n_classes),
                    (coef[rank] / self.root).reshape(groups, n_classes))
        return {"composed": composed, "least_squares": least_squares}


def _classifier_logits(Y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lam: float) -> torch.Tensor:
    """(N, G, C) logits of G classifiers ``weight`` (G, D, C), ``bias`` (G, C) on Y (N, D)."""
    g, d, k = weight.shape
    return lam * ((Y @ weight.permute(1, 0, 2).reshape(d, g * k)).reshape(-1, g, k) + bias)


def extrinsic_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    random_probes: Sequence[ProbeSet] | None = None,
    settings: ExtrinsicSettings | None = None,
) -> ExtrinsicResult:
    """``d_psi`` (and ``d_worst`` when ``random_probes`` are given) for every ordered pair.

    ``map_weights`` (K, K, N): the intrinsic solver's weights, ``[i, j]`` for the map ``i -> j``
    (``d_aff_weights.npy``); without them the composed start uses the least-squares map.
    ``random_probes[j]``: encoder ``j``'s random-label classifiers. See the module docstring.
    """
    settings = settings or ExtrinsicSettings()
    count = len(representations)
    names = list(names) if names is not None else [str(k) for k in range(count)]
    if len(probes) != count or (random_probes is not None and len(random_probes) != count):
        raise ValueError("one task probe (and one random probe set, if any) per encoder is required")
    rows = {rep.shape[0] for rep in representations}
    if len(rows) != 1:
        raise ValueError(f"all encoders need the same examples (rows); got row counts {sorted(rows)}")
    n = rows.pop()
    if map_weights is not None and np.shape(map_weights) != (count, count, n):
        raise ValueError(f"map weights must be (K, K, N) = {(count, count, n)}, got {np.shape(map_weights)}")
    lam = settings.inverse_temperature
    tensors = [_as_tensor(rep, settings) for rep in representations]
    task_w = [_as_tensor(p.weight, settings)[None] for p in probes]  # (1, D, C)
    task_b = [_as_tensor(p.bias, settings)[None] for p in probes]
    n_classes = task_w[0].shape[2]
    task_logits = [_classifier_logits(t, w, b, lam) for t, w, b in zip(tensors, task_w, task_b)]
    itemsize = torch.tensor([], dtype=settings.dtype).element_size()
    # a random head costs about ten (N, C) tensors at once, plus its refinement working set
    per_head = itemsize * n_classes * (10 * n + settings.working_set * 4)
    d_psi = np.zeros((count, count))
    d_worst = np.zeros((count, count)) if random_probes is not None else None
    worst_index = np.full((count, count), -1, dtype=int) if random_probes is not None else None
    diagnostics: list[dict[str, object]] = []
    seconds = {"d_psi": 0.0, "d_worst": 0.0}
    for i in range(count):
        others = [j for j in range(count) if j != i]
        if not others:
            continue
        tick = time.monotonic()
        design = factorise(tensors[i], settings.multiplier, settings.dtype, settings.device).affine_design()
        rank = design.shape[1] - 1
        Z = design[:, :rank] * math.sqrt(n)
        pair_maps = {j: _PairMaps(design, None if map_weights is None else _as_tensor(map_weights[i, j], settings))
                     for j in others}
        task_starts = [pair_maps[j].starts(task_logits[j]) for j in others]
        heads = _Heads(
            torch.softmax(torch.cat([task_logits[j] for j in others], dim=1), dim=2),
            {name: (torch.cat([s[name][0] for s in task_starts], dim=1), torch.cat([s[name][1] for s in task_starts]))
             for name in ("composed", "least_squares")},
        )
        task = _fit_heads(Z, heads, settings)
        d_psi[i, others] = task.value.cpu().numpy()
        seconds["d_psi"] += time.monotonic() - tick
        tick = time.monotonic()
        worst_rows: dict[int, dict[str, object]] = {}
        if random_probes is not None:
            counts = [random_probes[j].weight.shape[0] for j in others]
            budget = max(1, settings.block_mb * 2**20 // max(per_head, 1))
            d_worst[i, others] = d_psi[i, others]  # the task probe is one of the classifiers
            for block in consecutive_blocks(others, counts, budget):
                per_target, starts = [], []
                for j in block:
                    rp = random_probes[j]
                    logits = _classifier_logits(tensors[j], _as_tensor(rp.weight, settings), _as_tensor(rp.bias, settings), lam)
                    per_target.append(logits)
                    starts.append(pair_maps[j].starts(logits))
                random = _fit_heads(Z, _Heads(
                    torch.softmax(torch.cat(per_target, dim=1), dim=2),
                    {name: (torch.cat([s[name][0] for s in starts], dim=1), torch.cat([s[name][1] for s in starts]))
                     for name in ("composed", "least_squares")},
                ), settings)
                offset = 0
                for j, logits in zip(block, per_target):
                    values = random.value[offset : offset + logits.shape[1]].cpu().numpy()
                    grads = random.refine_grad[offset : offset + logits.shape[1]].cpu().numpy()
                    offset += logits.shape[1]
                    if values.size and values.max() > d_worst[i, j]:
                        d_worst[i, j], worst_index[i, j] = float(values.max()), int(values.argmax())
                    worst_rows[j] = {
                        "random_median": float(np.median(values)) if values.size else math.nan,
                        "random_soft_label_iterations": random.soft_label_iterations,
                        "random_refine_iterations": random.refine_iterations,
                        "random_refine_grad_norm_max": float(grads.max()) if grads.size else math.nan,
                    }
        seconds["d_worst"] += time.monotonic() - tick
        for slot, j in enumerate(others):
            row: dict[str, object] = {
                "mapped_from": names[i], "mapped_to": names[j], "d_psi": d_psi[i, j],
                **{name: float(task.candidates[name][slot]) for name in (*STARTS, "refined")},
                "winning_start": STARTS[int(task.winner[slot])],
                "refined_improved": bool(task.candidates["refined"][slot] < task.candidates[STARTS[int(task.winner[slot])]][slot]),
                "soft_label_iterations": task.soft_label_iterations,
                "soft_label_grad_norm": float(task.soft_label_grad[slot]),
                "refine_iterations": task.refine_iterations,
                "refine_grad_norm": float(task.refine_grad[slot]),
                "source_rank": rank,
            }
            if d_worst is not None:
                row["d_worst"] = d_worst[i, j]
                row["worst_classifier"] = "task" if worst_index[i, j] < 0 else f"random_{worst_index[i, j]}"
                row.update(worst_rows.get(j, {}))
            diagnostics.append(row)
        log.info("source %d/%d '%s' (rank %d): d_psi %s%s", i + 1, count, names[i], rank,
                 np.array2string(d_psi[i, others], precision=4),
                 "" if d_worst is None else ", d_worst " + np.array2string(d_worst[i, others], precision=4))
    log.info("seconds: %s", {k: round(v, 2) for k, v in seconds.items()})
    return ExtrinsicResult(names, d_psi, d_worst, worst_index, diagnostics, seconds)


def fixed_classifier_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    settings: ExtrinsicSettings | None = None,
) -> ExtrinsicResult:
    """``d_psi`` only (no random classifiers); see :func:`extrinsic_distances`."""
    return extrinsic_distances(representations, probes, names, map_weights, None, settings)
