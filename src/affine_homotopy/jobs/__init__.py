"""The plumbing every workflow job uses: the runner, resources and the cost model, provenance,
device selection and the GPU lock, and atomic file I/O.
"""
