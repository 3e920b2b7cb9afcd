"""The measure registry: one record per measure, read by the engine, the API, the CLI, the analysis and the rules.

Every measure has a ``name`` (also its CSV file stem), a ``family`` (``intrinsic``: the paper's
affine-map distances; ``baseline``: the representation-similarity baselines (CCA family, CKA,
Procrustes);
``extrinsic``: the classifier-level distances), whether it is ``symmetric`` (the same value both
ways for any pair), a plain-text ``label`` (Markdown, figures), a ``latex`` label (the LaTeX
table) and the measure it is computed with (``companion_of``: ``d_aff_lower``, ``d_aff_ls``,
``d_aff_msd`` and ``psi_norm`` are by-products of the ``d_aff`` solve and come with it).

:func:`stage_outputs` is what the intrinsic engine writes for a selection of measures, and
:func:`extrinsic_outputs` what the extrinsic engine writes (a study selects them:
:mod:`affine_homotopy.study.selection`). Plain data and no heavy imports, so that loading the
Snakefile stays fast.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    name: str
    family: str  # "intrinsic", "baseline" or "extrinsic"
    symmetric: bool  # the same value both ways for every pair (d_iso: only for equal widths, so False)
    label: str  # plain text: Markdown tables, figure axes
    latex: str  # the LaTeX table
    description: str
    companion_of: str | None = None  # computed (for free) with this measure and written with it


MEASURE_RECORDS: tuple[Measure, ...] = (
    Measure("d_aff", "intrinsic", False, "d_aff", r"$d_{\mathrm{Aff}}$",
            "certified minimax affine distance (Eq. 19), upper bound attained by a map"),
    Measure("d_aff_lower", "intrinsic", False, "d_aff (lower)", r"$d_{\mathrm{Aff}}^{\mathrm{lower}}$",
            "certified lower bound of d_aff", "d_aff"),
    Measure("d_aff_ls", "intrinsic", False, "d_aff (LS)", r"$d_{\mathrm{Aff}}^{\mathrm{LS}}$",
            "largest residual of the least-squares affine map", "d_aff"),
    Measure("d_aff_msd", "intrinsic", False, "d_aff (MSD)", r"$d_{\mathrm{Aff}}^2 / D$",
            "d_aff squared over the target's width", "d_aff"),
    Measure("psi_norm", "intrinsic", False, "‖ψ‖", r"$\|\psi\|_2$",
            "operator norm of the linear part of the map attaining d_aff", "d_aff"),
    Measure("d_aff_rel", "intrinsic", False, "d_aff / R", r"$d_{\mathrm{Aff}} / R$",
            "d_aff over the radius R of the smallest ball enclosing the target (scale-free, in [0, 1]; "
            "1 = no better than a constant map)"),
    Measure("d_lin", "intrinsic", False, "d_lin", r"$d_{\mathrm{Lin}}$",
            "certified minimax linear (bias-free) distance on uncentred representations"),
    Measure("d_iso", "intrinsic", False, "d_iso", r"$d_{\mathrm{Iso}}$",
            "largest residual of the Procrustes isometry plus bias"),
    Measure("procrustes", "baseline", True, "Procrustes", "Procrustes", "orthogonal Procrustes distance"),
    Measure("cca_r2", "baseline", True, "1−R²_CCA", r"$R^2_{\mathrm{CCA}}$", "1 - mean squared canonical correlation"),
    Measure("cca_rho", "baseline", True, "1−ρ̄_CCA", r"$\bar\rho_{\mathrm{CCA}}$", "1 - mean canonical correlation"),
    Measure("pwcca", "baseline", False, "PWCCA", "PWCCA", "projection-weighted CCA distance"),
    Measure("svcca", "baseline", True, "SVCCA", "SVCCA", "SVCCA distance (99 % variance)"),
    Measure("cka", "baseline", True, "1−CKA", "linear CKA", "1 - linear CKA"),
    Measure("d_psi", "extrinsic", False, "d_ψ", r"$d_{\psi'}$", "fixed-classifier distance through the task probe"),
    Measure("d_worst", "extrinsic", False, "d_worst", r"$d^{\mathcal{H}}_{\mathcal{V}}$",
            "largest fixed-classifier distance over the task probe and the random-label probes"),
    Measure("d_worst_search", "extrinsic", False, "d_worst (search)", r"$d^{\mathcal{H}}_{\mathcal{V}}$ (search)",
            "d_worst with the worst-case classifier search"),
)
MEASURES: dict[str, Measure] = {m.name: m for m in MEASURE_RECORDS}

# the intrinsic stage's file stems, in a stable order (what names.INTRINSIC_MEASURES was)
INTRINSIC_MEASURES: tuple[str, ...] = tuple(m.name for m in MEASURE_RECORDS if m.family in ("intrinsic", "baseline"))
EXTRINSIC_MEASURES: tuple[str, ...] = tuple(m.name for m in MEASURE_RECORDS if m.family == "extrinsic")
SYMMETRIC: frozenset[str] = frozenset(m.name for m in MEASURE_RECORDS if m.symmetric)
# measures computed with d_aff's solve (the map, its interval and its least-squares start)
D_AFF_FAMILY: tuple[str, ...] = ("d_aff", *(m.name for m in MEASURE_RECORDS if m.companion_of == "d_aff"))
BASELINES: tuple[str, ...] = tuple(m.name for m in MEASURE_RECORDS if m.family == "baseline") + ("d_iso",)
# the intrinsic measures one can select: every one that is not a companion of another
SELECTABLE: tuple[str, ...] = tuple(m.name for m in MEASURE_RECORDS
                                    if m.family in ("intrinsic", "baseline") and m.companion_of is None)
# what each extrinsic measure adds to the files extrinsic/<task>/<layer>/<name>.csv: its values, its
# certified lower bounds (NaN where there is no certificate) and, for d_psi and d_worst, Lemma 5.2's
# bound over the classifiers it evaluates (the search's classifiers stay in d_worst's ball: bound_worst)
EXTRINSIC_FILES: dict[str, tuple[str, ...]] = {
    "d_psi": ("d_psi", "d_psi_lower", "bound"),
    "d_worst": ("d_worst", "d_worst_lower", "bound_worst"),
    "d_worst_search": ("d_worst_search", "d_worst_search_lower"),
}
# every matrix the extrinsic stage can write, in the order of the files (values, lower bounds, bounds)
EXTRINSIC_MATRICES: tuple[str, ...] = ("d_psi", "d_psi_lower", "d_worst", "d_worst_lower", "d_worst_search",
                                       "d_worst_search_lower", "bound", "bound_worst")
LABELS: dict[str, str] = {m.name: m.label for m in MEASURE_RECORDS}
LATEX_LABELS: dict[str, str] = {m.name: m.latex for m in MEASURE_RECORDS}


def stage_outputs(selection: Iterable[str]) -> tuple[str, ...]:
    """The intrinsic CSVs a selection writes: the selected measures and their companions, in registry order."""
    chosen = set(selection)
    return tuple(m.name for m in MEASURE_RECORDS if m.family in ("intrinsic", "baseline")
                 and (m.name in chosen or m.companion_of in chosen))


def extrinsic_outputs(selection: Iterable[str]) -> tuple[str, ...]:
    """The matrices (file stems under ``extrinsic/<task>/<layer>/``) the extrinsic stage writes for a
    selection: ``d_psi``, ``d_psi_lower`` and ``bound`` always; ``d_worst``, ``d_worst_lower`` and
    ``bound_worst`` with ``d_worst``; ``d_worst_search`` and ``d_worst_search_lower`` with the search.
    (Besides them it always writes ``d_psi_diagnostics.csv``.)"""
    chosen = {"d_psi", *selection}
    files = {name for measure in chosen for name in EXTRINSIC_FILES.get(measure, ())}
    return tuple(name for name in EXTRINSIC_MATRICES if name in files)
