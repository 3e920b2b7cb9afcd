"""A study's configuration: its validation, encoder families, layers, tasks, model lookup, the
lock of pinned revisions and the hub's snapshots; your own data (user_data: table tasks) and
representations (precomputed: embeddings encoders), checked where the config names them.
"""
