"""A dense, batched primal-dual interior-point solver for Chebyshev LPs (float64, torch, on the device of
its inputs).

Each member ``b`` of a batch solves, on the rows ``r`` of its mask ``R_b``,

    minimise s over (x, s)  subject to  M_r x - s <= hi_br,  M_r x + s >= lo_br  (r in R_b),  s >= floor,

with the design ``M`` (N, n) shared by every member and the slab ends ``hi``, ``lo`` (B, N) its own
(``+inf``/``-inf`` for an absent side; a row off the mask has neither). ``floor`` keeps every member
bounded, and ``s`` large is always feasible: no member is infeasible or unbounded, and one whose rows
do not bound ``s`` ends at ``s = floor``. The rows are generic ("lo <= M x +- s <= hi"): the two-class
certificate uses ``M = [Z, 1]``, a multi-class relaxation can stack slabs on differences of logits.

Dual: ``y_hi <= 0``, ``y_lo >= 0`` on the rows, ``z_floor >= 0``, with ``M^T (y_hi + y_lo) = 0`` and
``sum |y| + z_floor = 1``, maximising ``sum_r (y_hi,r hi_r + y_lo,r lo_r) + z_floor floor``: for every
feasible ``(x, s)``, ``s >= ``that sum (weak duality), which is what a certificate built on ``y``
rests on. The solver reports the certificate residual ``max |M^T y| / ||y||_1`` of each member.

Method: Mehrotra's predictor-corrector on the inequality form ``G (x, s) + sigma = h``, ``sigma, z >=
0``, with the normal equations ``G^T D G`` (``D = z / sigma``): per iteration one ``M^T D M`` product
(``2 N n^2`` flops per member, batched) and one batched Cholesky of order ``n + 1``. Members that have
converged are masked out of the next iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FLOOR = -50.0  # the default lower bound on s (in the units of hi and lo)
ACTIVE_SLACK = 1e-6  # a half-space with a slack at most this (in the units of hi and lo) is active
DUAL_TOLERANCE = 1e-8  # on max |M^T y| at convergence (sum |y| near 1), before the duals are polished (_polished)


@dataclass
class ChebyshevSolution:
    """The batch's solutions; ``status[b]`` is ``"optimal"``, ``"iteration_limit"`` or ``"numerical"``
    (a Cholesky that failed even regularised); the fields of a non-optimal member are its last iterate."""

    x: torch.Tensor  # (B, n)
    s: torch.Tensor  # (B,)
    y_hi: torch.Tensor  # (B, N), <= 0, zero off the rows
    y_lo: torch.Tensor  # (B, N), >= 0
    iterations: torch.Tensor  # (B,) int64
    status: list[str]
    residual: torch.Tensor  # (B,) max |M^T y| / ||y||_1, 0 where y = 0

    def member(self, b: int) -> ChebyshevSolution:
        """Member ``b`` alone, as a batch of one."""
        one = slice(b, b + 1)
        return ChebyshevSolution(self.x[one], self.s[one], self.y_hi[one], self.y_lo[one], self.iterations[one],
                                 [self.status[b]], self.residual[one])

    @staticmethod
    def stack(parts: list[ChebyshevSolution]) -> ChebyshevSolution:
        """One batch of the members of ``parts``, in order (solved on one design)."""
        def cat(name: str) -> torch.Tensor:
            return torch.cat([getattr(part, name) for part in parts])

        return ChebyshevSolution(cat("x"), cat("s"), cat("y_hi"), cat("y_lo"), cat("iterations"),
                                 [status for part in parts for status in part.status], cat("residual"))


@dataclass
class _State:
    """The iterate of every member: ``x`` (B, n + 1) holds ``(x, s)``; ``sigma``, ``z``, ``h``, ``m`` (B,
    2 N + 1) are the slacks, duals, right-hand sides and row weights (1 on, 0 off) of the hi rows, the
    lo rows and the floor."""

    x: torch.Tensor
    sigma: torch.Tensor
    z: torch.Tensor
    h: torch.Tensor
    m: torch.Tensor


@dataclass(frozen=True)
class ExampleBlocks:
    """A design whose row ``r`` is ``sum_j weights[r, j] (e_j kron examples[index[r]])``: a combination of
    one example's features over ``J`` blocks of columns (the multi-class relaxation's rows, a slab or cut
    on a combination of logits). Its products cost ``N q J`` and its Gram matrix ``J (J + 1) / 2 N q^2``
    instead of ``rows (J q)^2``: per example, the rows' weights are summed first."""

    examples: torch.Tensor  # (N, q)
    index: torch.Tensor  # (R,) int64 into examples
    weights: torch.Tensor  # (R, J)

    @property
    def shape(self) -> tuple[int, int]:
        return self.index.numel(), self.weights.shape[1] * self.examples.shape[1]

    def rows(self, mask: torch.Tensor) -> ExampleBlocks:
        return ExampleBlocks(self.examples, self.index[mask], self.weights[mask])

    def dense(self) -> torch.Tensor:
        """The (R, J q) matrix itself."""
        return (self.weights[:, :, None] * self.examples[self.index][:, None, :]).reshape(self.shape)

    def times(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ design.T`` for ``x`` (b, J q): (b, R)."""
        blocks = x.reshape(x.shape[0], self.weights.shape[1], -1)  # (b, J, q)
        per_example = torch.einsum("nq,bjq->bnj", self.examples, blocks)
        return (per_example[:, self.index, :] * self.weights).sum(dim=2)

    def _per_example(self, v: torch.Tensor) -> torch.Tensor:
        """``sum_{r: index[r] = n} v_r weights[r]`` (b, N, J)."""
        out = v.new_zeros((v.shape[0], self.examples.shape[0], self.weights.shape[1]))
        return out.index_add_(1, self.index, v[:, :, None] * self.weights)

    def transposed_times(self, v: torch.Tensor) -> torch.Tensor:
        """``v @ design`` for ``v`` (b, R): (b, J q)."""
        return torch.einsum("bnj,nq->bjq", self._per_example(v), self.examples).reshape(v.shape[0], -1)

    def gram(self, d: torch.Tensor) -> torch.Tensor:
        """``design^T diag(d) design`` per member (b, J q, J q)."""
        J, q = self.weights.shape[1], self.examples.shape[1]
        pair = (self.weights[:, :, None] * self.weights[:, None, :]).reshape(len(self.index), J * J)
        summed = d.new_zeros((d.shape[0], self.examples.shape[0], J * J)).index_add_(1, self.index, d[:, :, None] * pair)
        K = d.new_empty((d.shape[0], J * q, J * q))
        for j in range(J):
            for k in range(j, J):
                block = (self.examples.T[None] * summed[:, None, :, j * J + k]) @ self.examples
                K[:, j * q:(j + 1) * q, k * q:(k + 1) * q] = block
                K[:, k * q:(k + 1) * q, j * q:(j + 1) * q] = block.transpose(1, 2)
        return K


AnyDesign = torch.Tensor | ExampleBlocks


def _times(design: AnyDesign, x: torch.Tensor) -> torch.Tensor:
    """``x @ design.T``."""
    return design.times(x) if isinstance(design, ExampleBlocks) else x @ design.T


def _transposed_times(design: AnyDesign, v: torch.Tensor) -> torch.Tensor:
    """``v @ design``."""
    return design.transposed_times(v) if isinstance(design, ExampleBlocks) else v @ design


def _gram(design: AnyDesign, d: torch.Tensor) -> torch.Tensor:
    """``design^T diag(d) design`` per member, ``d >= 0`` (b, R)."""
    if isinstance(design, ExampleBlocks):
        return design.gram(d)
    scaled = design.unsqueeze(0) * d.sqrt().unsqueeze(2)
    return scaled.transpose(1, 2) @ scaled


def _apply_g(design: AnyDesign, x: torch.Tensor) -> torch.Tensor:
    """``G (x, s)`` for a batch ``x`` (b, n + 1): the rows ``M x - s``, ``-M x - s`` and ``-s``."""
    u = _times(design, x[:, :-1])
    s = x[:, -1:]
    return torch.cat([u - s, -u - s, -s], dim=1)


def _apply_gt(design: AnyDesign, v: torch.Tensor) -> torch.Tensor:
    """``G^T v`` for a batch ``v`` (b, 2 N + 1)."""
    n = design.shape[0]
    return torch.cat([_transposed_times(design, v[:, :n] - v[:, n:2 * n]), -v.sum(dim=1, keepdim=True)], dim=1)


def _normal_matrix(design: AnyDesign, d: torch.Tensor) -> torch.Tensor:
    """``G^T diag(d) G`` (b, n + 1, n + 1): the ``M^T diag(d_hi + d_lo) M`` block is the dense product."""
    n = design.shape[0]
    d_hi, d_lo = d[:, :n], d[:, n:2 * n]
    columns = design.shape[1]
    K = d.new_empty((d.shape[0], columns + 1, columns + 1))
    K[:, :columns, :columns] = _gram(design, d_hi + d_lo)
    cross = _transposed_times(design, d_lo - d_hi)
    K[:, :columns, columns] = cross
    K[:, columns, :columns] = cross
    K[:, columns, columns] = d.sum(dim=1)
    return K


def _factor(K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(L, ok)``: the Cholesky factors of a batch, a member that fails regularised by growing
    multiples of its mean diagonal (near the optimum ``D`` spans many orders of magnitude)."""
    L, info = torch.linalg.cholesky_ex(K)
    ok = info == 0
    eye = torch.eye(K.shape[1], dtype=K.dtype, device=K.device)
    for shift in (1e-13, 1e-10, 1e-7):
        if bool(ok.all()):
            break
        bad = torch.nonzero(~ok).flatten()
        scale = K[bad].diagonal(dim1=1, dim2=2).mean(dim=1)[:, None, None]
        retry, info = torch.linalg.cholesky_ex(K[bad] + shift * scale * eye)
        L[bad] = retry
        ok[bad] = info == 0
    return L, ok


def _direction(design: AnyDesign, L: torch.Tensor, st: _State, rp: torch.Tensor, rd: torch.Tensor,
               rc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Newton direction ``(dx, dsigma, dz)`` for the complementarity target ``rc`` (``sigma z``'s
    change), by the normal equations."""
    t1 = st.m * (rc + st.z * rp) / st.sigma
    dx = torch.cholesky_solve((-rd - _apply_gt(design, t1)).unsqueeze(2), L).squeeze(2)
    g_dx = _apply_g(design, dx)
    dsigma = (-rp - g_dx) * st.m
    dz = st.m * (t1 + st.z / st.sigma * g_dx)
    return dx, dsigma, dz


def _step(v: torch.Tensor, dv: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The largest step in ``[0, 1]`` keeping ``v + a dv >= 0`` on the weighted entries, per member (b, 1)."""
    ratio = torch.where((dv < 0) & (m > 0), -v / dv, torch.full_like(v, torch.inf))
    return ratio.min(dim=1, keepdim=True).values.clamp(max=1.0)


def _start(design: AnyDesign, hi: torch.Tensor, lo: torch.Tensor, rows: torch.Tensor, floor: float,
           start: torch.Tensor | None) -> _State:
    """A strictly feasible primal start (``x`` the given maps, ``s`` one above the largest violation) and
    nearly feasible duals summing to 1 (:func:`_start_duals`)."""
    B, n = hi.shape
    m = torch.cat([rows & hi.isfinite(), rows & lo.isfinite(), rows.new_ones((B, 1))], dim=1).to(hi.dtype)
    h = torch.cat([hi, -lo, hi.new_full((B, 1), -floor)], dim=1)
    h = torch.where(m > 0, h, torch.zeros_like(h))
    x = hi.new_zeros((B, design.shape[1] + 1))
    if start is not None:
        x[:, :-1] = start
    over = torch.where(m > 0, _apply_g(design, x) - h, torch.full_like(h, -torch.inf))[:, :-1]
    worst = over.max(dim=1).values if over.shape[1] else hi.new_full((B,), -torch.inf)
    x[:, -1] = torch.maximum(worst, hi.new_full((B,), floor + 1.0)) + 1.0
    sigma = torch.where(m > 0, h - _apply_g(design, x), torch.ones_like(h))
    return _State(x, sigma, _start_duals(m), h, m)


def _start_duals(m: torch.Tensor) -> torch.Tensor:
    """Equal duals on both sides of each two-sided row (``M^T (z_hi - z_lo) = 0`` exactly), a small
    share on one-sided rows, the rest on the floor: a start this close to dual feasibility keeps the
    first steps from driving ``s`` up by orders of magnitude where the rows leave ``s`` (nearly)
    unbounded, as uniform duals can."""
    n = (m.shape[1] - 1) // 2
    both = m[:, :n] * m[:, n:2 * n]
    one = m[:, :2 * n] - torch.cat([both, both], dim=1)
    pairs = both.sum(dim=1, keepdim=True)
    singles = one.sum(dim=1, keepdim=True)
    pair_share = torch.where(pairs > 0, torch.full_like(pairs, 0.9), torch.zeros_like(pairs))
    single_share = torch.where(singles > 0, torch.full_like(singles, 0.05), torch.zeros_like(singles))
    z = (torch.cat([both, both], dim=1) * pair_share / (2 * pairs).clamp(min=1.0)
         + one * single_share / singles.clamp(min=1.0))
    return torch.cat([z, 1.0 - pair_share - single_share], dim=1)


def _converged(design: AnyDesign, st: _State, tol: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(done, rp, rd)`` of a batch: primal residual within ``tol`` of the bounds' size, the stationarity
    of ``s`` and the complementarity gap ``sigma . z`` within ``tol``, and the stationarity of ``x``
    within DUAL_TOLERANCE or at the rounding floor of ``M^T z`` (complementarity below ``tol^2`` a row:
    further iterations only lose accuracy). The duals are then polished (:func:`_polished`) and their
    certificate residual reported."""
    rp = (_apply_g(design, st.x) + st.sigma - st.h) * st.m
    c = torch.zeros_like(st.x)
    c[:, -1] = 1.0
    rd = _apply_gt(design, st.z) + c
    scale = 1.0 + (st.h * st.m).abs().max(dim=1).values
    complementarity = (st.sigma * st.z * st.m).sum(dim=1)
    stationary = ((rd[:, :-1].abs().max(dim=1).values <= DUAL_TOLERANCE)
                  | (complementarity <= tol * tol * st.m.sum(dim=1)))
    done = ((rp.abs().max(dim=1).values <= tol * scale) & stationary & (rd[:, -1].abs() <= tol)
            & (complementarity <= tol * (1.0 + st.x[:, -1].abs())))
    return done, rp, rd


def _iterate(design: AnyDesign, st: _State, rp: torch.Tensor, rd: torch.Tensor) -> torch.Tensor:
    """One predictor-corrector step of a batch, in place; False where the Cholesky failed (no step)."""
    d = st.m * st.z / st.sigma
    L, ok = _factor(_normal_matrix(design, d))
    count = st.m.sum(dim=1, keepdim=True)
    mu = (st.sigma * st.z).sum(dim=1, keepdim=True) / count
    dx, dsigma, dz = _direction(design, L, st, rp, rd, -st.sigma * st.z)
    primal, dual = _step(st.sigma, dsigma, st.m), _step(st.z, dz, st.m)
    mu_affine = ((st.sigma + primal * dsigma) * (st.z + dual * dz)).sum(dim=1, keepdim=True) / count
    centring = (mu_affine / mu) ** 3
    dx, dsigma, dz = _direction(design, L, st, rp, rd, (-st.sigma * st.z - dsigma * dz + centring * mu) * st.m)
    primal = (0.99 * _step(st.sigma, dsigma, st.m)).clamp(max=1.0) * ok[:, None]
    dual = (0.99 * _step(st.z, dz, st.m)).clamp(max=1.0) * ok[:, None]
    st.x += primal * dx
    st.sigma += primal * dsigma
    st.z += dual * dz
    return ok


def certificate_residual(design: AnyDesign, y_hi: torch.Tensor, y_lo: torch.Tensor) -> torch.Tensor:
    """``max |M^T y| / ||y||_1`` per member (0 where ``y = 0``)."""
    y = y_hi + y_lo
    total = y_hi.abs().sum(dim=1) + y_lo.abs().sum(dim=1)
    return torch.where(total > 0, _transposed_times(design, y).abs().max(dim=1).values / total.clamp(min=1e-300),
                       torch.zeros_like(total))


def solve_chebyshev(design: AnyDesign, hi: torch.Tensor, lo: torch.Tensor, rows: torch.Tensor | None = None,
                    floor: float = FLOOR, start: torch.Tensor | None = None, tol: float = 1e-9,
                    max_iterations: int = 80) -> ChebyshevSolution:
    """Solve the batch's LPs (module docstring). ``design`` (N, n), ``hi``/``lo`` (B, N) float64 on one
    device, ``rows`` (B, N) bool (default all), ``start`` (B, n) maps to start from (speed only)."""
    if bool(hi.isnan().any() | lo.isnan().any()):
        raise ValueError("a slab end is NaN: absent sides are +inf (hi) and -inf (lo)")
    B, N = hi.shape
    rows = torch.ones((B, N), dtype=torch.bool, device=hi.device) if rows is None else rows
    used = rows.any(dim=0)
    if bool(used.all()):
        return _solve_on_rows(design, hi, lo, rows, floor, start, tol, max_iterations)
    # only the rows some member uses enter the products
    subset = design.rows(used) if isinstance(design, ExampleBlocks) else design[used]
    part = _solve_on_rows(subset, hi[:, used], lo[:, used], rows[:, used], floor, start, tol, max_iterations)
    y_hi, y_lo = hi.new_zeros((B, N)), hi.new_zeros((B, N))
    y_hi[:, used], y_lo[:, used] = part.y_hi, part.y_lo
    return ChebyshevSolution(part.x, part.s, y_hi, y_lo, part.iterations, part.status, part.residual)


def _solve_on_rows(design: AnyDesign, hi: torch.Tensor, lo: torch.Tensor, rows: torch.Tensor, floor: float,
                   start: torch.Tensor | None, tol: float, max_iterations: int) -> ChebyshevSolution:
    """The predictor-corrector loop of :func:`solve_chebyshev` on every row of ``design``."""
    B, N = hi.shape
    st = _start(design, hi, lo, rows, floor, start)
    iterations = torch.zeros(B, dtype=torch.int64, device=hi.device)
    status = ["iteration_limit"] * B
    live = torch.arange(B, device=hi.device)
    for _ in range(max_iterations + 1):
        if live.numel() == 0:
            break
        part = _State(st.x[live], st.sigma[live], st.z[live], st.h[live], st.m[live])
        done, rp, rd = _converged(design, part, tol)
        for b in live[done].tolist():
            status[b] = "optimal"
        keep = ~done
        if _ == max_iterations or not bool(keep.any()):
            break
        part = _State(part.x[keep], part.sigma[keep], part.z[keep], part.h[keep], part.m[keep])
        ok = _iterate(design, part, rp[keep], rd[keep])
        live = live[keep]
        st.x[live], st.sigma[live], st.z[live] = part.x, part.sigma, part.z
        iterations[live] += 1
        for b in live[~ok].tolist():
            status[b] = "numerical"
        live = live[ok]
    y_hi, y_lo = _polished(design, -st.z[:, :N], st.z[:, N:2 * N])
    return ChebyshevSolution(st.x[:, :-1], st.x[:, -1], y_hi, y_lo, iterations, status,
                             certificate_residual(design, y_hi, y_lo))


def _polished(design: AnyDesign, y_hi: torch.Tensor, y_lo: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The duals corrected to ``M^T y = 0`` to rounding: the smallest change in the metric of ``|y|``,
    ``y <- y (1 -+ M v)`` with ``M^T |y| M v = M^T y`` (signs kept, zeros stay zero). The interior point's
    own ``M^T y`` stalls at the normal equations' conditioning near the optimum. Kept where it lowers
    the certificate residual."""
    weight = y_hi.abs() + y_lo.abs()
    L, ok = _factor(_gram(design, weight))
    v = torch.cholesky_solve(_transposed_times(design, y_hi + y_lo).unsqueeze(2), L).squeeze(2)
    shift = _times(design, v)
    new_hi, new_lo = y_hi * (1 + shift).clamp(min=0.0), y_lo * (1 - shift).clamp(min=0.0)
    better = ok & (certificate_residual(design, new_hi, new_lo) < certificate_residual(design, y_hi, y_lo))
    return torch.where(better[:, None], new_hi, y_hi), torch.where(better[:, None], new_lo, y_lo)


def steepest_optimal_dual(design: AnyDesign, solution: ChebyshevSolution, hi: torch.Tensor, lo: torch.Tensor,
                          hi_rate: torch.Tensor, lo_rate: torch.Tensor, tol: float = 1e-9,
                          max_iterations: int = 40) -> ChebyshevSolution:
    """Purification: among the optimal duals of ``solution`` (an interior point's are the centre of the
    optimal face), one that maximises the dual objective's rate ``sum y_hi hi_rate + y_lo lo_rate`` when
    the slab ends move at the given rates (``hi_rate``/``lo_rate`` (B, N), finite on the rows). It is
    the dual of the same kind of LP on the active half-spaces (those whose dual exceeds their slack),
    with the rates as slab ends: any of its duals is dual feasible for the original LP and supported on
    half-spaces active at ``solution``'s primal, hence optimal there; a vertex where the face is not a
    point. A parametric LP in ``t`` (slab ends ``hi(t)``, ``lo(t)``) takes the Newton step of this dual."""
    u, s = _times(design, solution.x), solution.s[:, None]
    # active: a slack below its dual or near zero (a row of the face whose duals vanish at its centre)
    active_hi = hi - (u - s) <= (-solution.y_hi).clamp(min=ACTIVE_SLACK)
    active_lo = (u + s) - lo <= solution.y_lo.clamp(min=ACTIVE_SLACK)
    inf = torch.full_like(hi_rate, torch.inf)
    # scaled to at most 1 (the duals do not change): the rate is then at least -1 (sum |y| = 1), and a
    # floor of -2 never binds a bounded face
    largest = torch.cat([hi_rate.masked_fill(~active_hi, 0.0), lo_rate.masked_fill(~active_lo, 0.0)], 1).abs()
    largest = largest.max(dim=1, keepdim=True).values.clamp(min=1e-300)
    hi_rate, lo_rate = torch.where(active_hi, hi_rate / largest, inf), torch.where(active_lo, lo_rate / largest, -inf)
    return solve_chebyshev(design, hi_rate, lo_rate, active_hi | active_lo, floor=-2.0, tol=tol,
                           max_iterations=max_iterations)
