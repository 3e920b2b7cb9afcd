"""The maths: the intrinsic measures and their certified solvers, the extrinsic (probe-based)
distances, the probes, the statistics and the measure registry. Conventions: docs/method.md.

This layer imports nothing of the package but :mod:`affine_homotopy.errors`.
"""
