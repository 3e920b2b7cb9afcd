"""The one type of a certified value: :class:`Interval`.

Every distance this project certifies (``d_aff``, ``d_lin``, ``d_psi``, ``d_worst``,
``d_worst_search``) is a minimum over maps that the solvers bracket: ``upper`` is the value attained
by an explicit map (the reported number), ``lower`` a certified lower bound of the minimum. "No
certificate" has one spelling: ``lower`` is NaN. Conventions: docs/method.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


ROUNDING = 1e-9  # relative: how far rounding may put ``lower`` above ``upper``


@dataclass(frozen=True)
class Interval:
    """The true minimum lies in ``[lower, upper]``; ``upper`` is attained by a map, ``lower`` is NaN
    where nothing certifies it.

    ``stop``: why the solver stopped (``"tol"``, ``"floor"``, ``"max_iter"``, ...; ``""`` when not
    recorded); ``within_tol``: whether the solver's own stopping test held, ``upper - lower <= tol *
    upper + atol``; ``solver`` and ``iterations``: what produced it.
    """

    lower: float
    upper: float
    stop: str = ""
    within_tol: bool = False
    solver: str = ""
    iterations: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", float(self.lower))
        object.__setattr__(self, "upper", float(self.upper))
        # the two ends come from different float computations (a dual bound, a map's largest error): a
        # lower end above the upper one by rounding is kept as computed, anything more is a bug
        if self.certified and not self.lower <= self.upper + ROUNDING * abs(self.upper):
            raise ValueError(f"an interval needs lower <= upper, got [{self.lower!r}, {self.upper!r}]")

    @classmethod
    def uncertified(cls, upper: float, **fields: object) -> Interval:
        """An upper bound attained by a map, with no certificate (``lower`` NaN)."""
        return cls(math.nan, upper, **fields)

    @property
    def certified(self) -> bool:
        """Whether ``lower`` is a certificate (not NaN)."""
        return not math.isnan(self.lower)

    @property
    def value(self) -> float:
        """The reported number: ``upper``, attained by an explicit map."""
        return self.upper

    @property
    def gap(self) -> float:
        """Absolute width ``upper - lower`` (NaN without a certificate)."""
        return self.upper - self.lower

    @property
    def relative_gap(self) -> float:
        """``(upper - lower) / upper``: 0 for an exact fit (``upper`` 0), NaN without a certificate."""
        if not self.certified:
            return math.nan
        return self.gap / self.upper if self.upper > 0 else 0.0

    def __float__(self) -> float:
        return self.upper

    def contains(self, value: float, slack: float = 0.0) -> bool:
        """Whether ``value`` lies in ``[lower - slack, upper + slack]`` (``lower`` NaN: 0)."""
        lower = self.lower if self.certified else 0.0
        return lower - slack <= value <= self.upper + slack

    def overlaps(self, other: Interval, slack: float = 0.0) -> bool:
        """Whether the two intervals, each widened by ``slack``, share a point."""
        own = self.lower if self.certified else -math.inf
        theirs = other.lower if other.certified else -math.inf
        return own - slack <= other.upper + slack and theirs - slack <= self.upper + slack

    def scaled(self, factor: float) -> Interval:
        """The interval of ``factor * value`` for ``factor >= 0`` (an exact rescaling of the units)."""
        if not factor >= 0:
            raise ValueError(f"scaled needs a non-negative factor, got {factor!r}")
        return replace(self, lower=self.lower * factor, upper=self.upper * factor)

    def ratio(self, denominator: Interval) -> Interval:
        """The interval of ``self / denominator`` for non-negative values: ``[lower / denominator.upper,
        upper / denominator.lower]``, certified only when both are and ``denominator.lower > 0``."""
        certified = self.certified and denominator.certified and denominator.lower > 0
        upper = self.upper / denominator.lower if certified else self.upper / denominator.upper
        lower = self.lower / denominator.upper if certified else math.nan
        return Interval(lower, upper, stop=self.stop or denominator.stop,
                        within_tol=self.within_tol and denominator.within_tol, solver=self.solver,
                        iterations=self.iterations + denominator.iterations)
