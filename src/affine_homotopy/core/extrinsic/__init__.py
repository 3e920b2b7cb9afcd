"""Extrinsic (task-level) distances through linear softmax classifiers, for explicit ordered pairs:
``d_psi`` (the task probe, Eq. 20), ``d_worst`` (its random-label probes too, Eq. 23 as the paper
approximates it) and ``d_worst_search`` (a searched worst case), each an interval certified on two-class
tasks (:mod:`.binary`), with Lemma 5.2's bound (:mod:`.bounds`).

Orientation: entry ``(i, j)`` of every matrix is encoder ``i`` (row) mapped onto encoder ``j`` (column).
Conventions: docs/method.md.
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
from .engine import extrinsic_distances, fixed_classifier_distances
from .result import ExtrinsicResult, LemmaBounds, MeasureMatrices, WorstCaseDetails
from .search import SearchedClassifier
from .settings import ExtrinsicSettings

__all__ = [
    "BOUND_ATOL", "BOUND_RTOL", "CertifiedDistance", "ExtrinsicResult", "ExtrinsicSettings", "LemmaBounds",
    "MeasureMatrices", "SearchedClassifier", "WorstCaseDetails", "check_bounds", "extrinsic_distances",
    "fixed_classifier_distances", "lemma_bound", "softmax_lipschitz", "tightness_summary", "worst_case_summary",
]
