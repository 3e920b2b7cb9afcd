"""Extrinsic (task-level) distances through linear softmax classifiers, for explicit ordered pairs
(conventions and proofs: docs/method.md, "Extrinsic measures"). :func:`extrinsic_distances` reads top-down:

1. :func:`.prepare.prepare`: every encoder on the device, its task probe, random-label classifiers,
   factorisation and search radius; per source, :func:`.prepare.source_context`: its whitened basis,
   each pair's start maps (the ``d_aff`` map rebuilt) and its :class:`.fixed.FixedClassifierSolver`.
2. :func:`.phases.d_psi`: the task probe (Eq. 20); :func:`.phases.d_worst`: the largest distance over
   the task and random-label probes (Eq. 23 as the paper approximates it); :func:`.phases.d_worst_search`:
   aimed classifiers and projected gradient ascent from d_worst's classifier (:mod:`.search`).
3. Each asks the solver for fixed-classifier values, certified intervals seeded by the local search of
   :mod:`.local`: exact Chebyshev LPs on two classes (:mod:`.binary`), a relaxation on more
   (:mod:`.multiclass`), both solved by the dense kernel of :mod:`affine_homotopy.core.lp`.
4. :mod:`.bounds`: Lemma 5.2 for every classifier evaluated; :class:`.engine.ExtrinsicResult` holds
   the (K, K) matrices (row ``i`` mapped onto column ``j``), the per-pair diagnostics and the bounds.
"""

from __future__ import annotations

from typing import Any

# Each name is imported from its module on first use (``__getattr__``), not here: the jobs that need
# only Lemma 5.2's helpers or the tables then do not import torch and scipy with the engine.
_EXPORTS = {
    **dict.fromkeys(("BOUND_ATOL", "BOUND_RTOL", "check_bounds", "lemma_bound", "softmax_lipschitz"), "bounds"),
    **dict.fromkeys(("extrinsic_distances", "ExtrinsicResult", "LemmaBounds", "MeasureMatrices", "WorstCaseDetails"),
                    "engine"),
    "SearchedClassifier": "search",
    "ExtrinsicSettings": "settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        from importlib import import_module

        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
