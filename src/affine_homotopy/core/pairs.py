"""The plan both pairwise engines share: ordered encoder pairs grouped by source, and their phase clock.

A pair ``(i, j)`` maps encoder ``i`` (row, mapped from) onto encoder ``j`` (column, mapped to).
Conventions: docs/method.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError


@dataclass(frozen=True)
class PairPlan:
    """The ordered pairs of one engine call: ``by_source`` lists each source with a target, in
    ascending order, with its targets in ascending order (each pair once)."""

    count: int  # K encoders
    n: int  # the rows (examples) every encoder shares
    by_source: list[tuple[int, list[int]]]

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return [(i, j) for i, targets in self.by_source for j in targets]

    @property
    def used(self) -> set[int]:
        """The encoders named by any pair (as source or as target)."""
        return {i for i, _ in self.by_source} | {j for _, targets in self.by_source for j in targets}

    def skipped(self) -> np.ndarray:
        """(K, K) bool: the cells of no planned pair (the diagonal included)."""
        mask = np.ones((self.count, self.count), dtype=bool)
        for i, targets in self.by_source:
            mask[i, targets] = False
        return mask


def plan_pairs(representations: Sequence[Any], pairs: Sequence[tuple[int, int]] | None = None) -> PairPlan:
    """Check that every encoder has the same rows and that ``pairs`` (default: every ordered pair
    ``i != j``) are ordered pairs of two different encoders; group them by source (ValueError else)."""
    count = len(representations)
    rows = {rep.shape[0] for rep in representations}
    if len(rows) != 1:
        raise DataError(f"all encoders need the same examples (rows); got row counts {sorted(rows)}",
                        argument="representations")
    if pairs is None:
        pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    bad = [pair for pair in pairs if len(pair) != 2 or pair[0] == pair[1]
           or not all(0 <= int(k) < count for k in pair)]
    if bad:
        raise ConfigError(f"pairs {bad}: each pair is (i, j) with i != j, both in 0..{count - 1}",
                          argument="pairs", value=bad)
    by_source: dict[int, set[int]] = {}
    for i, j in pairs:
        by_source.setdefault(int(i), set()).add(int(j))
    return PairPlan(count, rows.pop(), [(i, sorted(by_source[i])) for i in sorted(by_source)])


class PhaseClock:
    """Wall and CPU seconds (``time.process_time``: all threads) of consecutive phases, summed into
    ``seconds[phase]`` and ``seconds["cpu_" + phase]``; each ``stop`` ends one phase and starts the next."""

    def __init__(self, phases: Iterable[str]) -> None:
        phases = list(phases)
        self.seconds: dict[str, float] = {f"{kind}{phase}": 0.0 for kind in ("", "cpu_") for phase in phases}
        self.began = time.monotonic()
        self.start()

    def start(self) -> None:
        self.wall, self.cpu = time.monotonic(), time.process_time()

    def stop(self, phase: str) -> None:
        self.seconds[phase] += time.monotonic() - self.wall
        self.seconds["cpu_" + phase] += time.process_time() - self.cpu
        self.start()

    @property
    def elapsed(self) -> float:
        """Wall seconds since the clock was made."""
        return time.monotonic() - self.began
