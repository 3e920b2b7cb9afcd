"""The plumbing every workflow job uses: the runner and each job's cost record, provenance,
device selection and the GPU lock, and atomic file I/O.
"""
