"""The extrinsic engine: every measure of one (task, layer) for an explicit list of ordered pairs,
source by source (the flow: the package docstring), and what it returns (:class:`ExtrinsicResult`):
values, certified lower bounds, Lemma 5.2's bounds and per-pair diagnostics. Every (K, K) matrix maps
row ``i`` onto column ``j``."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import NumericalError
from ..interval import Interval
from ..pairs import PairPlan, PhaseClock, plan_pairs
from ..probes import ProbeSet, SoftmaxProbe
from .binary import CERT_RESIDUAL_LIMIT
from .bounds import LemmaTally, check_bounds as check_lemma_bounds, lemma_bound, softmax_lipschitz
from .local import STARTS, HeadResult
from .phases import d_psi, d_worst, d_worst_search
from .prepare import MapWeights, PreparedInputs, SourceContext, prepare, source_context
from .search import SearchedClassifier
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)

PHASES = ("d_psi", "d_worst", "d_worst_search")


def extrinsic_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe | None],
    names: Sequence[str] | None = None,
    map_weights: MapWeights | None = None,
    random_probes: Sequence[ProbeSet] | None = None,
    settings: ExtrinsicSettings | None = None,
    d_aff: np.ndarray | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> ExtrinsicResult:
    """``d_psi`` for the ordered ``pairs`` (default: all), with ``random_probes`` also ``d_worst`` and
    ``d_worst_search``, with ``d_aff`` (K, K) Lemma 5.2's bounds. ``probes[j]``: encoder ``j``'s task
    probe (None if it is no pair's target). ``map_weights``: the intrinsic solver's weights for ``i ->
    j`` at ``[i, j]`` ((K, K, N), or a mapping from pairs to (N,) arrays); without them the composed
    start uses the least-squares map. ``random_probes[j]``: encoder ``j``'s random-label classifiers."""
    settings = settings or ExtrinsicSettings()
    names = list(names) if names is not None else [str(k) for k in range(len(representations))]
    plan = _check_inputs(representations, probes, map_weights, random_probes, d_aff, pairs)
    prep = prepare(representations, probes, names, random_probes, d_aff, settings)
    # d_worst (and the search, which starts from its classifiers) only when selected and given random classifiers
    worst_case = prep.randoms is not None and "d_worst" in settings.measures
    tables = _Tables(plan.count, worst_case, worst_case and "d_worst_search" in settings.measures)
    clock = PhaseClock(PHASES)
    for i, others in plan.by_source:
        _source_pairs(prep, i, others, map_weights, settings, tables, clock)
    _log_run(tables, clock.seconds, settings)
    return _result(prep, plan, tables, probes, d_aff, settings, clock.seconds)


def _check_inputs(representations: Sequence[np.ndarray], probes: Sequence[SoftmaxProbe | None],
                  map_weights: MapWeights | None, random_probes: Sequence[ProbeSet] | None, d_aff: np.ndarray | None,
                  pairs: Sequence[tuple[int, int]] | None) -> PairPlan:
    """The shapes the engine needs (ValueError), and the pairs' plan."""
    count = len(representations)
    if len(probes) != count or (random_probes is not None and len(random_probes) != count):
        raise ValueError("one task probe (and one random probe set, if any) per encoder is required")
    plan = plan_pairs(representations, pairs)
    if isinstance(map_weights, np.ndarray) and np.shape(map_weights) != (count, count, plan.n):
        raise ValueError(f"map weights must be (K, K, N) = {(count, count, plan.n)}, got {np.shape(map_weights)}")
    if d_aff is not None and np.shape(d_aff) != (count, count):
        raise ValueError(f"d_aff must be (K, K) = {(count, count)}, got {np.shape(d_aff)}")
    missing = sorted({j for _, others in plan.by_source for j in others if probes[j] is None})
    if missing:
        raise ValueError(f"encoders {missing} are targets of computed pairs but have no task probe")
    return plan


class _Tables:
    """The matrices of one call, filled source by source, and the counts the run's log reports."""

    def __init__(self, count: int, worst_case: bool, search: bool) -> None:
        def matrix() -> np.ndarray:
            out = np.full((count, count), np.nan)
            np.fill_diagonal(out, 0.0)
            return out

        self.worst_case, self.search = worst_case, search
        self.values = MeasureMatrices(matrix(), matrix() if worst_case else None, matrix() if search else None)
        self.lower = MeasureMatrices(matrix(), matrix() if worst_case else None, matrix() if search else None)
        self.worst_index = np.full((count, count), -1, dtype=int) if worst_case else None
        self.searched: dict[tuple[int, int], SearchedClassifier] = {}
        self.diagnostics: list[dict[str, object]] = []
        self.drifted: list[str] = []  # pairs whose rebuilt d_aff map disagrees with d_aff
        # Lemma 5.2 per pair: the largest classifier norm, the classifiers above their bound, the bound's slack
        self.norm_max, self.violations, self.excess = np.zeros((count, count)), np.zeros((count, count), int), \
            np.zeros((count, count))
        self.stalls = self.restarts = self.lp_count = self.highs_fallbacks = 0
        self.residuals: list[float] = []  # every certificate's residual (max |A^T y| / ||y||_1)
        self.max_gap = 0.0

    def count(self, ctx: SourceContext, result: HeadResult, lemma: LemmaTally) -> None:
        """Add one source's local-search stalls, its solver's LP counts and its Lemma 5.2 check."""
        i, others = ctx.i, ctx.others
        self.norm_max[i, others], self.violations[i, others] = lemma.norm_max, lemma.violations
        self.excess[i, others] = [ctx.lemma.excess(h) for h in range(len(others))]
        if result.stalled is not None:
            self.stalls += int(result.stalled.sum())
            self.restarts += int(result.restarted_improved.sum())
        self.lp_count += ctx.solver.lp_count
        self.highs_fallbacks += ctx.solver.highs_fallbacks
        self.residuals += [r for residuals in ctx.solver.residuals.values() for r in residuals]
        self.max_gap = max(self.max_gap, ctx.solver.max_gap)
        self.drifted += ctx.drifted


def _source_pairs(prep: PreparedInputs, i: int, others: list[int], map_weights: MapWeights | None,
                  settings: ExtrinsicSettings, tables: _Tables, clock: PhaseClock) -> None:
    """Source ``i`` mapped onto each of ``others``: the phases in order, each timed on ``clock``."""
    values, lower = tables.values, tables.lower
    clock.start()
    ctx = source_context(prep, i, others, map_weights, settings)
    task = d_psi(prep, ctx, settings)
    values.d_psi[i, others], lower.d_psi[i, others] = task.upper, task.lower
    clock.stop("d_psi")
    worst_rows: dict[int, dict[str, object]] = {}
    lemma = task.lemma
    if tables.worst_case:
        worst = d_worst(prep, ctx, task, settings)
        values.d_worst[i, others], lower.d_worst[i, others] = worst.upper, worst.lower
        tables.worst_index[i, others] = worst.index
        worst_rows, lemma = worst.rows, lemma + worst.lemma
        clock.stop("d_worst")
    if tables.search:
        values.d_worst_search[i, others], lower.d_worst_search[i, others] = worst.upper, worst.lower
        if settings.search_steps or settings.search_candidates:
            found = d_worst_search(prep, ctx, worst, settings)
            values.d_worst_search[i, others], lower.d_worst_search[i, others] = found.upper, found.lower
            tables.searched.update({(i, j): clf for j, clf in found.searched.items()})
            lemma = lemma + found.lemma
            for j, row in found.rows.items():
                worst_rows.setdefault(j, {}).update(row)
        clock.stop("d_worst_search")
    tables.count(ctx, task.result, lemma)
    tables.diagnostics += diagnostic_rows(prep, ctx, task.result, values, lower, tables.worst_index, worst_rows,
                                          lemma, settings.atol)
    log.info("source %d/%d '%s' (rank %d): d_psi %s%s%s", i + 1, len(prep.names), prep.names[i], ctx.rank,
             np.array2string(values.d_psi[i, others], precision=4),
             "" if values.d_worst is None else ", d_worst " + np.array2string(values.d_worst[i, others], precision=4),
             "" if values.d_worst_search is None
             else ", d_worst_search " + np.array2string(values.d_worst_search[i, others], precision=4))


def _log_run(tables: _Tables, seconds: dict[str, float], settings: ExtrinsicSettings) -> None:
    """The run's summary lines: phase seconds, LP counts and gaps, local-search restarts, drifted maps."""
    log.info("seconds: %s", {k: round(v, 2) for k, v in seconds.items()})
    log.info("certified fixed-classifier distances: %d LPs, largest relative gap %.2e (tol %g, atol %g)",
             tables.lp_count, tables.max_gap, settings.tol, settings.atol)
    residuals = np.asarray(tables.residuals)
    log.info("certificate residuals max |A^T y| / ||y||_1 over %d certificates: median %.1e, largest %.1e (limit "
             "%.0e); %d LPs the interior-point kernel could not certify were solved by HiGHS's dual simplex",
             residuals.size, np.median(residuals) if residuals.size else 0.0, residuals.max(initial=0.0),
             CERT_RESIDUAL_LIMIT, tables.highs_fallbacks)
    wide = wider_than_tol(tables.diagnostics, settings.tol)
    if wide:
        log.warning("certified intervals wider than tol = %g (the multi-class relaxation's gap, or max_lp = %d "
                    "reached), relative gaps: %s", settings.tol, settings.max_lp, "; ".join(wide))
    if tables.stalls:
        log.info("local search: %d task-probe refinements made no progress from their best start and were restarted "
                 "from the other starts; %d of them improved (columns refine_stalled, refine_restart_improved)",
                 tables.stalls, tables.restarts)
    if tables.drifted:
        log.warning("%d pairs: the d_aff map rebuilt from the stored solver weights has a largest residual above "
                    "d_aff by more than the target's discarded tail allows (column d_aff_rebuilt): d_aff and the "
                    "weights disagree (a stale or altered file?); Lemma 5.2 is checked against d_aff as it stands: %s",
                    len(tables.drifted), "; ".join(tables.drifted[:5]))


def _result(prep: PreparedInputs, plan: PairPlan, tables: _Tables, probes: Sequence[SoftmaxProbe],
            d_aff: np.ndarray | None, settings: ExtrinsicSettings, seconds: dict[str, float]) -> ExtrinsicResult:
    """The ordering check (``d_psi <= d_worst <= d_worst_search``), Lemma 5.2's bounds and the result."""
    count, values = plan.count, tables.values
    if tables.worst_case:
        off = ~np.isnan(values.d_psi) & ~np.eye(count, dtype=bool)
        if np.any(values.d_worst[off] < values.d_psi[off]) or (
                tables.search and np.any(values.d_worst_search[off] < values.d_worst[off])):
            raise NumericalError("d_psi <= d_worst <= d_worst_search broke: a bug, the maxima are over nested sets")
    bounds, c = None, softmax_lipschitz(settings.inverse_temperature)
    if d_aff is not None:
        worst = c * tables.norm_max * prep.d_aff
        np.fill_diagonal(worst, 0.0)
        bounds = LemmaBounds(task=lemma_bound(probes, d_aff, settings.inverse_temperature),
                             task_slack=c * prep.task.norms[None, :] * tables.excess, violations=tables.violations,
                             worst=worst if tables.worst_case else None)
    worst_case = (WorstCaseDetails(classifier=tables.worst_index, radius=prep.radius, skipped=prep.skipped,
                                   searched=tables.searched) if tables.worst_case else None)
    return ExtrinsicResult(names=prep.names, pairs=plan.pairs, n_classes=prep.task.n_classes,
                           values=values, lower=tables.lower, diagnostics=tables.diagnostics, seconds=seconds,
                           bounds=bounds, worst_case=worst_case)


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
    maps, ``lower`` their certified lower bounds (NaN: none, where a classifier was dominated or skipped)."""

    names: list[str]
    pairs: list[tuple[int, int]]
    n_classes: int
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
        """``d_psi`` of the pair ``(i, j)``, with its stopping reason and LPs."""
        row = next(r for r in self.diagnostics if (r["mapped_from"], r["mapped_to"]) == (self.names[i], self.names[j]))
        stop = str(row["d_psi_stop"])
        return Interval(self.lower.d_psi[i, j], self.values.d_psi[i, j], stop=stop, within_tol=stop in ("tol", "floor"),
                        solver="interior-point", iterations=int(row["d_psi_lps"]))

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
            "cert_residual_max": max(ctx.solver.residuals.get(prep.names[j], []), default=0.0),
            "highs_fallbacks": ctx.solver.fallbacks[prep.names[j]],
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



def wider_than_tol(diagnostics: list[dict[str, object]], tol: float, shown: int = 10) -> list[str]:
    """``"source -> target: measure gap"`` for every interval whose relative gap is above ``tol``, the widest
    first (at most ``shown``, then a count of the rest)."""
    wide = sorted(((float(row[f"{measure}_gap"]), f"{row['mapped_from']} -> {row['mapped_to']}: {measure}")
                   for row in diagnostics for measure in ("d_psi", "d_worst", "d_worst_search")
                   if f"{measure}_gap" in row and float(row[f"{measure}_gap"]) > tol), reverse=True)
    named = [f"{pair} {gap:.2%}" for gap, pair in wide[:shown]]
    return named + ([f"and {len(wide) - shown} more"] if len(wide) > shown else [])
