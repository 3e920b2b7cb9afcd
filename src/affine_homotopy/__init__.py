"""Affine homotopy between language encoders: the measures as a library, and the maths and I/O behind
the Snakemake workflow.

The public API (:mod:`affine_homotopy.api`, re-exported here; imported on first use, so that
``import affine_homotopy`` stays light): :func:`d_aff`, :func:`d_aff_rel`, :func:`d_lin`, :func:`d_iso`, :func:`cka`,
:func:`cca`, :func:`pwcca`, :func:`svcca`, :func:`procrustes`, :func:`distances` (several measures of
one pair), :func:`pairwise` and :func:`d_psi`; a certified value is an :class:`Interval`. Their arguments are checked by :mod:`api.inputs`, the
engines called by :mod:`api.engine_calls`, and they return the types of :mod:`api.results`.
Direction everywhere: ``source`` is mapped onto ``target``; in a table, entry (i, j) = encoder i
(row) mapped onto encoder j (column). The paper's ``d_Aff(H, G)`` maps G onto H, so
``d_aff(source=G, target=H)`` is ``d_Aff(H, G)``.

The layers below it, lowest first (CONTRIBUTING.md): :mod:`errors`; :mod:`core` (the maths);
:mod:`study` (a study's config); :mod:`jobs` (job plumbing); :mod:`models` (model acquisition,
:func:`embed`); :mod:`report` (tables and figures). :mod:`cli` is the ``affine-homotopy`` command (its
files: :mod:`cli.files`). Conventions: docs/method.md.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

try:  # one source for the version: pyproject.toml's [project] version, as installed
    __version__ = metadata.version("affine-homotopy")
except metadata.PackageNotFoundError:  # the sources on sys.path without an install
    __version__ = "0+unknown"

_API = (
    "MEASURES", "CCAResult", "DAffResult", "DPsiResult", "Interval", "PairwiseTable",
    "cca", "cka", "d_aff", "d_aff_rel", "d_iso", "d_lin", "d_psi", "distances", "pairwise", "procrustes", "pwcca",
    "svcca",
)
from .models.embedding import embed  # light: transformers is imported when it is called
__all__ = [*_API, "embed", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _API:  # torch is imported here, on first use, not by `import affine_homotopy`
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'affine_homotopy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
