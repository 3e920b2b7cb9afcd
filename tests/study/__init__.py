"""Tests of the study's config (affine_homotopy.study): the config check and schema, families, layers, tasks, the lock."""
