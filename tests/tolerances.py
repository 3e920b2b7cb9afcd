"""Tolerances for comparing two runs' result files (a resumed run against a clean one, SLURM against
local). Every number the workflow writes is deterministic for the same inputs and settings on one
machine; the documented reproducibility across thread counts, devices and input rounding is:

* certified values (two classes: ``d_psi``, ``d_worst`` and their lower bounds): within ``2 tol``
  relative (both intervals contain the optimum and close to ``extrinsic.tol``);
* the searched worst case ``d_worst_search`` (and the per-pair diagnostics that describe the search):
  within 1 % (docs/performance.md, the search's budget);
* everything else: rounding (``rtol`` 1e-6).
"""

from __future__ import annotations

from pathlib import Path

SEARCHED = 1e-2
CERTIFIED = 2e-3
ROUNDING = 1e-6


def relative_tolerance(path: Path | str) -> float:
    """The relative tolerance for one result file (module docstring)."""
    name = Path(path).name
    parts = Path(path).parts
    if "extrinsic" not in parts:
        return ROUNDING
    if "search" in name or name in ("d_psi_diagnostics.csv", "summary.csv"):
        return SEARCHED
    return CERTIFIED
