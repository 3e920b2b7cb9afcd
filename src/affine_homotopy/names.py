"""Name lists defined once and read everywhere: by the library, the rule files and the config schema's
checks. Plain tuples, no heavy imports, so that loading the Snakefile stays fast.

``INTRINSIC_MEASURES`` are the intrinsic measures (and the CSV file stems of
``intrinsic/<task>/<layer>/``), defined in :mod:`affine_homotopy.intrinsic`; ``EXTRINSIC_MEASURES``
the extrinsic matrices the analysis correlates. The GLUE task names are
:data:`affine_homotopy.tasks.GLUE_TASKS`.
"""

INTRINSIC_MEASURES: tuple[str, ...] = (
    "d_aff", "d_aff_lower", "d_aff_ls", "d_aff_msd", "psi_norm", "d_lin", "d_iso",
    "procrustes", "cca_r2", "cca_rho", "pwcca", "svcca", "cka",
)
EXTRINSIC_MEASURES: tuple[str, ...] = ("d_psi", "d_worst", "d_worst_search")
