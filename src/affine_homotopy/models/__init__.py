"""Model acquisition: loading and running encoders (and ``affine_homotopy.embed``, in embedding), derived
copies, the synthetic demo models and tasks, task data, and staging from the hub, from PyPI and from
ONNX exports.
"""
