"""Settings of the extrinsic engine: one dataclass that checks itself."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import ConfigError


@dataclass
class ExtrinsicSettings:
    # certified fixed-classifier distances: the interval [lower, upper] closes to
    # `tol` relative, or `upper <= atol` (an exact fit up to float rounding, in d units)
    tol: float = 1e-3
    atol: float = 1e-6
    max_lp: int = 100  # LPs per certified classifier before it is reported with a wider gap
    # the local search (the starts of the certified solvers, and the multi-class upper bound)
    max_iter: int = 200  # soft-label fit: accelerated gradient iterations
    refine_iter: int = 10  # smooth-max refinement: L-BFGS iterations per round
    rounds: int = 3  # refinement rounds per temperature (a fresh working set each)
    temperatures: tuple[float, ...] = (0.1, 0.03, 0.01, 0.003)
    working_set: int = 64  # fewest examples per classifier in a refinement working set (its worst)
    working_budget: int = 8192  # examples x classifiers per working set (more examples when few heads)
    inverse_temperature: float = 1.0  # lam: target probabilities are softmax(lam * probe logits)
    rank_multiplier: float = 5.0  # the rank rule's n, as for d_aff
    block_mb: int = 512  # working memory for one block of random-label classifiers
    search_steps: int = 3  # d_worst_search: ascent steps on the classifier (0 = d_worst_search is d_worst)
    search_step_size: float = 0.1  # first step length, as a fraction of the ball's radius
    search_radius: float | None = None  # None: per target, the largest norm among its classifiers
    search_candidates: int = 4  # classifiers aimed at the largest residuals of the d_aff map, per pair
    # a search step is accepted when it raises the value by more than this (relative): far above the
    # inner values' own tolerance, so that rounding of the inputs cannot flip the decision
    search_accept_rtol: float = 1e-2
    # the ascent direction's smooth maximum, exp(e_n^2 / (temperature max e^2)): well above the spread of
    # the maps within `tol` of the inner optimum, so the direction does not turn with the inputs' last bits
    search_temperature: float = 0.1
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"
    # d_worst needs random classifiers; d_worst_search starts from d_worst's
    measures: tuple[str, ...] = ("d_psi", "d_worst", "d_worst_search")

    def __post_init__(self) -> None:
        from ..measures import EXTRINSIC_MEASURES

        chosen = list(self.measures)
        unknown = [m for m in chosen if m not in EXTRINSIC_MEASURES]
        if unknown:
            raise ConfigError(f"measures = {chosen} names unknown measure(s) {unknown}; choose from "
                              f"{', '.join(EXTRINSIC_MEASURES)}", argument="measures", value=chosen)
        if "d_psi" not in chosen:
            raise ConfigError(f"measures = {chosen} lacks d_psi, which Lemma 5.2's bound and the diagnostics rest on",
                              argument="measures", value=chosen)
        if "d_worst_search" in chosen and "d_worst" not in chosen:
            raise ConfigError(f"measures = {chosen} selects d_worst_search without d_worst: the search starts "
                              "from d_worst's classifiers", argument="measures", value=chosen)
        if self.search_radius is not None and not self.search_radius > 0:
            raise ConfigError(f"search_radius: the worst-case search radius must be > 0, got {self.search_radius}",
                              argument="search_radius", value=self.search_radius)
