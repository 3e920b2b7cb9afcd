"""Benchmark suites (not tests): ``python -m benchmarks <suite>``; each measures side by side on the
machine it runs on and prints ratios. What they share is in :mod:`benchmarks.common`."""
