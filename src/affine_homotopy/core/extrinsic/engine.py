"""The extrinsic engine: every measure of one (task, layer) for an explicit list of ordered pairs.

:func:`extrinsic_distances` checks its inputs, plans the pairs (:mod:`affine_homotopy.core.pairs`),
prepares every encoder (:mod:`.prepare`), runs the phases of :mod:`.phases` source by source and
returns one :class:`~.result.ExtrinsicResult`. Orientation: row ``i`` is mapped onto column ``j``.
Conventions: docs/method.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ...errors import ConfigError, NumericalError
from ..pairs import PairPlan, PhaseClock, plan_pairs
from ..probes import ProbeSet, SoftmaxProbe
from .bounds import lemma_bound
from .local import HeadResult
from .phases import random_probe_worst_case, searched_worst_case, task_probe_distances
from .prepare import PreparedInputs, SourceContext, prepare, source_context
from .result import ExtrinsicResult, LemmaBounds, MeasureMatrices, WorstCaseDetails, diagnostic_rows
from .search import SearchedClassifier
from .settings import ExtrinsicSettings

log = logging.getLogger(__name__)

PHASES = ("d_psi", "d_worst", "d_worst_search")


def extrinsic_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    random_probes: Sequence[ProbeSet] | None = None,
    settings: ExtrinsicSettings | None = None,
    d_aff: np.ndarray | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> ExtrinsicResult:
    """``d_psi`` for the ordered ``pairs`` (default: all), and with ``random_probes`` also ``d_worst``
    and ``d_worst_search``; with ``d_aff`` Lemma 5.2's bounds (``bounds``) and checks.

    ``map_weights`` (K, K, N): the intrinsic solver's weights, ``[i, j]`` for the map ``i -> j``
    (``d_aff_weights.npy``); without them the composed start uses the least-squares map.
    ``random_probes[j]``: encoder ``j``'s random-label classifiers (possibly none: the search then
    starts from the task probe). ``d_aff`` (K, K): the intrinsic stage's, row mapped onto column.
    """
    settings = settings or ExtrinsicSettings()
    names = list(names) if names is not None else [str(k) for k in range(len(representations))]
    plan = _check_inputs(representations, probes, map_weights, random_probes, d_aff, settings, pairs)
    prep = prepare(representations, probes, names, random_probes, d_aff, settings)
    # d_worst (and the search, which starts from its classifiers) only when selected and given random classifiers
    worst_case = prep.randoms is not None and "d_worst" in settings.measures
    tables = _Tables(plan.count, worst_case, worst_case and "d_worst_search" in settings.measures)
    certified = settings.certified and prep.n_classes == 2
    if prep.n_classes > 2:
        log.info("%d classes: fixed-classifier distances by the local search (upper bounds without a "
                 "certificate; the certified method needs two classes)", prep.n_classes)
    clock = PhaseClock(PHASES)
    for i, others in plan.by_source:
        _source_pairs(prep, i, others, map_weights, settings, tables, clock)
    _log_run(tables, clock.seconds, certified, settings)
    return _result(prep, plan, tables, probes, d_aff, settings, clock.seconds, certified)


def fixed_classifier_distances(
    representations: Sequence[np.ndarray],
    probes: Sequence[SoftmaxProbe],
    names: Sequence[str] | None = None,
    map_weights: np.ndarray | None = None,
    settings: ExtrinsicSettings | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> ExtrinsicResult:
    """``d_psi`` only (no random classifiers, no search); see :func:`extrinsic_distances`."""
    return extrinsic_distances(representations, probes, names, map_weights, None, settings, pairs=pairs)


def _check_inputs(representations: Sequence[np.ndarray], probes: Sequence[SoftmaxProbe],
                  map_weights: np.ndarray | None, random_probes: Sequence[ProbeSet] | None, d_aff: np.ndarray | None,
                  settings: ExtrinsicSettings, pairs: Sequence[tuple[int, int]] | None) -> PairPlan:
    """The shapes the engine needs (ValueError, or ConfigError for a setting), and the pairs' plan."""
    count = len(representations)
    if len(probes) != count or (random_probes is not None and len(random_probes) != count):
        raise ValueError("one task probe (and one random probe set, if any) per encoder is required")
    plan = plan_pairs(representations, pairs)
    if map_weights is not None and np.shape(map_weights) != (count, count, plan.n):
        raise ValueError(f"map weights must be (K, K, N) = {(count, count, plan.n)}, got {np.shape(map_weights)}")
    if d_aff is not None and np.shape(d_aff) != (count, count):
        raise ValueError(f"d_aff must be (K, K) = {(count, count)}, got {np.shape(d_aff)}")
    if settings.search_radius is not None and not settings.search_radius > 0:
        raise ConfigError(f"the worst-case search radius must be > 0, got {settings.search_radius}")
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
        self.stalls = self.restarts = self.lp_count = self.highs_fallbacks = 0
        self.max_gap = 0.0

    def count(self, ctx: SourceContext, result: HeadResult) -> None:
        """Add one source's local-search stalls and its solver's LP counts."""
        if result.stalled is not None:
            self.stalls += int(result.stalled.sum())
            self.restarts += int(result.restarted_improved.sum())
        self.lp_count += ctx.solver.lp_count
        self.highs_fallbacks += ctx.solver.highs_fallbacks
        self.max_gap = max(self.max_gap, ctx.solver.max_gap)


def _source_pairs(prep: PreparedInputs, i: int, others: list[int], map_weights: np.ndarray | None,
                  settings: ExtrinsicSettings, tables: _Tables, clock: PhaseClock) -> None:
    """Source ``i`` mapped onto each of ``others``: the phases in order, each timed on ``clock``."""
    values, lower = tables.values, tables.lower
    clock.start()
    ctx = source_context(prep, i, others, map_weights, settings, tables.drifted)
    task = task_probe_distances(prep, ctx, settings)
    values.d_psi[i, others], lower.d_psi[i, others] = task.value, task.lower
    clock.stop("d_psi")
    worst_rows: dict[int, dict[str, object]] = {}
    if tables.worst_case:
        worst = random_probe_worst_case(prep, ctx, task, settings)
        values.d_worst[i, others], lower.d_worst[i, others] = worst.value, worst.lower
        tables.worst_index[i, others] = worst.index
        worst_rows = worst.rows
        clock.stop("d_worst")
    if tables.search:
        values.d_worst_search[i, others], lower.d_worst_search[i, others] = worst.value, worst.lower
        if settings.search_steps or settings.search_candidates:
            found = searched_worst_case(prep, ctx, worst, settings)
            values.d_worst_search[i, others], lower.d_worst_search[i, others] = found.value, found.lower
            tables.searched.update({(i, j): clf for j, clf in found.searched.items()})
            for j, row in found.rows.items():
                worst_rows.setdefault(j, {}).update(row)
        clock.stop("d_worst_search")
    tables.count(ctx, task.result)
    tables.diagnostics += diagnostic_rows(prep, ctx, task.result, values, lower, tables.worst_index, worst_rows,
                                          settings.atol)
    log.info("source %d/%d '%s' (rank %d): d_psi %s%s%s", i + 1, len(prep.names), prep.names[i], ctx.rank,
             np.array2string(values.d_psi[i, others], precision=4),
             "" if values.d_worst is None else ", d_worst " + np.array2string(values.d_worst[i, others], precision=4),
             "" if values.d_worst_search is None
             else ", d_worst_search " + np.array2string(values.d_worst_search[i, others], precision=4))


def _log_run(tables: _Tables, seconds: dict[str, float], certified: bool, settings: ExtrinsicSettings) -> None:
    """The run's summary lines: phase seconds, LP counts and gaps, local-search restarts, drifted maps."""
    log.info("seconds: %s", {k: round(v, 2) for k, v in seconds.items()})
    if certified:
        log.info("certified fixed-classifier distances (two classes): %d LPs, largest relative gap %.2e (tol %g, "
                 "atol %g)", tables.lp_count, tables.max_gap, settings.tol, settings.atol)
        if tables.highs_fallbacks:
            log.info("%d LPs the interior-point kernel could not certify were solved by HiGHS's dual simplex",
                     tables.highs_fallbacks)
        if tables.max_gap > settings.tol:
            log.warning("some certified intervals stayed wider than tol after max_lp = %d LPs (largest gap %.2e): "
                        "see the *_gap columns of d_psi_diagnostics.csv", settings.max_lp, tables.max_gap)
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
            d_aff: np.ndarray | None, settings: ExtrinsicSettings, seconds: dict[str, float],
            certified: bool) -> ExtrinsicResult:
    """The ordering check (``d_psi <= d_worst <= d_worst_search``), Lemma 5.2's bounds and the result."""
    count, values = plan.count, tables.values
    if tables.worst_case:
        off = ~np.isnan(values.d_psi) & ~np.eye(count, dtype=bool)
        if np.any(values.d_worst[off] < values.d_psi[off]) or (
                tables.search and np.any(values.d_worst_search[off] < values.d_worst[off])):
            raise NumericalError("d_psi <= d_worst <= d_worst_search broke: a bug, the maxima are over nested sets")
    lemma = prep.lemma
    bounds = None
    if d_aff is not None:
        excess = np.array([[lemma.excess(i, j) if i != j else 0.0 for j in range(count)] for i in range(count)])
        bounds = LemmaBounds(
            task=lemma_bound(probes, d_aff, settings.inverse_temperature),
            task_slack=lemma.c * prep.task_norms[None, :] * excess, violations=lemma.violations,
            worst=lemma.bound_worst() if tables.worst_case else None,
            worst_slack=lemma.c * lemma.norm_max * excess if tables.worst_case else None,
        )
    worst_case = (WorstCaseDetails(classifier=tables.worst_index, radius=prep.radius, skipped=prep.skipped,
                                   searched=tables.searched) if tables.worst_case else None)
    return ExtrinsicResult(names=prep.names, pairs=plan.pairs, n_classes=prep.n_classes, certified=certified,
                           values=values, lower=tables.lower, diagnostics=tables.diagnostics, seconds=seconds,
                           bounds=bounds, worst_case=worst_case)
