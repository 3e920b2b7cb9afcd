"""A study's configuration: its validation, encoder families, layers, tasks, model lookup, the
lock of pinned revisions and the hub's snapshots.
"""
