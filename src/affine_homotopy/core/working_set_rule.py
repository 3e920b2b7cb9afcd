"""When d_aff's minimax solver runs its working-set outer loop, and the size of its first set.

Integer rules without torch, so that the cost model (:mod:`affine_homotopy.costs.model`), which the
workflow reads before any job runs, prices a pair by the solver path it will take.

On sentence-embedding pairs the optimum rests on a number of rows proportional to the design's
width p whatever N, so the loop pays only where its first set is a small share of the rows; where
that share is large it costs about as much as the plain solver, and the share rule leaves it out
(docs/performance.md).
"""

from __future__ import annotations

# the first set: WORKING_SET_ROWS_PER_COLUMN rows per design column (at least WORKING_SET_MIN_ROWS),
# used when that is at most 1 / WORKING_SET_MAX_SHARE_INV of the rows
WORKING_SET_ROWS_PER_COLUMN = 4
WORKING_SET_MIN_ROWS = 1000
WORKING_SET_MAX_SHARE_INV = 10


def working_set_size(n: int, p: int) -> int:
    """Rows of the first working set: ``WORKING_SET_ROWS_PER_COLUMN`` per design column, at least
    ``WORKING_SET_MIN_ROWS`` (and at most ``n``)."""
    return min(n, max(WORKING_SET_ROWS_PER_COLUMN * p, WORKING_SET_MIN_ROWS))


def uses_working_set(n: int, p: int) -> bool:
    """The outer loop pays when the first working set is a small share of the rows."""
    return working_set_size(n, p) * WORKING_SET_MAX_SHARE_INV <= n
