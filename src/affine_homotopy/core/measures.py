"""The measure registry: one record per measure, read by the engine, the API, the CLI, the analysis and the rules.

Every measure has a ``name`` (also its CSV file stem), a ``family`` (``intrinsic``: the paper's
affine-map distances; ``baseline``: the representation-similarity baselines of Table 1;
``extrinsic``: the classifier-level distances), whether it is ``symmetric`` (the same value both
ways for any pair), a plain-text ``label`` (Markdown, figures), a ``latex`` label (the LaTeX
table) and the measure it is computed with (``companion_of``: ``d_aff_lower``, ``d_aff_ls``,
``d_aff_msd`` and ``psi_norm`` are by-products of the ``d_aff`` solve and come with it).

The intrinsic stage runs the measures chosen by the config key ``intrinsic.measures``
(:func:`check_measure_selection` validates it, and what the analysis asks for, before any job);
:func:`stage_outputs` is what the stage then writes. The extrinsic stage likewise runs those of
``extrinsic.measures`` (:func:`check_extrinsic_selection`; :func:`extrinsic_outputs` is what it
writes). Plain data and no heavy imports, so that loading the Snakefile stays fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError


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
# what intrinsic.measures selects: every intrinsic measure that is not a companion of another
SELECTABLE: tuple[str, ...] = tuple(m.name for m in MEASURE_RECORDS
                                    if m.family in ("intrinsic", "baseline") and m.companion_of is None)
# the intrinsic stage's default: everything Table 1 and Figures 1-4 need; d_lin (not in the paper's
# tables, and the dearest measure) is opt-in
DEFAULT_SELECTION: tuple[str, ...] = tuple(m for m in SELECTABLE if m != "d_lin")
# the extrinsic stage's default (extrinsic.measures): what the paper's Table 1 correlates, d_psi' and
# d^H_V over random-label probes, and d_worst_search (our searched worst case, at its default budget
# within 10x d_psi's CPU time per pair: docs/performance.md)
EXTRINSIC_DEFAULT_SELECTION: tuple[str, ...] = ("d_psi", "d_worst", "d_worst_search")
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


def unknown_measure_error(key: str, value: Any, unknown: Sequence[str], known: Sequence[str]) -> ConfigError:
    return ConfigError(f"config key '{key}' = {list(value)} names unknown measure(s) {list(unknown)}. Fix: "
                       f"choose from {', '.join(known)}.")


def check_measure_selection(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Validate ``intrinsic.measures`` and what the analysis needs of it; returns the stage's outputs.

    A ConfigError (before any job) names the key, the value and the fix when a name is unknown,
    when ``d_aff`` is missing (the extrinsic stage, Lemma 5.2's bound and Figures 1-4 need its
    maps), or when ``analysis.intrinsic_measures`` (Table 1's columns) asks for a measure the
    stage does not compute.
    """
    selection = list(config.get("intrinsic", {}).get("measures", DEFAULT_SELECTION))
    unknown = [m for m in selection if m not in SELECTABLE]
    if unknown:
        companions = [m for m in unknown if m in MEASURES and MEASURES[m].companion_of]
        note = (f" ({', '.join(companions)} come with {MEASURES[companions[0]].companion_of}: list that instead)"
                if companions else "")
        raise ConfigError(f"config key 'intrinsic.measures' = {selection} names unknown measure(s) {unknown}"
                          f"{note}. Fix: choose from {', '.join(SELECTABLE)}.")
    if "d_aff" not in selection:
        raise ConfigError(f"config key 'intrinsic.measures' = {selection} lacks d_aff, which the extrinsic stage "
                          "(its maps start d_psi and enter Lemma 5.2's bound), the rank analysis, the preorder and "
                          "Figures 1-4 need. Fix: add d_aff to intrinsic.measures.")
    outputs = stage_outputs(selection)
    wanted = list(config.get("analysis", {}).get("intrinsic_measures", []))
    unknown = [m for m in wanted if m not in INTRINSIC_MEASURES]
    if unknown:
        raise unknown_measure_error("analysis.intrinsic_measures", wanted, unknown, INTRINSIC_MEASURES)
    missing = [m for m in wanted if m not in outputs]
    if missing:
        raise ConfigError(
            f"config key 'analysis.intrinsic_measures' = {wanted} asks Table 1 for {missing}, but config key "
            f"'intrinsic.measures' = {selection} does not compute {'it' if len(missing) == 1 else 'them'}. Fix: add "
            f"{', '.join(sorted({MEASURES[m].companion_of or m for m in missing}))} to intrinsic.measures, or drop "
            f"{', '.join(missing)} from analysis.intrinsic_measures.")
    return outputs


def extrinsic_selection(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The extrinsic measures a (checked) config selects, in registry order (``extrinsic.measures``)."""
    chosen = set(config.get("extrinsic", {}).get("measures", EXTRINSIC_DEFAULT_SELECTION))
    return tuple(m for m in EXTRINSIC_MEASURES if m in chosen)


def extrinsic_outputs(selection: Iterable[str]) -> tuple[str, ...]:
    """The matrices (file stems under ``extrinsic/<task>/<layer>/``) the extrinsic stage writes for a
    selection: ``d_psi``, ``d_psi_lower`` and ``bound`` always; ``d_worst``, ``d_worst_lower`` and
    ``bound_worst`` with ``d_worst``; ``d_worst_search`` and ``d_worst_search_lower`` with the search.
    (Besides them it always writes ``d_psi_diagnostics.csv``.)"""
    chosen = {"d_psi", *selection}
    files = {name for measure in chosen for name in EXTRINSIC_FILES.get(measure, ())}
    return tuple(name for name in EXTRINSIC_MATRICES if name in files)


def random_classifiers_needed(config: Mapping[str, Any]) -> int:
    """Random-label probes per encoder and layer that the probe jobs fit: ``extrinsic.n_random_classifiers``
    when ``extrinsic.measures`` selects ``d_worst`` (the only measure that evaluates them; the search
    starts from its classifiers), else 0."""
    extrinsic = config.get("extrinsic", {})
    return int(extrinsic.get("n_random_classifiers", 0)) if "d_worst" in extrinsic_selection(config) else 0


def check_extrinsic_selection(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Validate ``extrinsic.measures``; returns the selected measures in registry order.

    A ConfigError (before any job) names the key, the value and the fix when a name is unknown, when
    ``d_psi`` is missing (Lemma 5.2's bound, Figure 2's fits and the diagnostics are built on it), or
    when ``d_worst_search`` comes without ``d_worst`` (the search starts from d_worst's classifiers).
    """
    selection = list(config.get("extrinsic", {}).get("measures", EXTRINSIC_DEFAULT_SELECTION))
    unknown = [m for m in selection if m not in EXTRINSIC_MEASURES]
    if unknown:
        companions = [m for m in unknown if m in EXTRINSIC_MATRICES]
        note = (f" ({', '.join(companions)} {'is a file' if len(companions) == 1 else 'are files'} the stage writes "
                "with its measure: list the measure instead)" if companions else "")
        raise ConfigError(f"config key 'extrinsic.measures' = {selection} names unknown measure(s) {unknown}{note}. "
                          f"Fix: choose from {', '.join(EXTRINSIC_MEASURES)}.")
    if "d_psi" not in selection:
        raise ConfigError(f"config key 'extrinsic.measures' = {selection} lacks d_psi, which Lemma 5.2's bound "
                          "(bound.csv), Figure 2, the diagnostics and the extrinsic summary are built on. Fix: add "
                          "d_psi to extrinsic.measures.")
    if "d_worst_search" in selection and "d_worst" not in selection:
        raise ConfigError(f"config key 'extrinsic.measures' = {selection} selects d_worst_search without d_worst: "
                          "the worst-case search starts from the worst of d_worst's classifiers (the task probe "
                          "and the random-label probes). Fix: add d_worst to extrinsic.measures, or drop "
                          "d_worst_search.")
    return extrinsic_selection(config)
