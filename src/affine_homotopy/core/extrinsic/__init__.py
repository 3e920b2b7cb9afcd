"""Extrinsic (task-level) distances through linear softmax classifiers, for explicit ordered pairs.

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
    did, :func:`affine_homotopy.core.probes.fit_random_probes_sgd`). The task probe is one of them and
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

Every fixed-classifier distance (``d_psi``, and each classifier of ``d_worst`` and the search) is an
interval ``[lower, upper]``; the reported value is ``upper``, attained by an explicit affine map.

Two classes (SST-2, MRPC, RTE, CoLA, QQP): certified (:mod:`.binary`)
    The problem is quasiconvex: for each level the feasible maps form a polyhedron. A Chebyshev LP
    on a working set (HiGHS, warm-started) closes the interval to ``tol`` relative
    (``upper - lower <= tol * upper``) or to the absolute floor ``upper <= atol`` (an exact fit
    up to float rounding). ``d_worst``'s maximum is certified the same way: only classifiers whose
    upper bound is above the best certified lower bound are solved exactly, so
    ``d_worst_lower <= max_k d_k <= d_worst`` with a gap within ``tol``. The files ``*_lower.csv``
    hold the lower bounds and the diagnostics the gap per pair. The searched classifiers are scored
    by the same certified values, and a search step is accepted only when it raises the value by
    more than ``search_accept_rtol`` (default 1 %), so the path does not hinge on rounding.

More classes (MNLI): the local search below, upper bounds without a certificate
    (``*_lower`` is NaN). A refinement that makes no progress from its best start is restarted from
    the other starts, and counted in the log.

The local estimator (multi-class tasks; on two classes its starts 1-3 seed the LP; every
candidate map is evaluated on all examples, so every number is attained by an actual map):

1. *composed*: ``psi'_j o A_ij`` with ``A_ij`` the certified minimax affine map ``i -> j`` of the
   intrinsic stage, rebuilt from its solver weights (the weighted least-squares fit of
   :func:`affine_homotopy.core.intrinsic.affine_map`, batched here over all classifiers of a pair);
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
its centred column space after the rank rule, from :func:`affine_homotopy.core.linalg.factorise`, the
intrinsic stage's factorisation), which is the same family of affine maps but well conditioned. For
one source, all classifiers of all targets form one multi-head problem (the losses separate), so
each iteration is a couple of ``N x rank x (heads * C)`` matrix products; each source is
factorised once and each pair's weighted least squares once. The engine takes an explicit list of
ordered pairs (``pairs``), so a single pair costs a single pair. The task probes (``d_psi``), the
random-label probes and the search are separate problems, so ``d_psi`` does not depend on the
number of random classifiers; random-label heads are processed in blocks of at most ``block_mb``
of working memory (blocks only share the refinement's line search). The search's target-side
products run on one (K, N, D) stack of all encoders' representations (one batched product per step).
"""

from .bounds import (
    BOUND_ATOL,
    BOUND_RTOL,
    check_bounds,
    lemma_bound,
    softmax_lipschitz,
    tightness_summary,
    worst_case_summary,
)
from .binary import CertifiedDistance
from .engine import ExtrinsicResult, extrinsic_distances, fixed_classifier_distances
from .search import SearchedClassifier
from .settings import ExtrinsicSettings

__all__ = [
    "BOUND_ATOL", "BOUND_RTOL", "CertifiedDistance", "ExtrinsicResult", "ExtrinsicSettings", "SearchedClassifier",
    "check_bounds", "extrinsic_distances", "fixed_classifier_distances", "lemma_bound", "softmax_lipschitz",
    "tightness_summary", "worst_case_summary",
]
