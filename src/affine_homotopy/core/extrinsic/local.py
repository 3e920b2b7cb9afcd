"""The local estimator of fixed-classifier distances (docs/method.md), many heads per source: every map
is scored on all examples, so every value is an upper bound attained by a map."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .settings import ExtrinsicSettings

STARTS = ("composed", "least_squares", "soft_label")
# errors below this are float rounding of an exact fit: refining them cannot help
REFINE_FLOOR = 1e-7


@dataclass
class Heads:
    """Fixed-classifier problems sharing one source: targets ``P`` (N, H, C) and start maps."""

    P: torch.Tensor
    starts: dict[str, tuple[torch.Tensor, torch.Tensor]]  # name -> (A (r, H, C), c (H, C))


@dataclass
class HeadResult:
    """Values of a batch of heads: ``upper`` attained by the maps ``(A, c)``, ``lower`` its certified
    lower bound (NaN: none; only the certified two-class solver gives one)."""

    upper: torch.Tensor  # (H,) smallest max error found
    candidates: dict[str, torch.Tensor]  # start name or "refined" -> (H,) its max error
    winner: torch.Tensor  # (H,) index into start_names
    start_names: tuple[str, ...]
    A: torch.Tensor  # (r, H, C) the map attaining `upper`
    c: torch.Tensor  # (H, C)
    soft_label_iterations: int
    soft_label_grad: torch.Tensor  # (H,)
    refine_iterations: int
    refine_grad: torch.Tensor  # (H,)
    stalled: torch.Tensor | None = None  # (H,) bool: the refinement from the best start made no progress
    restarted_improved: torch.Tensor | None = None  # (H,) bool: a restart from another start then did
    lower: torch.Tensor | None = None  # (H,) certified lower bounds, NaN: none
    lps: np.ndarray | None = None  # (H,) LPs per certified head
    stop: list[str] | None = None  # per head: "local", or the certificate's stopping reason

    def __post_init__(self) -> None:
        heads = self.upper.shape[0]
        if self.lower is None:
            self.lower = torch.full_like(self.upper, math.nan)
            self.lps, self.stop = np.zeros(heads, dtype=int), ["local"] * heads


def logits_of(Z: torch.Tensor, A: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(N, H, C) logits of every head: ``Z @ A[:, h] + c[h]``; ``A`` (r, H, C)."""
    r, h, k = A.shape
    return (Z @ A.reshape(r, h * k)).reshape(-1, h, k) + c


def errors_of(Z: torch.Tensor, A: torch.Tensor, c: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """(N, H) L2 distance between the heads' probabilities and the targets, per example."""
    return torch.linalg.vector_norm(torch.softmax(logits_of(Z, A, c), dim=2) - P, dim=2)


def soft_label_fit(
    Z: torch.Tensor, P: torch.Tensor, A0: torch.Tensor, c0: torch.Tensor, max_iter: int, tol: float = 1e-9
) -> tuple[torch.Tensor, torch.Tensor, int, torch.Tensor]:
    """FISTA on the mean soft-label cross entropy of every head (step 2 = ``1/L``: ``Z^T Z = N I``, ``Z^T 1 =
    0``); returns A, c, iterations, grad norms. Momentum restarts per head keep the heads independent."""
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
        G = (torch.softmax(logits_of(Z, a_A, a_c), dim=2) - (P if every else P[:, active])) / n  # (N, h, C)
        g_A = (Z.T @ G.reshape(n, -1)).reshape(a_A.shape)
        g_c = G.sum(dim=0)
        norm = torch.sqrt((g_A**2).sum(dim=(0, 2)) + (g_c**2).sum(dim=1))
        grad_norm[active] = norm
        going = norm > tol
        if not bool(going.any()):
            break
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


def refine(
    Z: torch.Tensor, P: torch.Tensor, A: torch.Tensor, c: torch.Tensor, settings: ExtrinsicSettings,
    first_step: float = 1.0,
) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Annealed smooth-max refinement (*refined*): the best values (H,), iterations, gradient norms and
    maps ``A`` (r, H, C), ``c`` (H, C). Rounds are short: a long run on a small working set drives the
    examples outside it up."""
    n = P.shape[0]
    errors = errors_of(Z, A, c, P)
    best = errors.max(dim=0).values
    grad_norm = torch.zeros_like(best)
    active = torch.nonzero(best > REFINE_FLOOR).squeeze(1)
    if active.numel() == 0 or Z.shape[1] == 0 or not settings.temperatures or settings.rounds == 0:
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
    # evaluation instead of h gathered copies of Z in a batched product
    shared = k == n
    for tau in settings.temperatures:
        for _ in range(settings.rounds):
            W, b, steps, grad_norm[active] = refine_round(Z, P_active, best_W, best_b, best_errors, best_active,
                                                           k, tau, shared, settings, first_step)
            iterations += steps
            errors = errors_of(Z, W.permute(1, 0, 2).contiguous(), b, P_active)
            value = errors.max(dim=0).values
            better = value < best_active  # NaN (a diverged head) never counts as better
            best_W[better], best_b[better] = W[better], b[better]
            best_errors[:, better] = errors[:, better]
            best_active = torch.where(better, value, best_active)
    best[active] = best_active
    A, c = A.clone(), c.clone()
    A[:, active], c[active] = best_W.permute(1, 0, 2), best_b
    return best, iterations, grad_norm, A, c


def refine_round(Z: torch.Tensor, P_active: torch.Tensor, best_W: torch.Tensor, best_b: torch.Tensor,
                  best_errors: torch.Tensor, best_active: torch.Tensor, k: int, tau: float, shared: bool,
                  settings: ExtrinsicSettings, first_step: float
                  ) -> tuple[torch.Tensor, torch.Tensor, int, torch.Tensor]:
    """One round of :func:`refine` from each active head's best map on its ``k`` worst examples: the
    round's maps, L-BFGS iterations and final gradient norms (h,)."""
    n, _, n_classes = P_active.shape
    rank = Z.shape[1]
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
    factor = base = None
    if k < rank and not shared:
        gram = torch.bmm(Zs, Zs.transpose(1, 2))
        eye = torch.eye(k, dtype=Z.dtype, device=Z.device)
        ridge = 1e-10 * gram.diagonal(dim1=1, dim2=2).mean(dim=1)[:, None, None] * eye
        factor, info = torch.linalg.cholesky_ex(gram + ridge)
        if bool((info > 0).any()):
            factor = torch.linalg.cholesky(gram + 1e3 * ridge)
        base = torch.bmm(Zs, best_W) + best_b[:, None, :]
        W = torch.zeros((best_W.shape[0], k, n_classes), dtype=Z.dtype, device=Z.device)
        b = torch.zeros_like(best_b)
    else:
        W, b = best_W.clone(), best_b.clone()
    optimizer = torch.optim.LBFGS([W, b], lr=first_step, max_iter=settings.refine_iter, history_size=10,
                                  tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")
    closure = _smooth_max_closure(W, b, Zs, Ps, scale, tau, factor, base, shared)
    optimizer.step(closure)
    steps = int(optimizer.state[optimizer._params[0]].get("n_iter", 0))
    closure()
    grad_norm = torch.sqrt((W.grad**2).sum(dim=(1, 2)) + (b.grad**2).sum(dim=1))
    if factor is not None:  # back to a map on all examples
        coefficients = torch.linalg.solve_triangular(factor.transpose(1, 2), W, upper=True)
        W = best_W + torch.bmm(Zs.transpose(1, 2), coefficients)
        b = best_b + b
    return W, b, steps, grad_norm


def _smooth_max_closure(W: torch.Tensor, b: torch.Tensor, Zs: torch.Tensor, Ps: torch.Tensor, scale: torch.Tensor,
                        tau: float, factor: torch.Tensor | None, base: torch.Tensor | None, shared: bool
                        ) -> Callable[[], torch.Tensor]:
    """L-BFGS's closure: ``sum_h tau logsumexp(e_hn^2 / (s_h tau))`` over the working sets, with its
    gradient written into ``W.grad`` and ``b.grad`` by hand (autograd's overhead dominates on these
    small batched problems). ``factor``/``base``: the row-span variables (``W`` is then ``beta``)."""
    kernel = factor is not None

    def closure() -> torch.Tensor:
        if kernel:
            logits = base + torch.bmm(factor, W) + b[:, None, :]
        elif shared:
            (n, rank), (heads_now, _, n_classes) = Zs.shape, W.shape
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
            n, rank = Zs.shape
            W.grad = (Zs.T @ g.transpose(0, 1).reshape(n, -1)).reshape(rank, -1, W.shape[2]).permute(1, 0, 2)
            W.grad = W.grad.contiguous()
        else:
            W.grad = torch.bmm((factor if kernel else Zs).transpose(1, 2), g)
        b.grad = g.sum(dim=1)
        return loss

    return closure


def _gather(maps: dict[str, tuple[torch.Tensor, torch.Tensor]], names: tuple[str, ...], pick: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head ``h`` the map of start ``names[pick[h]]``: (A (r, H, C), c (H, C))."""
    heads_index = torch.arange(len(pick), device=pick.device)
    A = torch.stack([maps[name][0] for name in names])[pick, :, heads_index].transpose(0, 1)
    c = torch.stack([maps[name][1] for name in names])[pick, heads_index]
    return A.contiguous(), c


def fit_heads(Z: torch.Tensor, heads: Heads, settings: ExtrinsicSettings, soft_label: bool = True,
              refine_heads: bool = True) -> HeadResult:
    """Every start (and the soft-label fit), then the refinement from each head's best start
    (``refine_heads=False``: the best start). A refinement without progress is a stall, not a minimum
    (L-BFGS's line search can fail on one rounding of the inputs and succeed on another): it is restarted."""
    candidates: dict[str, torch.Tensor] = {}
    maps: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, (A, c) in heads.starts.items():
        candidates[name] = errors_of(Z, A, c, heads.P).max(dim=0).values
        maps[name] = (A, c)
    ce_steps, ce_grad = 0, torch.zeros(heads.P.shape[1], dtype=Z.dtype, device=Z.device)
    if soft_label:
        A, c, ce_steps, ce_grad = soft_label_fit(Z, heads.P, *heads.starts["least_squares"], settings.max_iter)
        candidates["soft_label"] = errors_of(Z, A, c, heads.P).max(dim=0).values
        maps["soft_label"] = (A, c)
    names = tuple(candidates)
    # a head whose every start is NaN (non-finite targets) keeps NaN values and is never "better"
    stacked = torch.stack([candidates[name] for name in names]).nan_to_num(nan=math.inf)  # (S, H)
    order = stacked.argsort(dim=0, stable=True)  # (S, H): each head's starts, best first
    winner = order[0]
    best_start = stacked.min(dim=0).values
    A0, c0 = _gather(maps, names, winner)
    if not refine_heads:
        zero = torch.zeros_like(best_start)
        return HeadResult(best_start, candidates, winner, names, A0, c0, ce_steps, ce_grad, 0, zero)
    refined, refine_steps, refine_grad, A, c = refine(Z, heads.P, A0, c0, settings)
    stalled = (refined >= best_start * (1 - 1e-9)) & (best_start > REFINE_FLOOR) & torch.isfinite(best_start)
    restarted_improved = torch.zeros_like(stalled)
    for rank, first_step in [(0, 0.1)] + [(k, 1.0) for k in range(1, len(names))]:
        if not bool(stalled.any()):
            break
        heads_now = torch.nonzero(stalled).squeeze(1)
        A_start, c_start = _gather(maps, names, order[rank])
        again, steps, grads, A_again, c_again = refine(
            Z, heads.P[:, heads_now], A_start[:, heads_now].contiguous(), c_start[heads_now], settings, first_step)
        refine_steps += steps
        better = again < refined[heads_now]
        chosen = heads_now[better]
        refined[chosen], refine_grad[chosen] = again[better], grads[better]
        A[:, chosen], c[chosen] = A_again[:, better], c_again[better]
        restarted_improved[chosen] = True
    candidates["refined"] = refined
    value = torch.minimum(best_start, refined)
    return HeadResult(value, candidates, winner, names, A, c, ce_steps, ce_grad, refine_steps, refine_grad,
                      stalled, restarted_improved)
