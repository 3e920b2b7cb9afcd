"""A study's selection of measures (``intrinsic.measures``, ``extrinsic.measures`` and what the analysis
asks of them): the defaults, the checks that run before any job, and what a selection implies. The
registry itself (names, families, outputs) is :mod:`affine_homotopy.core.measures`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.measures import (EXTRINSIC_MATRICES, EXTRINSIC_MEASURES, INTRINSIC_MEASURES, MEASURES, SELECTABLE,
                             stage_outputs)
from ..errors import ConfigError

# the intrinsic stage's default: everything Table 1 and Figures 1-4 need; d_lin (not in the paper's
# tables, and the dearest measure) and d_aff_rel (not in the paper) are opt-in
DEFAULT_SELECTION: tuple[str, ...] = tuple(m for m in SELECTABLE if m not in ("d_lin", "d_aff_rel"))
# the extrinsic stage's default: what the paper's Table 1 correlates, d_psi' and d^H_V over random-label
# probes, and d_worst_search (our searched worst case, at a default budget that keeps it within a small
# multiple of d_psi's time per pair: docs/performance.md)
EXTRINSIC_DEFAULT_SELECTION: tuple[str, ...] = ("d_psi", "d_worst", "d_worst_search")


def unknown_measure_error(key: str, value: Any, unknown: Sequence[str], known: Sequence[str], note: str = ""
                          ) -> ConfigError:
    """``note``: why a name is unknown where that helps (a companion file listed as a measure)."""
    return ConfigError(f"config key '{key}' = {list(value)} names unknown measure(s) {list(unknown)}{note}. Fix: "
                       f"choose from {', '.join(known)}.", key=key, value=list(value))


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
        raise unknown_measure_error("intrinsic.measures", selection, unknown, SELECTABLE, note)
    if "d_aff" not in selection:
        raise _lacking("intrinsic.measures", selection, "d_aff", "the extrinsic stage (its maps start d_psi and "
                       "enter Lemma 5.2's bound), the rank analysis, the preorder and Figures 1-4 need")
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
            f"{', '.join(missing)} from analysis.intrinsic_measures.", key="analysis.intrinsic_measures", value=wanted)
    return outputs


def extrinsic_selection(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The extrinsic measures a (checked) config selects, in registry order (``extrinsic.measures``)."""
    chosen = set(config.get("extrinsic", {}).get("measures", EXTRINSIC_DEFAULT_SELECTION))
    return tuple(m for m in EXTRINSIC_MEASURES if m in chosen)


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
        raise unknown_measure_error("extrinsic.measures", selection, unknown, EXTRINSIC_MEASURES, note)
    if "d_psi" not in selection:
        raise _lacking("extrinsic.measures", selection, "d_psi", "Lemma 5.2's bound (bound.csv), Figure 2, the "
                       "diagnostics and the extrinsic summary are built on")
    if "d_worst_search" in selection and "d_worst" not in selection:
        raise ConfigError(f"config key 'extrinsic.measures' = {selection} selects d_worst_search without d_worst: "
                          "the worst-case search starts from the worst of d_worst's classifiers (the task probe "
                          "and the random-label probes). Fix: add d_worst to extrinsic.measures, or drop "
                          "d_worst_search.", key="extrinsic.measures", value=selection)
    return extrinsic_selection(config)


def _lacking(key: str, selection: list[str], measure: str, needed_by: str) -> ConfigError:
    return ConfigError(f"config key '{key}' = {selection} lacks {measure}, which {needed_by}. Fix: add {measure} "
                       f"to {key}.", key=key, value=selection)
