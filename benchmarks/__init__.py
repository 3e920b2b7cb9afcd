"""Timing scripts (not tests): each measures something side by side on the machine it runs on and
prints ratios. Run them from the repository root as modules, e.g. ``python -m benchmarks.cost_model fit``;
what they share is in :mod:`benchmarks.common`."""
