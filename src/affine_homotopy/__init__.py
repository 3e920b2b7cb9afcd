"""Affine homotopy between language encoders: the maths and I/O behind the Snakemake workflow.

Modules: :mod:`config` (validation), :mod:`tasks` (data), :mod:`encoders` (embedding),
:mod:`derived` (derived encoders), :mod:`linalg` (rank rule, bases), :mod:`intrinsic` (d_aff),
:mod:`probes` (task probes), :mod:`extrinsic` (d_psi), :mod:`stats`, :mod:`plotting`, :mod:`io`.
Matrix convention everywhere: entry (i, j) = encoder i (row) mapped onto encoder j (column).
"""

__version__ = "0.1.0"
