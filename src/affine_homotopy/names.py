"""Name lists read by the rule files and the config checks (kept for imports that predate the registry).

The measures are defined once, in :mod:`affine_homotopy.measures`; this module re-exports their names.
The GLUE task names are :data:`affine_homotopy.tasks.GLUE_TASKS`.
"""

from .measures import EXTRINSIC_MEASURES, INTRINSIC_MEASURES

__all__ = ["EXTRINSIC_MEASURES", "INTRINSIC_MEASURES"]
