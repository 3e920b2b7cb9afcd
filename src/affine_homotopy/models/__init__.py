"""Model acquisition: loading and running encoders, derived copies, the synthetic demo models
and tasks, and staging from the hub, from PyPI and from ONNX exports.
"""
