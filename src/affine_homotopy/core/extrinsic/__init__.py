"""Extrinsic (task-level) distances through linear softmax classifiers, for explicit ordered pairs:
``d_psi`` (the task probe, Eq. 20), ``d_worst`` (its random-label probes too, Eq. 23 as the paper
approximates it) and ``d_worst_search`` (a searched worst case), each an interval certified on two-class
tasks (:mod:`.binary`), with Lemma 5.2's bound (:mod:`.bounds`).

Orientation: entry ``(i, j)`` of every matrix is encoder ``i`` (row) mapped onto encoder ``j`` (column).
Conventions: docs/method.md.
"""

from __future__ import annotations

from typing import Any

# Each name is imported from its module on first use (``__getattr__``), not here: a job that needs only
# the summary tables (extrinsic_summary) then does not import torch and scipy with the engine.
_EXPORTS = {
    **dict.fromkeys(("BOUND_ATOL", "BOUND_RTOL", "check_bounds", "lemma_bound", "softmax_lipschitz",
                     "tightness_summary", "worst_case_summary"), "bounds"),
    "CertifiedDistance": "binary",
    "extrinsic_distances": "engine", "fixed_classifier_distances": "engine",
    **dict.fromkeys(("ExtrinsicResult", "LemmaBounds", "MeasureMatrices", "WorstCaseDetails"), "result"),
    "SearchedClassifier": "search",
    "ExtrinsicSettings": "settings",
}

__all__ = [
    "BOUND_ATOL", "BOUND_RTOL", "CertifiedDistance", "ExtrinsicResult", "ExtrinsicSettings", "LemmaBounds",
    "MeasureMatrices", "SearchedClassifier", "WorstCaseDetails", "check_bounds", "extrinsic_distances",
    "fixed_classifier_distances", "lemma_bound", "softmax_lipschitz", "tightness_summary", "worst_case_summary",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        from importlib import import_module

        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
