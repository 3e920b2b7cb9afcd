"""Tests of model and data acquisition (affine_homotopy.models, study.hub): encoders, derived and synthetic
models, staging from the hub, its cache and PyPI."""
