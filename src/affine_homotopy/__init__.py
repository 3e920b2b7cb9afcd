"""Affine homotopy between language encoders: the measures as a library, and the maths and I/O behind
the Snakemake workflow.

The public API (:mod:`affine_homotopy.api`, re-exported here; imported on first use, so that
``import affine_homotopy`` stays light): :func:`d_aff`, :func:`d_lin`, :func:`d_iso`, :func:`cka`,
:func:`cca`, :func:`pwcca`, :func:`svcca`, :func:`procrustes`, :func:`pairwise` and :func:`d_psi`.
Direction everywhere: ``source`` is mapped onto ``target``; in a table, entry (i, j) = encoder i
(row) mapped onto encoder j (column). The paper's ``d_Aff(H, G)`` maps G onto H, so
``d_aff(source=G, target=H)`` is ``d_Aff(H, G)``.

Workflow modules: :mod:`config` (validation), :mod:`tasks` (data), :mod:`encoders` (embedding),
:mod:`derived` (derived encoders), :mod:`linalg` (rank rule, factorisation, weighted least squares),
:mod:`intrinsic` (d_aff and the baselines), :mod:`probes`, :mod:`extrinsic` (d_psi), :mod:`stats`,
:mod:`analysis`, :mod:`plotting`, :mod:`io`, :mod:`errors`, :mod:`staging` and :mod:`hub` (models and
data from the hub or a pre-filled cache); :mod:`cli` is the ``affine-homotopy`` command.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = (
    "MEASURES", "CCAResult", "DAffResult", "DPsiResult", "PairwiseTable",
    "cca", "cka", "d_aff", "d_iso", "d_lin", "d_psi", "pairwise", "procrustes", "pwcca", "svcca",
)
__all__ = [*_API, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _API:  # torch is imported here, on first use, not by `import affine_homotopy`
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'affine_homotopy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
