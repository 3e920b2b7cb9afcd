"""Cost prediction: what a study costs before it runs, and how a finished run compares.

One entry point, run from the repository root::

    python -m affine_homotopy.costs project --configfile config/paper.yaml --cores 32
    python -m affine_homotopy.costs check results/demo
    OMP_WAIT_POLICY=PASSIVE python -m affine_homotopy.costs measure stages|jobs|calibrate
    python -m affine_homotopy.costs measure work results/reviews
    python -m affine_homotopy.costs fit

:mod:`.model` is the cost model (per-stage coefficients, :func:`~.model.project`); :mod:`.study`
applies it to a config (sizes, widths, Snakemake's plan of the jobs); :mod:`.resources` gives the
workflow's rules their per-job requests; :mod:`.check` compares a finished run's job records with the
projection; :mod:`.measure` times the stages and :mod:`.fit` fits the coefficients, written to
``data/cost_coefficients.json`` beside the measurements they come from.
"""
