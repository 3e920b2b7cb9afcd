"""What the extrinsic engine returns for one (task, layer) (:class:`ExtrinsicResult`): values, certified
lower bounds, Lemma 5.2's bounds and per-pair diagnostics; every (K, K) matrix maps row ``i`` onto column ``j``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..interval import Interval
from .bounds import LemmaTally, check_bounds as check_lemma_bounds
from .local import STARTS, HeadResult
from .prepare import PreparedInputs, SourceContext
from .search import SearchedClassifier


@dataclass
class MeasureMatrices:
    """One (K, K) matrix per extrinsic measure, row mapped onto column: NaN off the computed pairs, 0
    on the diagonal; None where the measure was not computed."""

    d_psi: np.ndarray
    d_worst: np.ndarray | None = None
    d_worst_search: np.ndarray | None = None


@dataclass
class LemmaBounds:
    """Lemma 5.2 for every pair (computed when ``d_aff`` is given), (K, K) each."""

    task: np.ndarray  # c(lam) ||W_j||_2 d_aff for the task probe (bound.csv)
    task_slack: np.ndarray  # the bound's share of the target's discarded tail (LemmaCheck)
    violations: np.ndarray  # int: classifiers breaking their own Lemma 5.2 bound
    worst: np.ndarray | None = None  # c(lam) max_k ||W_k||_2 d_aff over every classifier evaluated (bound_worst.csv)


@dataclass
class WorstCaseDetails:
    """The classifiers behind ``d_worst`` and ``d_worst_search`` (computed with ``d_worst``)."""

    classifier: np.ndarray  # (K, K) int: d_worst's classifier, -1 = the task probe, s = random seed s
    radius: np.ndarray  # (K,) the search ball's radius per target
    skipped: np.ndarray  # (K,) random classifiers skipped per target (non-finite logits)
    searched: dict[tuple[int, int], SearchedClassifier] = field(default_factory=dict)  # per pair, with the search


@dataclass
class ExtrinsicResult:
    """Everything one (task, layer) computed for its ordered ``pairs``: ``values`` attained by explicit
    maps, ``lower`` their certified lower bounds (NaN: no certificate, on more than two classes)."""

    names: list[str]
    pairs: list[tuple[int, int]]
    n_classes: int
    certified: bool  # two classes: every fixed-classifier value has an interval
    values: MeasureMatrices
    lower: MeasureMatrices
    diagnostics: list[dict[str, object]]  # one d_psi_diagnostics.csv row per computed ordered pair
    seconds: dict[str, float] = field(default_factory=dict)  # wall and CPU seconds per phase
    bounds: LemmaBounds | None = None  # None without d_aff
    worst_case: WorstCaseDetails | None = None  # None without d_worst

    def matrices(self) -> dict[str, np.ndarray]:
        """The workflow's matrices by file stem (``d_psi`` -> ``d_psi.csv``), those that exist."""
        bounds = self.bounds
        matrices = {
            "d_psi": self.values.d_psi, "d_psi_lower": self.lower.d_psi,
            "d_worst": self.values.d_worst, "d_worst_lower": self.lower.d_worst,
            "d_worst_search": self.values.d_worst_search, "d_worst_search_lower": self.lower.d_worst_search,
            "bound": None if bounds is None else bounds.task, "bound_worst": None if bounds is None else bounds.worst,
        }
        return {name: matrix for name, matrix in matrices.items() if matrix is not None}

    def interval(self, i: int, j: int) -> Interval:
        """``d_psi`` of the pair ``(i, j)``, with its stopping reason and LPs (lower NaN: no certificate)."""
        row = next(r for r in self.diagnostics if (r["mapped_from"], r["mapped_to"]) == (self.names[i], self.names[j]))
        stop = str(row["d_psi_stop"])
        return Interval(self.lower.d_psi[i, j], self.values.d_psi[i, j], stop=stop, within_tol=stop in ("tol", "floor"),
                        solver="highs" if self.certified else "local search", iterations=int(row["d_psi_lps"]))

    def check_bounds(self) -> None:
        """Lemma 5.2 on every pair and every evaluated classifier (NumericalError; see
        :func:`~affine_homotopy.core.extrinsic.bounds.check_bounds`)."""
        if self.bounds is not None:
            check_lemma_bounds(np.nan_to_num(self.values.d_psi), self.bounds.task, self.bounds.violations,
                               self.bounds.task_slack)


def diagnostic_rows(prep: PreparedInputs, ctx: SourceContext, result: HeadResult, values: MeasureMatrices,
                    lower: MeasureMatrices, worst_index: np.ndarray | None, worst_rows: dict[int, dict[str, object]],
                    tally: LemmaTally, atol: float) -> list[dict[str, object]]:
    """One ``d_psi_diagnostics.csv`` row per pair of one source: values, certified gaps, the local
    search's starts and stalls, Lemma 5.2's slack, and the worst case's classifiers and search."""
    i, lemma, rows = ctx.i, ctx.lemma, []

    def measure(name: str, j: int) -> dict[str, object]:
        value, low = getattr(values, name)[i, j], getattr(lower, name)[i, j]
        return {name: value, f"{name}_lower": low, f"{name}_gap": _gap(value, low, atol)}

    for slot, j in enumerate(ctx.others):
        row: dict[str, object] = {
            "mapped_from": prep.names[i], "mapped_to": prep.names[j], **measure("d_psi", j),
            "d_psi_lps": int(result.lps[slot]), "d_psi_stop": result.stop[slot],
            "d_psi_cert_residual": float(result.cert_residual[slot]),
            **{name: float(result.candidates[name][slot]) for name in (*STARTS, "refined")
               if name in result.candidates},
            "winning_start": result.start_names[int(result.winner[slot])],
            "refine_stalled": result.stalled is not None and bool(result.stalled[slot]),
            "refine_restart_improved": result.restarted_improved is not None and bool(result.restarted_improved[slot]),
            "soft_label_iterations": result.soft_label_iterations,
            "soft_label_grad_norm": float(result.soft_label_grad[slot]),
            "refine_iterations": result.refine_iterations,
            "refine_grad_norm": float(result.refine_grad[slot]),
            "source_rank": ctx.rank,
            "d_aff_rebuilt": lemma.rebuilt[slot],
            "target_tail": lemma.tail[slot],
            "bound_slack": lemma.c * prep.task.norms[j] * lemma.excess(slot),
            "bound_violations": int(tally.violations[slot]),
        }
        if values.d_worst is not None:
            row.update({
                **measure("d_worst", j),
                "worst_classifier": "task" if worst_index[i, j] < 0 else f"random_{worst_index[i, j]}",
                "classifiers_evaluated": int(tally.evaluated[slot]),
                "bound_worst_slack": lemma.c * tally.norm_max[slot] * lemma.excess(slot),
                "classifiers_skipped": int(prep.skipped[j]),
                **worst_rows.get(j, {}),
            })
        if values.d_worst_search is not None:
            row.update({
                **measure("d_worst_search", j),
                "search_radius": max(prep.radius[j], tally.norm_max[slot]),
            })
        rows.append(row)
    return rows


def _gap(value: float, lower: float, atol: float) -> float:
    """Relative gap of a certified interval: 0 when closed by the absolute floor (value <= atol), NaN
    without a certificate."""
    if value <= atol:
        return 0.0
    return (value - lower) / value if math.isfinite(lower) else math.nan

