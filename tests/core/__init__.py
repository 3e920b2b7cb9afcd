"""Tests of the maths (affine_homotopy.core): intrinsic and extrinsic measures, minimax, probes, statistics."""
