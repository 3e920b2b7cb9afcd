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
    encoder ``j``'s task probe and its random-label probes (seeds ``0..n-1``; fitted as the paper
    did, :func:`affine_homotopy.probes.fit_random_probes_sgd`). The task probe is one of them and
    enters with the very value reported as ``d_psi``, so ``d_worst >= d_psi`` holds exactly. A
    random classifier whose logits (or weight norm) overflow is skipped with a counted warning.
``d_worst_search`` (a searched estimate of Eq. 23's supremum over a norm ball)
    Eq. 23 takes the supremum over all classifiers; any classifier gives a lower estimate of it (as
    far as its inner minimum is found), so the search adds classifiers inside the ball
    ``||W'||_2 <= R_j`` (``R_j``: the largest norm among ``j``'s task and random-label probes, or
    the configured radius), which keeps Lemma 5.2's bound finite: ``d <= c(lam) R_j d_aff``. Per pair
    ``i -> j``, batched over the targets of a source:

    1. *aimed classifiers*: for the ``search_candidates`` examples with the largest residuals
       ``r_n = y_n - A_ij(x_n)`` of the composed start's map, ``W' = R_j (r_n / ||r_n||) v^T``
       (``v`` a class contrast) with the decision boundary through the midpoint of ``y_n`` and
       ``A_ij(x_n)``: they look exactly where encoder ``i`` falls short of ``j``;
    2. *ascent*: from the best classifier so far (the worst of ``d_worst``, or an aimed one when it
       is larger), ``search_steps`` projected gradient-ascent steps on ``(W', b')``: the direction is
       the gradient of the smooth maximum of the errors at the current best map (Danskin), the step
       is projected onto the ball (singular values clipped), the inner map is re-fitted warm-started
       on small working sets, and a step is kept only when the value grows (else the step halves);
    3. the final classifiers are scored again with the full estimator below (warm start included)
       and the smaller value is kept, so a value never rests on a cheaper inner fit.

    ``d_worst_search = max(d_worst, the values of 1-3)``, so ``d_worst <= d_worst_search``.
``bound`` (Lemma 5.2)
    ``c(lam) * ||W_j||_2 * d_aff(i, j)``, ``||W_j||_2`` the spectral norm of the probe's weight
    matrix and ``c(lam) = lam / 2`` the L2 Lipschitz constant of ``z -> softmax(lam z)`` (see
    :func:`softmax_lipschitz`). It holds because the *composed* candidate below is
    ``psi'_j o (the map attaining d_aff)``. The same holds for every classifier evaluated, task,
    random or searched: ``d_k(i -> j) <= c(lam) ||W'_k||_2 d_aff(i -> j)`` is checked for each one
    (with ``d_aff`` given), and ``bound_worst = c(lam) max_k ||W'_k||_2 d_aff(i -> j)`` bounds
    ``d_worst`` and ``d_worst_search``.

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
intrinsic stage's factorisation), which is the same family of affine maps but well conditioned. For
one source, all classifiers of all targets form one multi-head problem (the losses separate), so
each iteration is a couple of ``N x rank x (heads * C)`` matrix products; each source is
factorised once and each pair's weighted least squares once. The task probes (``d_psi``), the
random-label probes and the search are separate problems, so ``d_psi`` does not depend on the
number of random classifiers; random-label heads are processed in blocks of at most ``block_mb``
of working memory (blocks only share the refinement's line search). The search's target-side
products run on one (K, N, D) stack of all encoders' representations (one batched product per step).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .errors import ConfigError, NumericalError
from .intrinsic import map_in_original_coordinates
from .linalg import Factors, WeightedLeastSquares, consecutive_blocks, factorise
from .probes import ProbeSet, SoftmaxProbe

log = logging.getLogger(__name__)

STARTS = ("composed", "least_squares", "soft_label")
# errors below this are float rounding of an exact fit: refining them cannot help
REFINE_FLOOR = 1e-7
# with every example in the working set, evaluate all heads by one shared product (the same sums
# as the batched per-head product, a few times faster); False: the batched product (benchmarks)
FULL_SET_PRODUCT = True
# the soft-label fit drops heads from its products as they converge; False: every head runs until
# all have converged (benchmarks)
SOFT_LABEL_ACTIVE_SET = True
# Lemma 5.2 checks: a value counts as above its bound when value > bound (1 + BOUND_RTOL) + BOUND_ATOL,
# the bound using d_aff plus the rank rule's discarded tail of the target (see _LemmaCheck)
BOUND_RTOL, BOUND_ATOL = 1e-6, 1e-9


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
    search_steps: int = 10  # d_worst_search: ascent steps on the classifier (0 = d_worst_search is d_worst)
    search_step_size: float = 0.1  # first step length, as a fraction of the ball's radius
    search_radius: float | None = None  # None: per target, the largest norm among its classifiers
    search_candidates: int = 16  # classifiers aimed at the largest residuals of the d_aff map, per pair
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
    d_worst_search: np.ndarray | None = None  # (K, K); None without random classifiers
    bound_worst: np.ndarray | None = None  # (K, K) c(lam) max_k ||W_k||_2 d_aff; None without d_aff
    bound_violations: np.ndarray | None = None  # (K, K) classifiers breaking their own Lemma 5.2 bound
    radius: np.ndarray | None = None  # (K,) the search ball's radius per target
    skipped: np.ndarray | None = None  # (K,) random classifiers skipped per target (non-finite logits)
    searched: dict[tuple[int, int], "SearchedClassifier"] = field(default_factory=dict)


@dataclass
class _Heads:
    """Fixed-classifier problems sharing one source: targets ``P`` (N, H, C) and start maps."""

    P: torch.Tensor
    starts: dict[str, tuple[torch.Tensor, torch.Tensor]]  # name -> (A (r, H, C), c (H, C))


@dataclass
class _HeadResult:
    value: torch.Tensor  # (H,) smallest max error found
    candidates: dict[str, torch.Tensor]  # start name or "refined" -> (H,) its max error
    winner: torch.Tensor  # (H,) index into start_names
    start_names: tuple[str, ...]
    A: torch.Tensor  # (r, H, C) the map attaining `value`
    c: torch.Tensor  # (H, C)
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
                      atol: float = BOUND_ATOL, rtol: float = BOUND_RTOL, slack: np.ndarray | float = 0.0
                      ) -> dict[str, float]:
    """How much of the extrinsic gap the bound explains: ``d_psi / bound`` over pairs ``i != j``.

    Pairs with ``bound <= atol`` carry no ratio (both sides are 0). ``violations`` counts pairs
    with ``d_psi > (bound + slack) (1 + rtol) + atol``; it must be 0 (``slack``: the extrinsic job's
    per-pair ``bound_slack``, the bound's share of the target's discarded tail: :class:`_LemmaCheck`).
    """
    off = ~np.eye(len(d_psi), dtype=bool)
    ratio = d_psi[off & (bound > atol)] / bound[off & (bound > atol)]
    row: dict[str, float] = {
        "n_pairs": int(off.sum()), "n_ratio": int(ratio.size),
        "tightness_median": float(np.median(ratio)) if ratio.size else math.nan,
        "tightness_min": float(ratio.min()) if ratio.size else math.nan,
        "tightness_max": float(ratio.max()) if ratio.size else math.nan,
        "violations": int((d_psi[off] > ((bound + slack) * (1 + rtol) + atol)[off]).sum()),
        "d_psi_median": float(np.median(d_psi[off])) if off.any() else math.nan,
        "bound_median": float(np.median(bound[off])) if off.any() else math.nan,
    }
    if d_worst is not None:
        row["d_worst_median"] = float(np.median(d_worst[off])) if off.any() else math.nan
        row["d_worst_below_d_psi"] = int((d_worst[off] < d_psi[off]).sum())
    return row


def check_bounds(d_psi: np.ndarray, bound: np.ndarray, bound_violations: np.ndarray | None = None,
                 slack: np.ndarray | float = 0.0) -> None:
    """Lemma 5.2 must hold: ``d_psi <= bound`` on every pair and every evaluated classifier within its
    own bound (``bound_violations`` from :func:`extrinsic_distances`, which checks task probes too).
    The composed candidate attains each bound, so a violation is a bug: NumericalError, before any
    output is written."""
    task = tightness_summary(d_psi, bound, slack=slack)["violations"]
    if task:
        raise NumericalError(f"{task} ordered pairs have d_psi above Lemma 5.2's bound c(lambda) ||W_j||_2 "
                             "d_aff(i -> j) (bound.csv); nothing was written")
    if bound_violations is not None and int(np.sum(bound_violations)):
        raise NumericalError(f"{int(np.sum(bound_violations))} evaluated classifiers (over "
                             f"{int(np.count_nonzero(bound_violations))} ordered pairs) have a fixed-classifier "
                             "distance above their own Lemma 5.2 bound c(lambda) ||W'_k||_2 d_aff(i -> j) "
                             "(bound_worst.csv); nothing was written")


def worst_case_summary(d_psi: np.ndarray, d_worst: np.ndarray, d_worst_search: np.ndarray, bound_worst: np.ndarray,
                       task_probe_worst: np.ndarray, atol: float = BOUND_ATOL, rtol: float = BOUND_RTOL,
                       slack: np.ndarray | float = 0.0) -> dict[str, float]:
    """How much the random-label probes and the search add, over ordered pairs ``i != j``.

    ``task_probe_worst`` (K, K) bool: the task probe was the worst classifier of ``d_worst``.
    ``task_probe_worst_share`` counts only pairs with ``d_worst > atol`` (where every classifier
    gives 0 no classifier is "the worst"); ``..._after_search`` the same share when the searched
    classifiers join (the task probe stays the worst where the search found nothing larger); the
    ratios skip pairs whose denominator is ``<= atol``.
    ``bound_worst_violations`` counts ``d_worst_search > (bound_worst + slack) (1 + rtol) + atol`` (must be 0;
    the extrinsic job checks each classifier against its own bound), ``ordering_violations`` pairs
    breaking ``d_psi <= d_worst <= d_worst_search`` (must be 0: the maxima are over nested sets).
    """
    off = ~np.eye(len(d_psi), dtype=bool)
    positive = off & (d_worst > atol)
    by_psi, by_worst = off & (d_psi > atol), off & (d_worst > atol)
    return {
        "task_probe_worst_share": float(task_probe_worst[positive].mean()) if positive.any() else math.nan,
        "task_probe_worst_share_after_search": (float((task_probe_worst & (d_worst_search <= d_worst))[positive].mean())
                                                if positive.any() else math.nan),
        "n_pairs_positive_d_worst": int(positive.sum()),
        "d_worst_over_d_psi_median": float(np.median(d_worst[by_psi] / d_psi[by_psi])) if by_psi.any() else math.nan,
        "d_worst_search_over_d_worst_median": (float(np.median(d_worst_search[by_worst] / d_worst[by_worst]))
                                               if by_worst.any() else math.nan),
        "d_worst_search_improved_pairs": int((d_worst_search[off] > d_worst[off]).sum()),
        "d_worst_search_median": float(np.median(d_worst_search[off])) if off.any() else math.nan,
        "bound_worst_median": float(np.median(bound_worst[off])) if off.any() else math.nan,
        "bound_worst_violations": int((d_worst_search[off] > ((bound_worst + slack) * (1 + rtol) + atol)[off]).sum()),
        "ordering_violations": int(((d_worst[off] < d_psi[off]) | (d_worst_search[off] < d_worst[off])).sum()),
    }


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
    # heads stop one by one: a head whose gradient is below tol keeps its point and leaves the
    # products (each head's iterates depend on its own gradients only)
    active = torch.arange(P.shape[1], device=Z.device)
    steps = 0
    for steps in range(1, max_iter + 1):
        every = active.numel() == P.shape[1]
        a_A, a_c = (y_A, y_c) if every else (y_A[:, active], y_c[active])
        G = (torch.softmax(_logits(Z, a_A, a_c), dim=2) - (P if every else P[:, active])) / n  # (N, h, C)
        g_A = (Z.T @ G.reshape(n, -1)).reshape(a_A.shape)
        g_c = G.sum(dim=0)
        norm = torch.sqrt((g_A**2).sum(dim=(0, 2)) + (g_c**2).sum(dim=1))
        grad_norm[active] = norm
        going = norm > tol
        if not bool(going.any()):
            break
        if not SOFT_LABEL_ACTIVE_SET:
            going = torch.ones_like(going)
        if not bool(going.all()):
            active, a_A, a_c, g_A, g_c = active[going], a_A[:, going], a_c[going], g_A[:, going], g_c[going]
        new_A, new_c = a_A - 2.0 * g_A, a_c - 2.0 * g_c
        old_A, old_c, t_a = x_A[:, active], x_c[active], t[active]
        restart = ((g_A * (new_A - old_A)).sum(dim=(0, 2)) + (g_c * (new_c - old_c)).sum(dim=1)) > 0
        t_a = torch.where(restart, torch.ones_like(t_a), t_a)
        t_next = 0.5 * (1 + torch.sqrt(1 + 4 * t_a**2))
        beta = torch.where(restart, torch.zeros_like(t_a), (t_a - 1) / t_next)
        y_A[:, active] = new_A + beta[None, :, None] * (new_A - old_A)
        y_c[active] = new_c + beta[:, None] * (new_c - old_c)
        x_A[:, active], x_c[active], t[active] = new_A, new_c, t_next
    return y_A, y_c, steps, grad_norm


def _refine(
    Z: torch.Tensor, P: torch.Tensor, A: torch.Tensor, c: torch.Tensor, settings: ExtrinsicSettings,
) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Annealed smooth-max refinement (module docstring, step 4).

    Returns the best values (H,), iterations, gradient norms and the best maps ``A`` (r, H, C),
    ``c`` (H, C) (a head that is not refined keeps its start).

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
        return best, 0, grad_norm, A, c
    # few heads (the task probes): every example; many heads: at least `working_set` examples each
    k = min(n, max(settings.working_set, settings.working_budget // active.numel()))
    best_W = A[:, active].permute(1, 0, 2).contiguous()  # (h, r, C)
    best_b = c[active].clone()
    best_errors = errors[:, active]
    best_active = best[active]
    P_active = P[:, active]
    iterations = 0
    # every example in the working set (few heads): one shared (N, r) x (r, h C) product per
    # evaluation instead of h gathered copies of Z in a batched product (FULL_SET_PRODUCT)
    shared = k == n and FULL_SET_PRODUCT
    for tau in settings.temperatures:
        for _ in range(settings.rounds):
            if shared:
                Zs, Ps = Z, P_active.transpose(0, 1)  # (n, r), (h, n, C)
            else:
                rows = best_errors.topk(k, dim=0).indices.T  # (h, k): each head's worst examples
                Zs = Z[rows]  # (h, k, r)
                Ps = torch.gather(P_active, 0, rows.T[:, :, None].expand(k, -1, n_classes)).transpose(0, 1)
            scale = (best_active**2).clamp(min=torch.finfo(Z.dtype).tiny)[:, None]
            # The working-set loss only sees W through Zs W, and its gradients lie in the row span of
            # Zs. With fewer rows than dimensions, optimise in that span instead: W = W0 + Zs^T L^-T beta
            # with K = Zs Zs^T = L L^T gives Zs W = Zs W0 + L beta and ||W - W0|| = ||beta||, an
            # isometric change of variables that makes each evaluation k x k instead of k x rank.
            kernel = k < rank and not shared
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
                elif shared:
                    heads_now = W.shape[0]
                    logits = (Zs @ W.permute(1, 0, 2).reshape(rank, -1)).reshape(n, heads_now, n_classes)
                    logits = logits.transpose(0, 1) + b[:, None, :]
                else:
                    logits = torch.bmm(Zs, W) + b[:, None, :]
                q = torch.softmax(logits, dim=2)  # (h, k, C)
                diff = q - Ps
                squared = (diff**2).sum(dim=2) / scale
                loss = (tau * torch.logsumexp(squared / tau, dim=1)).sum()
                v = torch.softmax(squared / tau, dim=1)[:, :, None] * 2 * diff / scale[:, :, None]
                g = q * v - q * (q * v).sum(dim=2, keepdim=True)  # softmax Jacobian times v
                if shared:
                    W.grad = (Zs.T @ g.transpose(0, 1).reshape(n, -1)).reshape(rank, -1, n_classes).permute(1, 0, 2)
                    W.grad = W.grad.contiguous()
                else:
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
    A, c = A.clone(), c.clone()
    A[:, active], c[active] = best_W.permute(1, 0, 2), best_b
    return best, iterations, grad_norm, A, c


def _fit_heads(Z: torch.Tensor, heads: _Heads, settings: ExtrinsicSettings, soft_label: bool = True) -> _HeadResult:
    """Every start map of ``heads.starts`` (plus the soft-label fit from the least-squares start),
    then the refinement from each head's best start; the value is the smallest max error found."""
    candidates: dict[str, torch.Tensor] = {}
    maps: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, (A, c) in heads.starts.items():
        candidates[name] = _errors(Z, A, c, heads.P).max(dim=0).values
        maps[name] = (A, c)
    ce_steps, ce_grad = 0, torch.zeros(heads.P.shape[1], dtype=Z.dtype, device=Z.device)
    if soft_label:
        A, c, ce_steps, ce_grad = _soft_label_fit(Z, heads.P, *heads.starts["least_squares"], settings.max_iter)
        candidates["soft_label"] = _errors(Z, A, c, heads.P).max(dim=0).values
        maps["soft_label"] = (A, c)
    names = tuple(candidates)
    # a head whose every start is NaN (non-finite targets) keeps NaN values and is never "better"
    stacked = torch.stack([candidates[name] for name in names]).nan_to_num(nan=math.inf)  # (S, H)
    winner = stacked.argmin(dim=0)
    heads_index = torch.arange(len(winner), device=Z.device)
    A0 = torch.stack([maps[name][0] for name in names])[winner, :, heads_index].transpose(0, 1)
    c0 = torch.stack([maps[name][1] for name in names])[winner, heads_index]
    refined, refine_steps, refine_grad, A, c = _refine(Z, heads.P, A0.contiguous(), c0, settings)
    candidates["refined"] = refined
    value = torch.minimum(stacked.min(dim=0).values, refined)
    return _HeadResult(value, candidates, winner, names, A, c, ce_steps, ce_grad, refine_steps, refine_grad)


# ---------------------------------------------------------------------------------------------
# all pairs


def _as_tensor(array: np.ndarray, settings: ExtrinsicSettings) -> torch.Tensor:
    return torch.tensor(np.asarray(array), dtype=settings.dtype, device=settings.device)  # a copy: inputs may be read-only


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

    def starts(self, logits: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               lam: float) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``{"composed": (A, c), "least_squares": (A, c)}`` for G classifiers ``weight`` (G, D', C),
        ``bias`` (G, C) with logits (N, G, C) on the target: A (r, G, C), c (G, C).

        ``composed`` is the classifier composed with this pair's map ``A_ij`` (after
        :meth:`fit_target`): the logits are linear in the target, so its coefficients are the map's
        times ``lam W`` (columns of ``W`` beyond the target's width, a stack's padding, meet zeros).
        ``least_squares`` fits the logits themselves by ordinary least squares."""
        n, groups, n_classes = logits.shape
        rank = self.U.shape[1]
        flat = logits.reshape(n, -1)
        # least squares on the design [sqrt(N) U, 1]: U^T 1 = 0 and U^T U = I decouple it
        least_squares = ((self.U.T @ flat / self.root).reshape(rank, groups, n_classes),
                         flat.mean(dim=0).reshape(groups, n_classes))
        coef = lam * torch.einsum("pd,gdc->pgc", self.coef, weight[:, : self.coef.shape[1]])
        composed = (coef[:rank] / self.root, coef[rank] / self.root + lam * bias)
        return {"composed": composed, "least_squares": least_squares}

    def fit_target(self, Y: torch.Tensor, target: Factors) -> float:
        """Fit the map ``A_ij`` to the target's rank-truncated representation (as ``d_aff`` does, with
        the stored weights; by least squares without them); returns its largest residual on the
        target ``Y`` (N, D) itself, ``max_n ||y_n - A_ij(x_n)||``: the value Lemma 5.2's composed
        candidate uses, at most ``sqrt(d_aff^2 + tail^2)`` (tail: the target's
        ``tail_row_norm_max``)."""
        self.design = torch.cat([self.U, self.U.new_full((self.U.shape[0], 1), 1.0 / self.root)], dim=1)
        truncated = target.with_basis(Y).truncated()
        self.coef = self.design.T @ truncated if self.fit is None else self.fit.solve(truncated)
        del truncated
        self.residual_norms = torch.linalg.vector_norm(Y - self.design @ self.coef, dim=1)
        return float(self.residual_norms.max())

    def residual_rows(self, Y: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``y_n - A_ij(x_n)`` for the given examples (after :meth:`fit_target`); columns beyond the fitted
        target's width (the padding of a stack) are 0."""
        width = self.coef.shape[1]
        residual = Y[rows, :width] - self.design[rows] @ self.coef
        return torch.nn.functional.pad(residual, (0, Y.shape[1] - width))


def _classifier_logits(Y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lam: float) -> torch.Tensor:
    """(N, G, C) logits of G classifiers ``weight`` (G, D, C), ``bias`` (G, C) on Y (N, D)."""
    g, d, k = weight.shape
    return lam * ((Y @ weight.permute(1, 0, 2).reshape(d, g * k)).reshape(-1, g, k) + bias)


def _pad(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """Zero rows appended to ``weight`` (..., D, C) up to ``rows`` (targets of different widths share one stack)."""
    extra = rows - weight.shape[-2]
    return weight if extra == 0 else torch.cat([weight, weight.new_zeros((*weight.shape[:-2], extra, weight.shape[-1]))], dim=-2)


def _project_to_ball(weight: torch.Tensor, radius: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest point of ``{W : ||W||_2 <= radius}`` for each (D, C) matrix of ``weight`` (H, D, C):
    singular values clipped at the radius (exact in the spectral and Frobenius norms). Returns the
    projected weights and their spectral norms (H,)."""
    U, S, Vh = torch.linalg.svd(weight, full_matrices=False)
    outside = S[:, 0] > radius
    clipped = torch.minimum(S, radius[:, None])
    projected = torch.where(outside[:, None, None], (U * clipped[:, None, :]) @ Vh, weight)
    return projected, torch.where(outside, clipped[:, 0], S[:, 0])


@dataclass
class _Classifiers:
    """One classifier per head (the worst-case search): weights padded to the stack's width."""

    W: torch.Tensor  # (H, Dmax, C)
    b: torch.Tensor  # (H, C)


class _WorstCaseSearch:
    """Projected gradient ascent on the classifier ``psi'`` of each pair ``i -> j`` (module docstring).

    One instance per source ``i``; heads are its targets ``others``. Target-side products run on the
    stack of all targets' representations (``Y`` (K, N, Dmax), one batched product per step); the
    inner maps are re-fitted per step for all heads at once by :func:`_fit_heads`, warm-started.
    """

    def __init__(self, Z: torch.Tensor, Y: torch.Tensor, y_mean: torch.Tensor, y_scale: torch.Tensor,
                 source: int, others: list[int], pair_maps: dict[int, _PairMaps], settings: ExtrinsicSettings) -> None:
        self.Z, self.Y, self.source, self.others = Z, Y, source, others
        self.y_mean, self.y_scale = y_mean[others], y_scale[others]  # (H, Dmax), (H,)
        self.pair_maps, self.settings = pair_maps, settings
        self.lam = settings.inverse_temperature
        # steps are scored on small working sets (each head's worst examples, warm-started): cheap, and
        # the final classifiers are scored again with the full estimator
        self.step_settings = replace(settings, working_budget=settings.working_set)
        self.tau = settings.temperatures[-1] if settings.temperatures else 0.003

    def logits(self, clf: _Classifiers, group: int = 1) -> torch.Tensor:
        """(N, H * group, C) target logits ``lam (y_n W + b)``: ``group`` classifiers per head (head-major),
        each on its head's target."""
        k, n, width = self.Y.shape
        heads, n_classes = len(self.others), clf.W.shape[2]
        W = self.Y.new_zeros((k, width, group * n_classes))
        W[self.others] = clf.W.reshape(heads, group, width, n_classes).permute(0, 2, 1, 3).reshape(heads, width, -1)
        full = torch.bmm(self.Y, W)  # (K, N, group * C): one batched product over all targets
        full = full[self.others].reshape(heads, n, group, n_classes).permute(1, 0, 2, 3)
        return self.lam * (full.reshape(n, heads * group, n_classes) + clf.b)

    def evaluate(self, clf: _Classifiers, warm: tuple[torch.Tensor, torch.Tensor] | None,
                 settings: ExtrinsicSettings, soft_label: bool, group: int = 1) -> tuple[_HeadResult, torch.Tensor]:
        """The fixed-classifier estimate for each classifier (``group`` per head); NaN for a non-finite one."""
        logits = self.logits(clf, group)
        finite = torch.isfinite(logits).all(dim=(0, 2))
        logits = torch.where(finite[None, :, None], logits, torch.zeros_like(logits))
        heads, width, n_classes = len(self.others), clf.W.shape[1], clf.W.shape[2]
        # a non-finite classifier is scored as NaN below; zeros keep its starts finite meanwhile
        W = torch.where(finite[:, None, None], clf.W, torch.zeros_like(clf.W)).reshape(heads, group, width, n_classes)
        b = torch.where(finite[:, None], clf.b, torch.zeros_like(clf.b)).reshape(heads, group, n_classes)
        per_head = [self.pair_maps[j].starts(logits[:, h * group : (h + 1) * group], W[h], b[h], self.lam)
                    for h, j in enumerate(self.others)]
        starts = {name: (torch.cat([s[name][0] for s in per_head], dim=1), torch.cat([s[name][1] for s in per_head]))
                  for name in ("composed", "least_squares")}
        if warm is not None:
            starts["warm"] = warm
        result = _fit_heads(self.Z, _Heads(torch.softmax(logits, dim=2), starts), settings, soft_label)
        result.value = torch.where(finite, result.value, torch.full_like(result.value, math.nan))
        return result, finite

    def residual_classifiers(self, count: int, radius: torch.Tensor, n_classes: int) -> _Classifiers:
        """``count`` classifiers per head aimed at what the map cannot reproduce (heads h*count..).

        For the examples with the largest residuals ``r_n = y_n - A_ij(x_n)`` of the composed start's
        map: ``W = radius (r_n / ||r_n||) v^T`` with ``v = (e_a - e_b) / sqrt(2)`` a class contrast
        (``||W||_2 = radius``), and the bias putting the midpoint of ``y_n`` and ``A_ij(x_n)`` on the
        decision boundary between classes ``a`` and ``b``: the composed map then errs most there.
        """
        width = self.Y.shape[2]
        Ws, bs = [], []
        for slot, j in enumerate(self.others):
            pair = self.pair_maps[j]
            top = pair.residual_norms.topk(min(count, len(pair.residual_norms))).indices
            residual = pair.residual_rows(self.Y[j], top)  # (count, Dmax); padded columns stay 0
            for k in range(len(top)):
                a, b = k % n_classes, (k + 1) % n_classes
                contrast = residual.new_zeros(n_classes)
                contrast[a], contrast[b] = 2**-0.5, -(2**-0.5)
                direction = residual[k] / torch.linalg.vector_norm(residual[k]).clamp(min=torch.finfo(residual.dtype).tiny)
                W = radius[slot] * direction[:, None] * contrast[None, :]
                middle = self.Y[j, top[k]] - residual[k] / 2
                Ws.append(W)
                bs.append(-(middle @ W))
        if not Ws:
            return _Classifiers(self.Y.new_zeros((0, width, n_classes)), self.Y.new_zeros((0, n_classes)))
        return _Classifiers(torch.stack(Ws), torch.stack(bs))

    def ascent_direction(self, clf: _Classifiers, A: torch.Tensor, c: torch.Tensor) -> _Classifiers:
        """Unit-length ascent direction of the smooth maximum of the errors with the maps fixed.

        By Danskin's theorem the gradient of ``min_psi max_n e_n`` in the classifier is that of
        ``max_n e_n`` at the best map; the smooth maximum's weights stand in for the minimax dual
        weights. The bias is stepped as the mean logit, scaled by the target's RMS centred row norm,
        so that a unit step moves the logits by comparable amounts through ``W`` and ``b``.
        """
        n = self.Z.shape[0]
        P = torch.softmax(self.logits(clf), dim=2)  # (N, H, C)
        diff = P - torch.softmax(_logits(self.Z, A, c), dim=2)
        squared = (diff**2).sum(dim=2)  # (N, H)
        scale = squared.max(dim=0).values.clamp(min=torch.finfo(P.dtype).tiny)
        weights = torch.softmax(squared / (self.tau * scale), dim=0)
        v = weights[:, :, None] * 2 * diff
        g = self.lam * (P * v - P * (P * v).sum(dim=2, keepdim=True))  # (N, H, C): d objective / d logits
        k = self.Y.shape[0]
        G = g.new_zeros((k, n, g.shape[2]))
        G[self.others] = g.permute(1, 0, 2)
        g_sum = g.sum(dim=0)  # (H, C)
        grad_W = torch.bmm(self.Y.transpose(1, 2), G)[self.others] - self.y_mean[:, :, None] * g_sum[:, None, :]
        grad_beta = g_sum * self.y_scale[:, None]
        norm = torch.sqrt((grad_W**2).sum(dim=(1, 2)) + (grad_beta**2).sum(dim=1)).clamp(min=torch.finfo(P.dtype).tiny)
        return _Classifiers(grad_W / norm[:, None, None], grad_beta / norm[:, None])

    def step(self, clf: _Classifiers, direction: _Classifiers, length: torch.Tensor,
             radius: torch.Tensor) -> tuple[_Classifiers, torch.Tensor]:
        """Move ``length`` (H,) along ``direction`` keeping the mean logit's parametrisation, then project."""
        beta = (self.y_mean[:, None, :] @ clf.W).squeeze(1) + clf.b  # mean logit (H, C)
        W, norms = _project_to_ball(clf.W + length[:, None, None] * direction.W, radius)
        beta = beta + (length * self.y_scale)[:, None] * direction.b
        return _Classifiers(W, beta - (self.y_mean[:, None, :] @ W).squeeze(1)), norms

    def run(self, clf: _Classifiers, value: torch.Tensor, A: torch.Tensor, c: torch.Tensor, radius: torch.Tensor,
            observe) -> dict[str, torch.Tensor]:
        """``steps`` accepted-or-halved ascent steps from ``clf`` (value and map known); ``observe(values,
        norms)`` sees every classifier evaluated. Returns the best classifiers, values and maps."""
        settings = self.settings
        heads = len(self.others)
        best = {"W": clf.W.clone(), "b": clf.b.clone(), "value": value.clone(), "A": A.clone(), "c": c.clone()}
        length = settings.search_step_size * radius
        accepted = torch.zeros(heads, dtype=torch.long, device=value.device)
        if settings.search_steps:
            # steps are scored by the warm-started fit: score the start the same way first, so that a
            # step is accepted for a larger distance, not for a less converged inner fit
            result, finite = self.evaluate(clf, (A, c), self.step_settings, soft_label=False)
            lower = finite & (result.value < best["value"])
            best["value"][lower] = result.value[lower]
            best["A"][:, lower], best["c"][lower] = result.A[:, lower], result.c[lower]
        for _ in range(settings.search_steps):
            current = _Classifiers(best["W"], best["b"])
            direction = self.ascent_direction(current, best["A"], best["c"])
            candidate, norms = self.step(current, direction, length, radius)
            result, finite = self.evaluate(candidate, (best["A"], best["c"]), self.step_settings, soft_label=False)
            observe(result.value, norms, finite)
            better = finite & (result.value > best["value"])
            accepted += better.long()
            best["W"][better], best["b"][better] = candidate.W[better], candidate.b[better]
            best["value"][better] = result.value[better]
            best["A"][:, better], best["c"][better] = result.A[:, better], result.c[better]
            length = torch.minimum(torch.where(better, 1.5 * length, 0.5 * length), radius)
            log.debug("search step: %d/%d heads improved; values %s", int(better.sum()), heads,
                      np.array2string(best["value"].cpu().numpy(), precision=4))
        # a value is only as good as its inner fit: score the final classifiers once more with every
        # start (soft-label fit included) and the full refinement, and keep the smaller value
        result, finite = self.evaluate(_Classifiers(best["W"], best["b"]), (best["A"], best["c"]), settings, True)
        log.debug("search final scoring: %s", np.array2string(result.value.cpu().numpy(), precision=4))
        lower = finite & (result.value < best["value"])
        best["value"][lower] = result.value[lower]
        best["A"][:, lower], best["c"][lower] = result.A[:, lower], result.c[lower]
        best["accepted"] = accepted
        best["norm"] = torch.linalg.matrix_norm(best["W"], ord=2)
        return best


@dataclass
class SearchedClassifier:
    """The classifier behind ``d_worst_search[i, j]`` and the affine map attaining its value.

    ``value = max_n || softmax(lam (y_n W + b)) - softmax(x_n linear + bias) ||_2`` exactly, with
    ``x`` encoder ``i``'s and ``y`` encoder ``j``'s representations.
    """

    W: np.ndarray  # (D_j, C)
    b: np.ndarray  # (C,)
    linear: np.ndarray  # (D_i, C): the map into logits
    bias: np.ndarray  # (C,)
    value: float


def _raw_map(factors, A: torch.Tensor, c: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A whitened-coordinates map ``Z A + c`` (Z = sqrt(N) U) as ``x linear + bias`` on raw rows."""
    root = math.sqrt(factors.Q.shape[0])  # Z A + c = [U, 1/sqrt(N)] @ [sqrt(N) A; sqrt(N) c]
    return map_in_original_coordinates(factors, torch.cat([root * A, root * c[None]]))


class _LemmaCheck:
    """Lemma 5.2 for every classifier evaluated: ``d_k(i -> j) <= c(lam) ||W_k||_2 d_aff(i -> j)``.

    Keeps the largest norm per pair (``bound_worst = c(lam) * max_k ||W_k||_2 * d_aff``) and counts
    classifiers that break their own bound (tolerances ``BOUND_RTOL``, ``BOUND_ATOL``). Every
    classifier's candidates include it composed with the map ``A_ij`` rebuilt from the stored
    solver weights, whose largest residual on the target itself is ``rebuilt_ij`` (Lemma 5.2 holds
    exactly with it). ``d_aff`` maps onto the target's rank-truncated representation, so
    ``rebuilt_ij <= sqrt(d_aff_ij^2 + tail_j^2)`` (``tail_j`` the largest row norm the rank rule
    discarded from target ``j``): the bound is checked with ``d_aff_ij + excess_ij``,
    ``excess_ij = max(0, rebuilt_ij - d_aff_ij)``, when ``excess_ij`` is within that allowance (plus
    ``BOUND_RTOL`` of the target's scale for rounding). A larger excess means ``d_aff`` and the stored
    weights disagree (a stale or altered file), and then the bound is checked against ``d_aff`` as
    it stands.
    """

    def __init__(self, count: int, d_aff: np.ndarray | None, lam: float, tail: np.ndarray,
                 scale: np.ndarray) -> None:
        self.d_aff = None if d_aff is None else np.asarray(d_aff, dtype=np.float64)
        self.tail = np.asarray(tail, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.rebuilt = np.zeros((count, count))
        self.c = softmax_lipschitz(lam)
        self.norm_max = np.zeros((count, count))
        self.violations = np.zeros((count, count), dtype=int)
        self.evaluated = np.zeros((count, count), dtype=int)

    def add(self, i: int, j: int, values: np.ndarray, norms: np.ndarray) -> None:
        values, norms = np.asarray(values, dtype=np.float64), np.asarray(norms, dtype=np.float64)
        if values.size == 0:
            return
        self.norm_max[i, j] = max(self.norm_max[i, j], float(norms.max()))
        self.evaluated[i, j] += values.size
        if self.d_aff is not None:
            bound = self.c * norms * (self.d_aff[i, j] + self.excess(i, j))
            self.violations[i, j] += int((values > bound * (1 + BOUND_RTOL) + BOUND_ATOL).sum())

    def allowance(self, i: int, j: int) -> float:
        """How far the rebuilt map's residual may exceed ``d_aff`` (see the class docstring)."""
        d_aff = self.d_aff[i, j]
        return math.sqrt(d_aff**2 + self.tail[j] ** 2) - d_aff + BOUND_RTOL * self.scale[j]

    def excess(self, i: int, j: int) -> float:
        """``max(0, rebuilt - d_aff)`` within the allowance, else 0 (see the class docstring)."""
        if self.d_aff is None:
            return 0.0
        gap = max(0.0, self.rebuilt[i, j] - self.d_aff[i, j])
        return gap if gap <= self.allowance(i, j) else 0.0

    def bound_worst(self) -> np.ndarray | None:
        if self.d_aff is None:
            return None
        bound = self.c * self.norm_max * self.d_aff
        np.fill_diagonal(bound, 0.0)
        return bound


def _finite_classifiers(Y: torch.Tensor, probe_set: ProbeSet, settings: ExtrinsicSettings
                        ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]:
    """The classifiers of ``probe_set`` whose logits on ``Y`` are finite: weights, biases, their
    indices in the set and their spectral norms."""
    weight, bias = _as_tensor(probe_set.weight, settings), _as_tensor(probe_set.bias, settings)
    if weight.shape[0] == 0:
        return weight, bias, np.zeros(0, dtype=int), np.zeros(0)
    finite = torch.isfinite(weight).all(dim=(1, 2)) & torch.isfinite(bias).all(dim=1)
    for block in consecutive_blocks(list(range(weight.shape[0])), [1] * weight.shape[0], 64):
        rows = torch.tensor(block, device=weight.device)
        logits = _classifier_logits(Y, torch.nan_to_num(weight[rows]), torch.nan_to_num(bias[rows]),
                                    settings.inverse_temperature)
        finite[rows] &= torch.isfinite(logits).all(dim=2).all(dim=0)
    keep = torch.nonzero(finite).squeeze(1)
    norms = torch.linalg.matrix_norm(weight[keep], ord=2)
    keep_norm = torch.isfinite(norms)
    keep, norms = keep[keep_norm], norms[keep_norm]
    return weight[keep], bias[keep], keep.cpu().numpy(), norms.cpu().numpy()


class _PhaseClock:
    """Wall and CPU seconds (``time.process_time``: all threads) of consecutive phases, summed into
    ``seconds[phase]`` and ``seconds["cpu_" + phase]``; each ``stop`` ends one phase and starts the next."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.start()

    def start(self) -> None:
        self.wall, self.cpu = time.monotonic(), time.process_time()

    def stop(self, phase: str) -> None:
        self.seconds[phase] += time.monotonic() - self.wall
        self.seconds["cpu_" + phase] += time.process_time() - self.cpu
        self.start()


def extrinsic_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    random_probes: Sequence[ProbeSet] | None = None,
    settings: ExtrinsicSettings | None = None,
    d_aff: np.ndarray | None = None,
) -> ExtrinsicResult:
    """``d_psi`` for every ordered pair, and with ``random_probes`` also ``d_worst`` and ``d_worst_search``.

    ``map_weights`` (K, K, N): the intrinsic solver's weights, ``[i, j]`` for the map ``i -> j``
    (``d_aff_weights.npy``); without them the composed start uses the least-squares map.
    ``random_probes[j]``: encoder ``j``'s random-label classifiers (possibly none: the search then
    starts from the task probe). ``d_aff`` (K, K): the certified values of those maps; with it every
    classifier evaluated is checked against its own Lemma 5.2 bound and ``bound_worst`` is returned.
    See the module docstring.
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
    if d_aff is not None and np.shape(d_aff) != (count, count):
        raise ValueError(f"d_aff must be (K, K) = {(count, count)}, got {np.shape(d_aff)}")
    if settings.search_radius is not None and not settings.search_radius > 0:
        raise ConfigError(f"the worst-case search radius must be > 0, got {settings.search_radius}")
    lam = settings.inverse_temperature
    widths = [rep.shape[1] for rep in representations]
    # all targets in one (K, N, Dmax) stack (zero columns pad narrower encoders): the search's
    # target-side products are one batched product; each encoder's matrix is a view into it
    Y = torch.zeros((count, n, max(widths)), dtype=settings.dtype, device=settings.device)
    for k, rep in enumerate(representations):
        Y[k, :, : widths[k]] = _as_tensor(rep, settings)
    tensors = [Y[k, :, : widths[k]] for k in range(count)]
    task_w = [_as_tensor(p.weight, settings)[None] for p in probes]  # (1, D, C)
    task_b = [_as_tensor(p.bias, settings)[None] for p in probes]
    n_classes = task_w[0].shape[2]
    task_logits = [_classifier_logits(t, w, b, lam) for t, w, b in zip(tensors, task_w, task_b)]
    for j, logits in enumerate(task_logits):
        if not bool(torch.isfinite(logits).all()):
            raise NumericalError(f"the task probe of encoder '{names[j]}' gives non-finite logits on its own "
                                 "representations; refit it (probe weights must be finite and moderate)")
    task_norms = np.array([float(torch.linalg.matrix_norm(w[0], ord=2)) for w in task_w])
    worst_case = random_probes is not None
    y_mean = Y.mean(dim=1)  # (K, Dmax)
    # per encoder (one centred copy at a time): largest and RMS centred row norms
    centred_norms = [torch.linalg.vector_norm(t - y_mean[k, : widths[k]], dim=1) for k, t in enumerate(tensors)]
    y_scale = torch.stack([torch.sqrt((norms**2).mean()) for norms in centred_norms])  # (K,)
    del centred_norms
    # every encoder factorised once (its bases dropped to save memory, rebuilt when it is the source)
    factors_all = [factorise(t, settings.multiplier, settings.dtype, settings.device).without_basis() for t in tensors]
    lemma = _LemmaCheck(count, d_aff, lam, np.array([f.tail_row_norm_max for f in factors_all]),
                        np.array([f.row_norm_max for f in factors_all]))
    drifted: list[str] = []
    randoms: list[tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]] = []
    skipped = np.zeros(count, dtype=int)
    radius = np.zeros(count)
    if worst_case:
        for j in range(count):
            randoms.append(_finite_classifiers(tensors[j], random_probes[j], settings))
            skipped[j] = random_probes[j].weight.shape[0] - len(randoms[j][2])
            if skipped[j]:
                log.warning("encoder '%s': %d of %d random classifiers skipped: their logits or weight norm "
                            "overflow (non-finite)", names[j], skipped[j], random_probes[j].weight.shape[0])
            largest = max([task_norms[j], *randoms[j][3]])
            radius[j] = largest if settings.search_radius is None else settings.search_radius
        if (settings.search_steps or settings.search_candidates) and not any(len(r[2]) for r in randoms):
            log.info("no random classifiers (n_random_classifiers: 0): the worst-case search starts from each "
                     "target's task probe, in the ball of its norm%s",
                     "" if settings.search_radius is None else f" (configured radius {settings.search_radius:g})")
    itemsize = torch.tensor([], dtype=settings.dtype).element_size()
    # a random head costs about ten (N, C) tensors at once, plus its refinement working set
    per_head = itemsize * n_classes * (10 * n + settings.working_set * 4)
    budget = max(1, settings.block_mb * 2**20 // max(per_head, 1))  # heads per block
    d_psi = np.zeros((count, count))
    d_worst = np.zeros((count, count)) if worst_case else None
    d_search = np.zeros((count, count)) if worst_case else None
    worst_index = np.full((count, count), -1, dtype=int) if worst_case else None
    searched: dict[tuple[int, int], SearchedClassifier] = {}
    diagnostics: list[dict[str, object]] = []
    seconds = {f"{kind}{phase}": 0.0 for kind in ("", "cpu_") for phase in ("d_psi", "d_worst", "d_worst_search")}
    clock = _PhaseClock(seconds)
    for i in range(count):
        others = [j for j in range(count) if j != i]
        if not others:
            continue
        clock.start()
        factors = factors_all[i].with_basis(tensors[i])
        design = factors.affine_design()
        rank = design.shape[1] - 1
        Z = design[:, :rank] * math.sqrt(n)
        pair_maps = {j: _PairMaps(design, None if map_weights is None else _as_tensor(map_weights[i, j], settings))
                     for j in others}
        for j in others:
            lemma.rebuilt[i, j] = pair_maps[j].fit_target(tensors[j], factors_all[j])
            if d_aff is not None and map_weights is not None and lemma.rebuilt[i, j] - d_aff[i, j] > lemma.allowance(i, j):
                drifted.append(f"{names[i]} -> {names[j]} ({lemma.rebuilt[i, j]:.6g} vs {d_aff[i, j]:.6g})")
        task_starts = [pair_maps[j].starts(task_logits[j], task_w[j], task_b[j], lam) for j in others]
        heads = _Heads(
            torch.softmax(torch.cat([task_logits[j] for j in others], dim=1), dim=2),
            {name: (torch.cat([s[name][0] for s in task_starts], dim=1), torch.cat([s[name][1] for s in task_starts]))
             for name in ("composed", "least_squares")},
        )
        task = _fit_heads(Z, heads, settings)
        d_psi[i, others] = task.value.cpu().numpy()
        for j in others:
            lemma.add(i, j, d_psi[i, [j]], task_norms[[j]])
        clock.stop("d_psi")
        worst_rows: dict[int, dict[str, object]] = {}
        if worst_case:
            # the search starts from each pair's worst classifier so far (the task probe unless beaten)
            start_W = torch.stack([_pad(task_w[j][0], Y.shape[2]) for j in others])
            start_b = torch.cat([task_b[j] for j in others])
            start_A, start_c = task.A.clone(), task.c.clone()
            counts = [len(randoms[j][2]) for j in others]
            d_worst[i, others] = d_psi[i, others]  # the task probe is one of the classifiers
            for block in consecutive_blocks(others, counts, budget):
                block = [j for j in block if len(randoms[j][2])]
                if not block:
                    continue
                per_target, starts = [], []
                for j in block:
                    logits = _classifier_logits(tensors[j], randoms[j][0], randoms[j][1], lam)
                    per_target.append(logits)
                    starts.append(pair_maps[j].starts(logits, randoms[j][0], randoms[j][1], lam))
                random = _fit_heads(Z, _Heads(
                    torch.softmax(torch.cat(per_target, dim=1), dim=2),
                    {name: (torch.cat([s[name][0] for s in starts], dim=1), torch.cat([s[name][1] for s in starts]))
                     for name in ("composed", "least_squares")},
                ), settings)
                offset = 0
                for j, logits in zip(block, per_target):
                    width = logits.shape[1]
                    values = random.value[offset : offset + width].cpu().numpy()
                    grads = random.refine_grad[offset : offset + width].cpu().numpy()
                    lemma.add(i, j, values, randoms[j][3])
                    best = int(values.argmax())
                    if values[best] > d_worst[i, j]:
                        slot = others.index(j)
                        d_worst[i, j], worst_index[i, j] = float(values[best]), int(randoms[j][2][best])
                        start_W[slot] = _pad(randoms[j][0][best], Y.shape[2])
                        start_b[slot] = randoms[j][1][best]
                        start_A[:, slot], start_c[slot] = random.A[:, offset + best], random.c[offset + best]
                    offset += width
                    worst_rows[j] = {
                        "random_median": float(np.median(values)),
                        "random_soft_label_iterations": random.soft_label_iterations,
                        "random_refine_iterations": random.refine_iterations,
                        "random_refine_grad_norm_max": float(grads.max()),
                    }
            clock.stop("d_worst")
            d_search[i, others] = d_worst[i, others]
            if settings.search_steps or settings.search_candidates:
                search = _WorstCaseSearch(Z, Y, y_mean, y_scale, i, others, pair_maps, settings)

                def observe(values: torch.Tensor, norms: torch.Tensor, finite: torch.Tensor, group: int = 1) -> None:
                    for slot, j in enumerate(others):
                        keep = finite[slot * group : (slot + 1) * group]
                        lemma.add(i, j, values[slot * group : (slot + 1) * group][keep].cpu().numpy(),
                                  norms[slot * group : (slot + 1) * group][keep].cpu().numpy())

                radius_t = torch.as_tensor(radius[others], dtype=settings.dtype, device=settings.device)
                start_W, _ = _project_to_ball(start_W, radius_t)  # only a configured radius can move a start
                start_value = torch.as_tensor(d_worst[i, others], dtype=settings.dtype, device=settings.device)
                if settings.search_radius is not None:  # the projected starts need their own values
                    result, finite = search.evaluate(_Classifiers(start_W, start_b), (start_A, start_c), settings, True)
                    observe(result.value, torch.linalg.matrix_norm(start_W, ord=2), finite)
                    start_value = torch.where(finite, result.value, torch.zeros_like(result.value))
                    start_A, start_c = result.A, result.c
                count_aimed = min(settings.search_candidates, n)
                if count_aimed:  # classifiers aimed at the map's largest residuals: a better start when they win
                    aimed = search.residual_classifiers(count_aimed, radius_t, n_classes)
                    heads = len(others)
                    width = aimed.W.shape[1]
                    aimed_W = aimed.W.reshape(heads, count_aimed, width, n_classes)
                    aimed_b = aimed.b.reshape(heads, count_aimed, n_classes)
                    # chunks of candidates (all targets at once) within the random blocks' memory budget
                    chunk = max(1, min(count_aimed, budget // heads))
                    for first in range(0, count_aimed, chunk):
                        part = _Classifiers(aimed_W[:, first : first + chunk].reshape(-1, width, n_classes),
                                            aimed_b[:, first : first + chunk].reshape(-1, n_classes))
                        group = part.W.shape[0] // heads
                        result, finite = search.evaluate(part, None, settings, True, group)
                        observe(result.value, torch.linalg.matrix_norm(part.W, ord=2), finite, group)
                        values = result.value.nan_to_num(nan=-math.inf).reshape(heads, group)
                        top = values.max(dim=1)
                        pick = torch.arange(heads, device=values.device) * group + top.indices
                        better = top.values > start_value
                        start_W[better], start_b[better] = part.W[pick][better], part.b[pick][better]
                        start_value = torch.where(better, top.values, start_value)
                        start_A[:, better], start_c[better] = result.A[:, pick][:, better], result.c[pick][better]
                best = search.run(_Classifiers(start_W, start_b), start_value, start_A, start_c, radius_t, observe)
                values = best["value"].cpu().numpy()
                improved = values > d_worst[i, others]
                d_search[i, others] = np.where(improved, values, d_worst[i, others])
                for slot, j in enumerate(others):
                    linear, bias = _raw_map(factors, best["A"][:, slot], best["c"][slot])
                    searched[(i, j)] = SearchedClassifier(
                        best["W"][slot, : widths[j]].cpu().numpy(), best["b"][slot].cpu().numpy(), linear, bias,
                        float(values[slot]))
                    worst_rows.setdefault(j, {}).update({
                        "search_accepted_steps": int(best["accepted"][slot]),
                        "search_norm": float(best["norm"][slot]),
                        "search_improved": bool(improved[slot]),
                    })
            clock.stop("d_worst_search")
        for slot, j in enumerate(others):
            row: dict[str, object] = {
                "mapped_from": names[i], "mapped_to": names[j], "d_psi": d_psi[i, j],
                **{name: float(task.candidates[name][slot]) for name in (*STARTS, "refined")},
                "winning_start": task.start_names[int(task.winner[slot])],
                "refined_improved": bool(task.candidates["refined"][slot]
                                         < task.candidates[task.start_names[int(task.winner[slot])]][slot]),
                "soft_label_iterations": task.soft_label_iterations,
                "soft_label_grad_norm": float(task.soft_label_grad[slot]),
                "refine_iterations": task.refine_iterations,
                "refine_grad_norm": float(task.refine_grad[slot]),
                "source_rank": rank,
                "d_aff_rebuilt": lemma.rebuilt[i, j],
                "target_tail": lemma.tail[j],
                "bound_slack": lemma.c * task_norms[j] * lemma.excess(i, j),
                "bound_violations": int(lemma.violations[i, j]),
            }
            if worst_case:
                row["d_worst"] = d_worst[i, j]
                row["worst_classifier"] = "task" if worst_index[i, j] < 0 else f"random_{worst_index[i, j]}"
                row["d_worst_search"] = d_search[i, j]
                row["search_radius"] = max(radius[j], lemma.norm_max[i, j])
                row["classifiers_evaluated"] = int(lemma.evaluated[i, j])
                row["bound_worst_slack"] = lemma.c * lemma.norm_max[i, j] * lemma.excess(i, j)
                row["classifiers_skipped"] = int(skipped[j])
                row.update(worst_rows.get(j, {}))
            diagnostics.append(row)
        log.info("source %d/%d '%s' (rank %d): d_psi %s%s", i + 1, count, names[i], rank,
                 np.array2string(d_psi[i, others], precision=4),
                 "" if d_worst is None else ", d_worst " + np.array2string(d_worst[i, others], precision=4)
                 + ", d_worst_search " + np.array2string(d_search[i, others], precision=4))
    log.info("seconds: %s", {k: round(v, 2) for k, v in seconds.items()})
    if drifted:
        log.warning("%d pairs: the d_aff map rebuilt from the stored solver weights has a largest residual above "
                    "d_aff by more than the target's discarded tail allows (column d_aff_rebuilt): d_aff and the "
                    "weights disagree (a stale or altered file?); Lemma 5.2 is checked against d_aff as it stands: %s",
                    len(drifted), "; ".join(drifted[:5]))
    if worst_case and (np.any(d_worst < d_psi) or np.any(d_search < d_worst)):
        raise NumericalError("d_psi <= d_worst <= d_worst_search broke: a bug, the maxima are over nested sets")
    return ExtrinsicResult(names, d_psi, d_worst, worst_index, diagnostics, seconds, d_search, lemma.bound_worst(),
                           lemma.violations, radius if worst_case else None, skipped if worst_case else None,
                           searched)


def fixed_classifier_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    settings: ExtrinsicSettings | None = None,
) -> ExtrinsicResult:
    """``d_psi`` only (no random classifiers, no search); see :func:`extrinsic_distances`."""
    return extrinsic_distances(representations, probes, names, map_weights, None, settings)
