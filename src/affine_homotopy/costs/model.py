"""The cost model: projected single-thread CPU time of a study, per stage and per rule.

Each stage of the pairwise rules costs, per unit of work, ::

    seconds(N, D) = seconds_ref * (N / N_REF) ** n_exponent * width_factor(D)

single-thread CPU seconds, ``N`` the fit split's examples and ``D`` the representation width.
``width_factor`` is 1 at ``D_REF``. Where a stage was measured at other widths it passes through
their measured factors (the stage's ``d_factors``), piecewise linear in log D and log cost and
extended beyond the outer widths with the outer segments' slopes: the certified extrinsic stages do
not follow one power of the width. A stage measured at ``D_REF`` alone costs the same at every width
(``d_exponent`` 0). ``d_exponent`` is the power with which the cost grows just above D_REF
(:func:`fit_stage`). The units are what the rules repeat: an encoder (factorisation, once per job),
an ordered pair (d_aff, d_lin, the baselines, d_psi, the worst-case search), a classifier of a pair
(d_worst), an encoder's layer (the task probe) and a random-label classifier of an encoder's layer.
How often each unit occurs follows from the config (:func:`project`): K encoders give K (K - 1)
ordered pairs per task and layer, so the pairwise stages grow as K^2 and the per-encoder ones as K
(counted, not fitted).

The coefficients are data, ``data/cost_coefficients.json`` (package data; :func:`stage_costs`),
written by ``python -m affine_homotopy.costs fit`` from the measurements beside it
(:mod:`affine_homotopy.costs.fit`). The projection assumes the same per-core rate as the measuring
machine, CPU-bound jobs, and each pair at its encoders' widths (:func:`pair_widths`; the extrinsic
stages at the source's). The embedding rule is not in :func:`project` (the pairwise rules);
:class:`JobCosts` prices its forward pass per token.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from ..core.measures import BASELINES
from ..study.selection import DEFAULT_SELECTION, extrinsic_selection, random_classifiers_needed
from ..core.working_set_rule import uses_working_set

N_REF, D_REF = 10_000, 384


@dataclass(frozen=True)
class StageCost:
    """One stage's single-thread CPU seconds per ``unit`` at (N_REF, D_REF), its growth in N and its
    cost at other widths relative to D_REF: ``d_factors`` ((width, factor), ...) where measured,
    else the power ``d_exponent`` (module docstring)."""

    seconds_ref: float
    n_exponent: float
    d_exponent: float
    unit: str
    d_factors: tuple[tuple[int, float], ...] = ()

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> StageCost:
        """A stage's entry of ``cost_coefficients.json``."""
        return cls(float(entry["seconds_ref"]), float(entry["n_exponent"]), float(entry["d_exponent"]), entry["unit"],
                   tuple((int(d), float(f)) for d, f in entry.get("d_factors", ())))

    def seconds(self, n: int, width: float) -> float:
        return self.seconds_ref * (n / N_REF) ** self.n_exponent * self.width_factor(width)

    def width_factor(self, width: float) -> float:
        """The cost at ``width`` over the cost at D_REF (module docstring)."""
        if not self.d_factors:
            return (width / D_REF) ** self.d_exponent
        return _interpolated_width_factor(self.d_factors, float(width))


# a function of its arguments alone, cached: a study's plan asks it for the same few widths once per pair
# and job
@functools.lru_cache(maxsize=4096)
def _interpolated_width_factor(d_factors: tuple[tuple[int, float], ...], width: float) -> float:
    """The factor at ``width`` through the knots ``d_factors`` and (D_REF, 1), linear in log D and log
    factor; beyond the outer knots, the outer segments' slopes."""
    knots = sorted({D_REF: 1.0, **{int(d): float(f) for d, f in d_factors}}.items())
    log_d = np.log([d for d, _ in knots])
    log_f = np.log([f for _, f in knots])
    x = math.log(width)
    # the outer segments' slopes beyond the outer widths; inside, the segment that holds the width
    segment = int(np.clip(np.searchsorted(log_d, x) - 1, 0, len(knots) - 2))
    slope = (log_f[segment + 1] - log_f[segment]) / (log_d[segment + 1] - log_d[segment])
    return float(math.exp(log_f[segment] + slope * (x - log_d[segment])))


# the stages project() counts, each with the unit its coefficients are per
STAGE_UNITS = {
    "factorise": "encoder",
    "d_aff": "ordered pair",
    # d_aff where the solver runs its working-set loop (N large against the design's width + 1 columns:
    # core/working_set_rule.py): the loop's cost follows the rows near the optimum, not N, so one power
    # law through both paths fits neither
    "d_aff_working_set": "ordered pair",
    # a pair whose target is an affine image of its source by construction: the solver stops at its start
    "d_aff_exact": "exact ordered pair",
    "d_lin": "ordered pair",
    "d_lin_working_set": "ordered pair",  # d_lin where its solver runs the working-set loop (as d_aff's)
    "baselines": "ordered pair",
    "task_probe": "encoder layer",
    "random_probe": "random classifier of an encoder layer",
    "d_psi": "ordered pair",
    # its rows mix two counts of random classifiers per target (fewer at large N): hence its larger residual
    "d_worst": "random classifier of an ordered pair",
    # the certified search at its default budget (4 aimed classifiers, 3 steps), scaled to the configured
    # budget by (candidates + steps) / 7
    "d_worst_search": "ordered pair",
    # the extrinsic stages of an exact pair: its map fits the target to the float floor, so every certified
    # interval closes at its first LP, far sooner than a full-rank pair's
    "d_psi_exact": "exact ordered pair",
    "d_worst_exact": "random classifier of an exact ordered pair",
    "d_worst_search_exact": "exact ordered pair",
}
COEFFICIENTS_FILE = "cost_coefficients.json"
DATA = "data"  # the package folder of the coefficients and the measurements they are fitted to
# the stages whose solver takes the working-set path at large N, and the stage that prices that path
WORKING_SET_STAGES = {"d_aff": "d_aff_working_set", "d_lin": "d_lin_working_set"}
# the design's columns beyond the width: d_aff's affine design has a constant column, d_lin's has none
DESIGN_EXTRA_COLUMNS = {"d_aff": 1, "d_lin": 0}


def solver_stage(stage: str, n: int, width: float) -> str:
    """The stage whose coefficients price ``stage`` at ``n`` rows and ``width`` (the design has
    ``width`` columns, plus a constant for d_aff): its working-set stage where the solver takes that path."""
    if stage in WORKING_SET_STAGES and uses_working_set(n, int(round(width)) + DESIGN_EXTRA_COLUMNS[stage]):
        return WORKING_SET_STAGES[stage]
    return stage


@functools.cache
def coefficient_document() -> Mapping[str, Any]:
    """``data/cost_coefficients.json``, read once."""
    return json.loads(resources.files(__package__).joinpath(DATA, COEFFICIENTS_FILE).read_text(encoding="utf-8"))


@functools.cache
def stage_costs() -> Mapping[str, StageCost]:
    """The fitted coefficients of every stage, read once from ``cost_coefficients.json`` (package data)."""
    document = coefficient_document()
    if (document["n_ref"], document["d_ref"]) != (N_REF, D_REF):
        raise ValueError(f"{COEFFICIENTS_FILE} is fitted at N = {document['n_ref']}, D = {document['d_ref']}, "
                         f"not at this module's N_REF = {N_REF}, D_REF = {D_REF}: refit it")
    stages = document["stages"]
    if set(stages) != set(STAGE_UNITS):
        raise ValueError(f"{COEFFICIENTS_FILE} has the stages {sorted(stages)}, the cost model counts "
                         f"{sorted(STAGE_UNITS)}: refit it (python -m affine_homotopy.costs fit)")
    costs = {}
    for stage, unit in STAGE_UNITS.items():
        entry = stages[stage]
        if entry["unit"] != unit:
            raise ValueError(f"{COEFFICIENTS_FILE}: {stage} is measured per {entry['unit']!r}, counted per {unit!r}")
        costs[stage] = StageCost.from_entry(entry)
    return MappingProxyType(costs)  # cached: read-only


def permutations_drawn(k: int, n_permutations: int) -> int:
    """Permutations a Mantel test of ``k`` encoders runs: all ``k!`` when fewer than ``n_permutations``
    (:func:`affine_homotopy.core.stats.full_correlation` enumerates them), else ``n_permutations``."""
    return min(math.factorial(k), n_permutations) if k < 20 else n_permutations


@dataclass(frozen=True)
class JobCosts:
    """What every job costs besides its pairwise stages (``jobs`` of ``cost_coefficients.json``).

    ``startup``: rule -> single-thread CPU seconds of one job's start-up (a fresh interpreter,
    Snakemake's script preamble and the rule's script's imports). The embed rule's work: the model's
    load (``embed_load``) and the forward pass, ``embed_example`` CPU seconds per example of
    ``embed_tokens`` tokens at D_REF, times ``(D / D_REF) ** embed_d_exponent``; a task's longer
    examples cost in proportion to their tokens (the forward pass batches examples of like length and
    works per token). The correlate rule's work: one correlation per (task, layer, intrinsic measure,
    extrinsic measure), :meth:`correlation_cell_seconds`, plus once per job ``correlation_first_call``
    (importing scipy.stats at the first correlation). ``work``: rule -> CPU seconds of one job's work of
    a rule the config does not size, measured on a reference run; a rule missing there costs its
    start-up only.
    """

    startup: Mapping[str, float]
    embed_load: float
    embed_example: float
    embed_d_exponent: float
    work: Mapping[str, float] = dataclasses.field(default_factory=dict)
    correlation_k: tuple[int, ...] = ()
    correlation_seconds: tuple[float, ...] = ()
    correlation_resamples: tuple[int, int] = (10_000, 2_000)
    correlation_first_call: float = 0.0
    embed_tokens: float = 0.0  # 0: the examples' length is not known, every example costs embed_example

    def embed_seconds(self, n: int, width: int, tokens: float | None = None) -> float:
        """One embed job's work: the model's load and ``n`` examples (both splits of its task) at width
        ``width``, of ``tokens`` tokens each on average (:func:`approximate_tokens`; None: as long as the
        measured ones)."""
        length = tokens / self.embed_tokens if tokens and self.embed_tokens else 1.0
        return self.embed_load + n * self.embed_example * length * (width / D_REF) ** self.embed_d_exponent

    def correlation_cell_seconds(self, k: int, n_permutations: int, n_bootstrap: int) -> float:
        """One Table 1 correlation of ``k`` encoders: ``correlation_seconds`` at ``correlation_k`` encoders,
        interpolated in log K and log seconds (the end segments extended beyond), times the ratio of the
        Mantel permutations and bootstrap resamples drawn to those measured, ``correlation_resamples`` (each costs alike)."""
        if len(self.correlation_k) < 2:
            raise ValueError("the correlation cost needs measurements at two or more K (jobs.correlation)")
        measured_permutations, measured_bootstrap = self.correlation_resamples
        drawn = permutations_drawn(k, n_permutations) + n_bootstrap
        reference = permutations_drawn(k, measured_permutations) + measured_bootstrap
        log_k, log_seconds = np.log(self.correlation_k), np.log(self.correlation_seconds)
        at = int(np.clip(np.searchsorted(log_k, math.log(k)), 1, len(log_k) - 1))  # the segment holding k, or an end
        slope = (log_seconds[at] - log_seconds[at - 1]) / (log_k[at] - log_k[at - 1])
        seconds = math.exp(log_seconds[at - 1] + slope * (math.log(k) - log_k[at - 1]))
        return seconds * drawn / reference


@functools.cache
def job_costs() -> JobCosts:
    """The per-job costs of ``cost_coefficients.json`` (``python -m affine_homotopy.costs measure jobs``, then fit)."""
    jobs = coefficient_document()["jobs"]
    correlation = jobs["correlation"]
    return JobCosts(MappingProxyType({rule: float(s) for rule, s in jobs["startup"].items()}),
                    float(jobs["embed_load"]), float(jobs["embed_example"]), float(jobs["embed_d_exponent"]),
                    MappingProxyType({rule: float(s) for rule, s in jobs["work"].items()}),
                    tuple(int(k) for k in correlation["k"]), tuple(float(t) for t in correlation["seconds"]),
                    (int(correlation["resamples"][0]), int(correlation["resamples"][1])),
                    float(correlation["first_call"]), float(jobs.get("embed_tokens", 0.0)))


# a word or a punctuation mark: what a subword tokenizer splits at least into one token each
_TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")


def approximate_tokens(text_a: str, text_b: str | None, max_length: int) -> int:
    """An example's token count as the embed rule feeds it to an encoder, without its tokenizer: the
    words and punctuation marks of its text(s), plus the special tokens ([CLS] and [SEP]: 2, and 3 for
    a pair), at most ``max_length`` (the encoder truncates there). A subword tokenizer splits rare
    words further, so this undercounts; the cost model measures its per-token rate with this same
    count, so what matters is that the undercount is alike across tasks."""
    count = len(_TOKEN_PATTERN.findall(text_a)) + 2
    if text_b is not None:
        count += len(_TOKEN_PATTERN.findall(text_b)) + 1
    return min(count, max_length)


def speed_reference() -> float | None:
    """The speed probe (:func:`affine_homotopy.jobs.cost_record.speed_probe_seconds`, CPU s) of the machine
    that measured the coefficients (``speed_reference`` of ``cost_coefficients.json``: ``python -m
    affine_homotopy.costs measure calibrate``, then fit); None where it was not calibrated."""
    document = coefficient_document()
    reference = document.get("speed_reference")
    return float(reference["speed_probe_seconds"]) if reference else None


def fit_stage(points: Sequence[tuple[int, int, float]]) -> tuple[float, float, float, float]:
    """``(seconds_ref, n_exponent, d_exponent, rms_log_residual)`` from timings ``(N, D, seconds)``.

    The N exponent and ``seconds_ref`` come from a log-log least-squares line through the points at
    ``D_REF``; the D exponent, the power with which the cost grows just above D_REF, is the mean of
    ``log(t / line(N)) / log(D / D_REF)`` over the points at the nearest width above D_REF, or where
    none is measured the nearest below (0 with none but D_REF's; :func:`fit_width_factors` gives every
    width's factor). The residual is the RMS of the line's log residuals."""
    base = [(n, t) for n, d, t in points if d == D_REF and t > 0]
    if len({n for n, _ in base}) < 2:
        raise ValueError(f"fitting a stage needs timings at two or more N at D = {D_REF}; got {list(points)}")
    x = np.log([n / N_REF for n, _ in base])
    y = np.log([t for _, t in base])
    alpha, log_a = np.polyfit(x, y, 1)
    residual = float(np.sqrt(np.mean((y - (alpha * x + log_a)) ** 2)))
    widths = {d for _, d, t in points if t > 0 and d != D_REF}
    above = [d for d in widths if d > D_REF]
    nearest = min(above) if above else max(widths, default=D_REF)  # the segment the projection takes above D_REF
    wide = [(n, d, t) for n, d, t in points if d == nearest != D_REF and t > 0]
    betas = [(math.log(t) - (log_a + alpha * math.log(n / N_REF))) / math.log(d / D_REF) for n, d, t in wide]
    return float(math.exp(log_a)), float(alpha), float(np.mean(betas)) if betas else 0.0, residual


def fit_width_factors(points: Sequence[tuple[int, int, float]]) -> dict[int, float]:
    """Each measured width's cost relative to D_REF (``d_factors``): the geometric mean over its points
    of ``t / line(N)``, the line :func:`fit_stage` fits at D_REF, so that a width measured at other N
    than D_REF's compares at the same N."""
    seconds_ref, alpha, _, _ = fit_stage(points)
    logs: dict[int, list[float]] = {}
    for n, d, t in points:
        if d != D_REF and t > 0:
            logs.setdefault(int(d), []).append(math.log(t / (seconds_ref * (n / N_REF) ** alpha)))
    return {d: float(math.exp(np.mean(values))) for d, values in sorted(logs.items())}


# the stages of the intrinsic rule (at every configured layer); the probe and extrinsic stages run at
# the extrinsic layers (extrinsic.layers), the factorisation in both all-pairs rules
INTRINSIC_RULE_STAGES = ("d_aff", "d_aff_exact", "d_lin", "baselines")
EXTRINSIC_RULE_STAGES = ("d_psi", "d_worst", "d_worst_search", "d_psi_exact", "d_worst_exact", "d_worst_search_exact")
# the settings the coefficients were measured under; other settings scale the stages linearly
MEASURED_SETTINGS = {"l2_grid": 4, "max_iter": 500, "epochs": 20, "learning_rates": 4, "search_work": 7}


@dataclass
class Projection:
    """Projected single-thread CPU seconds per rule and per stage (sums over the study's jobs)."""

    rules: dict[str, float]
    stages: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.rules.values())

    @property
    def dominant_stage(self) -> str:
        return max(self.stages, key=lambda s: self.stages[s])

    def summary(self, cores: int = 1) -> str:
        hours = {rule: seconds / 3600 / cores for rule, seconds in self.rules.items() if seconds}
        parts = ", ".join(f"{rule} {value:.3g} h" for rule, value in sorted(hours.items(), key=lambda kv: -kv[1]))
        return (f"{self.total / 3600 / cores:.3g} h on {cores} core(s) ({parts}; dominant stage: "
                f"{self.dominant_stage})")


def pair_widths(names: Sequence[str], ranks: Mapping[str, int]) -> dict[tuple[str, str], float]:
    """Ordered pair -> the width its pairwise stages are costed at: the geometric mean of the two
    encoders' widths. The stages were measured on pairs of equal widths; a pair's work grows with the
    source's width (its design) and the target's (the residuals), so the mean of their logarithms
    stands for both."""
    return {(a, b): math.sqrt(ranks[a] * ranks[b]) for a in names for b in names if a != b}


@dataclass(frozen=True)
class StageScales:
    """What the config multiplies each stage's measured unit cost by: the settings against
    :data:`MEASURED_SETTINGS`, the random classifiers, and 0 for a measure it does not select."""

    task_probe: float
    random_probe: float
    d_worst: float
    d_worst_search: float
    d_lin: float
    baselines: float

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> StageScales:
        """Only the selected measures count: ``intrinsic.measures`` (``d_lin`` and the baselines are stages
        of their own) and ``extrinsic.measures`` (``d_worst`` with its random-label probes, and
        ``d_worst_search``; ``d_psi`` always)."""
        probe, extrinsic = config["probe"], config["extrinsic"]
        random_probes, search = extrinsic["random_probes"], extrinsic["worst_search"]
        # the random-label probes are fitted (and d_worst evaluates them) only when d_worst is selected
        n_random = random_classifiers_needed(config)
        chosen = extrinsic_selection(config)
        worst = 1.0 if "d_worst" in chosen else 0.0
        searched = 1.0 if "d_worst_search" in chosen else 0.0
        task_probe_scale = len(probe["l2_grid"]) * probe["max_iter"] / (
            MEASURED_SETTINGS["l2_grid"] * MEASURED_SETTINGS["max_iter"])
        if random_probes.get("method", "sgd") == "sgd":
            random_scale = random_probes["epochs"] * len(random_probes["learning_rates"]) / (
                MEASURED_SETTINGS["epochs"] * MEASURED_SETTINGS["learning_rates"])
        else:  # L-BFGS: random_max_iter iterations against SGD's epochs over the data
            random_scale = probe["random_max_iter"] / (MEASURED_SETTINGS["epochs"] * MEASURED_SETTINGS["learning_rates"])
        # the search runs with or without random classifiers (from the task probe); 0 steps and 0 candidates: none
        search_scale = (search["steps"] + search["candidates"]) / MEASURED_SETTINGS["search_work"]
        # the intrinsic stage runs the selected measures only (intrinsic.measures; d_lin is opt-in)
        selection = set(config.get("intrinsic", {}).get("measures", DEFAULT_SELECTION))
        return cls(task_probe_scale, random_scale * n_random, worst * n_random, searched * search_scale,
                   1.0 if "d_lin" in selection else 0.0, 1.0 if selection & set(BASELINES) else 0.0)


@dataclass(frozen=True)
class PairPlan:
    """The encoders of one job as the stages see them: each encoder's width and rank, each ordered pair's
    width (:func:`pair_widths`) and the pairs that are exact by construction."""

    widths: Mapping[str, int]
    ranks: Mapping[str, int]
    by_pair: Mapping[tuple[str, str], float]
    exact: frozenset[tuple[str, str]]


def layer_seconds(costs: Mapping[str, StageCost], n: int, plan: PairPlan, scales: StageScales) -> dict[str, float]:
    """Every stage's CPU seconds at one layer of a task of ``n`` fit examples: the intrinsic stages at
    each pair's width, the extrinsic ones at its source's rank (their linear programmes have a column per
    direction of the source), d_aff and d_lin by the solver path the pair takes (:func:`solver_stage`)."""
    by_pair, exact, ranks = plan.by_pair, plan.exact, plan.ranks

    def over_pairs(stage: str) -> float:
        return sum(costs[solver_stage(stage, n, w)].seconds(n, w) for w in by_pair.values())

    def inexact(stage: str) -> float:
        return sum(costs[stage].seconds(n, ranks[pair[0]]) for pair in by_pair if pair not in exact)

    def exact_only(stage: str) -> float:
        return sum(costs[stage].seconds(n, ranks[pair[0]]) for pair in exact)

    def per_encoder(stage: str) -> float:
        return sum(costs[stage].seconds(n, d) for d in plan.widths.values())

    return {
        "factorise": 2 * per_encoder("factorise"),  # once in each of the two all-pairs rules
        "d_aff": sum(costs[solver_stage("d_aff", n, w)].seconds(n, w) for pair, w in by_pair.items()
                     if pair not in exact),
        "d_aff_exact": sum(costs["d_aff_exact"].seconds(n, by_pair[pair]) for pair in exact),
        "d_lin": scales.d_lin * over_pairs("d_lin"),
        "baselines": scales.baselines * over_pairs("baselines"),
        "task_probe": scales.task_probe * per_encoder("task_probe"),
        "random_probe": scales.random_probe * per_encoder("random_probe"),
        "d_psi": inexact("d_psi"),
        "d_worst": scales.d_worst * inexact("d_worst"),
        "d_worst_search": scales.d_worst_search * inexact("d_worst_search"),
        "d_psi_exact": exact_only("d_psi_exact"),
        "d_worst_exact": scales.d_worst * exact_only("d_worst_exact"),
        "d_worst_search_exact": scales.d_worst_search * exact_only("d_worst_search_exact"),
    }


def rank_deficiency_seconds(costs: Mapping[str, StageCost], n: int, width: float, copies: int,
                            grid: tuple[Mapping[str, int], Collection[tuple[str, str]]] | None
                            ) -> dict[str, float]:
    """Figure 3's job on a task of ``n`` fit examples, per stage: the truncated copies of ``grid`` (rank
    per copy, the exact pairs among them), or else ``copies`` copies at ``width``; empty without either."""
    if grid is not None:
        copy_ranks, copy_exact = grid
        pairs = pair_widths(list(copy_ranks), copy_ranks)
        return {"factorise": len(copy_ranks) * costs["factorise"].seconds(n, width),
                "d_aff": sum(costs[solver_stage("d_aff", n, w)].seconds(n, w) for pair, w in pairs.items()
                             if pair not in copy_exact),
                "d_aff_exact": sum(costs["d_aff_exact"].seconds(n, w) for pair, w in pairs.items() if pair in copy_exact)}
    if copies > 1:
        return {"d_aff": (copies * costs["factorise"].seconds(n, width)
                          + copies * (copies - 1) * costs[solver_stage("d_aff", n, width)].seconds(n, width))}
    return {}


def project(
    config: Mapping[str, Any], widths: Mapping[str, int], train_sizes: Mapping[str, int], n_layers: int,
    rank_deficiency_copies: int = 0, costs: Mapping[str, StageCost] | None = None,
    extrinsic_layers: int | None = None, ranks: Mapping[str, int] | None = None,
    exact_pairs: Collection[tuple[str, str]] = frozenset(),
    rank_deficiency_grid: tuple[Mapping[str, int], Collection[tuple[str, str]]] | None = None,
) -> Projection:
    """Projected CPU time of a validated config (schema defaults filled in).

    ``widths``: encoder -> D; ``train_sizes``: task -> N of the fit split; ``n_layers``: positions per
    encoder (the intrinsic rule runs at each); ``extrinsic_layers``: positions the probe and extrinsic
    rules run at (None: ``len(extrinsic.layers)``, or ``n_layers`` when that is null). ``ranks``:
    encoder -> the width its pairwise stages work at (default ``widths``; an SVD-truncated copy's rank:
    :func:`affine_homotopy.costs.study.effective_widths`); ``exact_pairs``: ordered pairs whose target is
    an affine image of the source by construction (:func:`affine_homotopy.costs.study.affine_pairs`),
    costed by the ``_exact`` stages. ``rank_deficiency_grid``: (rank per truncated copy, its exact
    pairs), or else ``rank_deficiency_copies`` copies at the largest width. Rules: ``intrinsic`` and
    ``extrinsic`` (one job per task and layer), ``probe`` (per encoder and task, all extrinsic layers),
    ``rank_deficiency`` (per task).
    """
    costs = stage_costs() if costs is None else costs
    width = max(widths.values()) if widths else D_REF
    ranks = dict(widths) if ranks is None else ranks
    by_pair = pair_widths(list(widths), ranks)
    plan = PairPlan(widths, ranks, by_pair, frozenset(pair for pair in exact_pairs if pair in by_pair))
    scales = StageScales.of(config)
    if extrinsic_layers is None:
        extrinsic_layers = n_layers if config["extrinsic"].get("layers") is None else len(config["extrinsic"]["layers"])
    stages = dict.fromkeys(costs, 0.0)
    rules = {"intrinsic": 0.0, "probe": 0.0, "extrinsic": 0.0, "rank_deficiency": 0.0}
    for n in train_sizes.values():
        per_layer = layer_seconds(costs, n, plan, scales)
        # the intrinsic rule runs at every configured layer, the probe and extrinsic rules at the extrinsic ones
        intrinsic_part = sum(per_layer[stage] for stage in INTRINSIC_RULE_STAGES) + per_layer["factorise"] / 2
        probe_part = per_layer["task_probe"] + per_layer["random_probe"]
        extrinsic_part = per_layer["factorise"] / 2 + sum(per_layer[stage] for stage in EXTRINSIC_RULE_STAGES)
        for stage, seconds in per_layer.items():
            if stage == "factorise":  # once in each of the two all-pairs rules
                stages[stage] += (n_layers + extrinsic_layers) * seconds / 2
            elif stage in INTRINSIC_RULE_STAGES:
                stages[stage] += n_layers * seconds
            else:
                stages[stage] += extrinsic_layers * seconds
        rules["intrinsic"] += n_layers * intrinsic_part
        rules["probe"] += extrinsic_layers * probe_part
        rules["extrinsic"] += extrinsic_layers * extrinsic_part
        grid = rank_deficiency_seconds(costs, n, width, rank_deficiency_copies, rank_deficiency_grid)
        if grid:
            rules["rank_deficiency"] += sum(grid.values())
        for stage, seconds in grid.items():
            stages[stage] += seconds
    return Projection(rules, stages)
