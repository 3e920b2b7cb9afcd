"""Resource estimates per job, from the config alone (no data needs to exist yet).

Snakemake rules call these through small input-function-style lambdas, so that a cluster gets
sensible ``mem_mb``/``runtime``/``disk_mb`` requests, and every estimate grows linearly with the
retry ``attempt``. Sizes that the config does not fix are taken from what is known about the
source: GLUE split sizes for ``glue`` tasks, the line count of a ``glue_dir`` file, a model's
``config.json`` for local models, and BERT-base's width (768) and depth (12) for hub models that are
not downloaded yet. Memory and disk are deliberately generous upper estimates; the run times of the
intrinsic, extrinsic, probe and rank-deficiency jobs come from the measured cost model
(:mod:`affine_homotopy.jobs.cost`, one job's projection times :data:`RUNTIME_SAFETY`), the embedding
jobs' from a throughput estimate (the cost model does not project the forward pass).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..study.model_lookup import base_encoder, local_model_dir
from .cost import Projection, job_costs, project
from ..study.layers import layer_positions
from ..study.tasks import glue_dir_files

GLUE_SIZES = {  # (train, dev) examples of nyu-mll/glue; MNLI dev = validation_matched
    "sst2": (67_349, 872), "mrpc": (3_668, 408), "rte": (2_490, 277),
    "cola": (8_551, 1_043), "mnli": (392_702, 9_815), "qqp": (363_846, 40_430),
}
DEFAULT_WIDTH = 768
DEFAULT_PARAMETERS = 125_000_000  # roughly BERT/RoBERTa-base
MB = 2**20


# A Hugging Face dataset split's size before it is staged (then STAGED.json has it)
DEFAULT_HF_SPLIT = 10_000


def _user_task_size(spec: Mapping[str, Any], split: str) -> int:
    """A table's split (its files, read once per process), or a staged Hugging Face dataset's."""
    from ..study.user_data import split_cap

    cap = split_cap(spec, split)
    if spec["source"] == "table":
        from ..study.user_data import table_task

        try:
            full = len(table_task("table", spec).frames[split])
        except (ValueError, OSError):  # a bad file: the config check names it
            full = 1
    else:
        full = DEFAULT_HF_SPLIT
    return max(1, min(full, int(cap)) if cap else full)


def task_size(spec: Mapping[str, Any], split: str) -> int:
    """Number of examples of a task split as the workflow will use it."""
    if spec["source"] in ("table", "hf_dataset"):
        return _user_task_size(spec, split)
    cap = spec.get("n_train") if split == "train" else spec.get("n_dev")
    if spec["source"] == "synthetic":
        return int(cap)
    if spec["source"] == "glue_dir":
        path = glue_dir_files(spec["path"], spec["glue_task"])[split]
        with open(path, "rb") as handle:
            lines = sum(1 for _ in handle) - 1  # header (CoLA has none: one line too few, harmless)
        full = max(lines, 1)
    else:
        full = GLUE_SIZES[spec["glue_task"]][0 if split == "train" else 1]
    return min(full, int(cap)) if cap else full


def encoder_width(name: str, encoders: Mapping[str, Mapping[str, Any]]) -> int:
    root = base_encoder(name, encoders)
    if encoders[root]["source"] == "embeddings":  # the width of its files' arrays
        from ..study.precomputed import embeddings_width

        return embeddings_width(encoders[root]) or DEFAULT_WIDTH
    folder = local_model_dir(root, encoders[root])
    if folder is None:
        return DEFAULT_WIDTH
    with open(Path(folder) / "config.json") as handle:
        settings = json.load(handle)
    # GPT-2-style configs call the width n_embd
    return int(settings.get("hidden_size") or settings.get("n_embd") or DEFAULT_WIDTH)


def encoder_widths(encoders: Mapping[str, Mapping[str, Any]], known: Mapping[str, int] | None = None) -> dict[str, int]:
    """Encoder -> its stored width: ``known`` (encoder -> width, e.g. :func:`affine_homotopy.jobs.cost_check.run_widths`
    of a finished run's embeddings) for its base encoder where it has it, else :func:`encoder_width` (the
    model's config as this machine has it)."""
    known = known or {}
    out = {}
    for name in encoders:
        root = base_encoder(name, encoders)
        out[name] = int(known[root]) if root in known else encoder_width(name, encoders)
    return out


def effective_widths(encoders: Mapping[str, Mapping[str, Any]], widths: Mapping[str, int]) -> dict[str, int]:
    """Encoder -> the width its pairwise stages work at, as far as the config fixes it: an
    ``svd_truncate`` copy keeps ``round(fraction * r)`` directions of its base's ``r`` (the measures
    factorise every encoder, so the copy's rank, not its stored width, sets the cost); every other
    encoder is taken at full rank, its width (``widths``)."""
    out: dict[str, int] = {}

    def width_of(name: str) -> int:
        if name not in out:
            spec = encoders[name]
            if spec["source"] == "derived" and spec["transform"] == "svd_truncate":
                out[name] = max(1, int(round(spec["fraction"] * width_of(spec["base"]))))
            elif spec["source"] == "derived":  # an affine image or a noisy copy: full rank, its base's width
                out[name] = width_of(spec["base"])
            else:
                out[name] = int(widths[name])
        return out[name]

    for name in encoders:
        width_of(name)
    return out


def affine_pairs(encoders: Mapping[str, Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    """Ordered pairs ``(source, target)`` of a config's encoders whose target is, by construction, an
    affine function of the source: d_aff is then at the float floor and its solver stops at the
    least-squares start, a small share of a pair's usual cost.

    From the derived encoders: an ``svd_truncate`` or ``random_affine`` copy is an affine image of its
    base; a ``random_affine`` copy is invertible, so its base is an affine image of it too; of two
    ``svd_truncate`` copies of one base, the one with the smaller fraction is a projection of the other
    (nested top singular directions). ``gaussian_noise`` adds independent noise: no affine relation.
    The relation is closed under composition.

    A ``random_affine`` pair is exact for the solver only while the rank rule keeps every direction of
    its source (:mod:`affine_homotopy.core.linalg`): the rule's threshold grows with N, and where it
    drops a real encoder's smallest directions (2 of 6 such pairs of 768-wide MiniLM layers at N =
    8,000, none at 384 wide up to N = 8,000: docs/performance.md), the image keeps their share, the
    residuals stay above the float floor and the pair costs as any pair. A truncated copy lies in the span its base keeps, so its pairs stay exact."""
    image_of: dict[str, set[str]] = {name: set() for name in encoders}
    truncations: dict[str, list[tuple[float, str]]] = {}
    for name, spec in encoders.items():
        if spec["source"] != "derived" or spec["transform"] not in ("svd_truncate", "random_affine"):
            continue
        image_of[spec["base"]].add(name)
        if spec["transform"] == "random_affine":
            image_of[name].add(spec["base"])
        else:
            truncations.setdefault(spec["base"], []).append((float(spec["fraction"]), name))
    for copies in truncations.values():
        for fraction, name in copies:
            image_of[name].update(other for smaller, other in copies if smaller <= fraction and other != name)
    pairs = set()
    for source in encoders:
        seen, stack = set(), [source]
        while stack:
            for target in image_of[stack.pop()]:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        pairs.update((source, target) for target in seen if target != source)
    return frozenset(pairs)


def _scaled(value: float, attempt: int) -> int:
    return int(math.ceil(value * max(1, attempt)))


# The cost model was measured single-threaded on a shared 2-core machine, within a factor of about 2
# of the measured times (docs/performance.md); a request three times the projection (plus 10 minutes
# of start-up) leaves room for slower cores and for the fits' error, and grows with each retry.
RUNTIME_SAFETY = 3.0
PROJECTED_RULES = ("intrinsic", "extrinsic", "probe", "rank_deficiency")


def projected_runtime(config: Mapping[str, Any], rule: str, widths: Mapping[str, int], n_train: int,
                      n_layers: int = 1, rank_deficiency_copies: int = 0, threads: int = 1,
                      attempt: int = 1) -> int:
    """Minutes to request for one job of ``rule`` (one of :data:`PROJECTED_RULES`): the cost model's
    CPU time for that job (``widths``: the encoders it handles; ``n_layers``: layers in the job),
    spread over ``threads``, times :data:`RUNTIME_SAFETY`. The job's layers count for every rule (a
    probe job fits the extrinsic layers, an intrinsic or extrinsic job one layer). Every pair is
    costed at full rank and as not exact (no :func:`effective_widths`, no :func:`affine_pairs`): a
    request errs on the long side."""
    if rule not in PROJECTED_RULES:
        raise ValueError(f"the cost model projects {PROJECTED_RULES}, not {rule!r}")
    seconds = project(config, widths, {"job": n_train}, n_layers, rank_deficiency_copies,
                      extrinsic_layers=n_layers).rules[rule]
    return _scaled(10 + RUNTIME_SAFETY * seconds / max(1, threads) / 60, attempt)


def embed_resources(n: int, width: int, n_layers: int, attempt: int = 1) -> dict[str, int]:
    """Memory, run time and disk of a job that embeds ``n`` examples (an embed job: both splits of a task)
    at ``width`` and ``n_layers`` layers."""
    array_mb = n * width * n_layers * 4 / MB
    return {
        "mem_mb": _scaled(3000 + 4 * DEFAULT_PARAMETERS / MB + 2 * array_mb, attempt),
        # CPU throughput of a base model at 128 tokens is ~20 examples/s/core; GPUs are far faster.
        "runtime": _scaled(10 + n / 20 / 60, attempt),
        "disk_mb": _scaled(array_mb + 10, 1),
    }


def pairwise_resources(n: int, widths: list[int], block_mb: int, itemsize: int = 8, attempt: int = 1) -> dict[str, int]:
    """Memory and disk of an all-pairs job (intrinsic, extrinsic, rank deficiency): every encoder's
    factors (N x D, twice) stay in memory. Run time: :func:`projected_runtime`."""
    k = len(widths)
    factors_mb = sum(3 * n * d * itemsize for d in widths) / MB
    inputs_mb = sum(n * d * 4 for d in widths) / MB
    return {
        "mem_mb": _scaled(2000 + factors_mb + inputs_mb + 2 * block_mb, attempt),
        "disk_mb": _scaled(k * k * n * 8 / MB + 20 * k * k * 20 / MB + 10, 1),
    }


def study_projection(config: Mapping[str, Any], widths: Mapping[str, int] | None = None) -> Projection:
    """Projected single-thread CPU time per rule of a validated config (:func:`affine_homotopy.jobs.cost.project`):
    the intrinsic rule at every configured layer, the probe and extrinsic rules at ``extrinsic.layers``;
    each pair at its encoders' :func:`effective_widths`, the pairs of :func:`affine_pairs` as exact,
    and Figure 3's grid as the SVD-truncated copies it computes (:func:`rank_deficiency_grid`). The
    encoders' widths are :func:`encoder_widths` with ``widths`` as the known ones."""
    from ..study.validation import extrinsic_layers

    encoders = config["encoders"]
    widths = encoder_widths(encoders, widths)
    train_sizes = {task: task_size(spec, "train") for task, spec in config["tasks"].items()}
    return project(config, widths, train_sizes, len(layer_positions(config["layers"])),
                   extrinsic_layers=len(extrinsic_layers(config)), ranks=effective_widths(encoders, widths),
                   exact_pairs=affine_pairs(encoders), rank_deficiency_grid=rank_deficiency_grid(config, widths))


def rank_deficiency_grid(config: Mapping[str, Any], widths: Mapping[str, int]
                         ) -> tuple[dict[str, int], frozenset[tuple[str, str]]] | None:
    """Figure 3's grid as the cost model sees it (None without ``analysis.rank_deficiency``): every
    encoder of the group truncated to every level (:func:`affine_homotopy.report.analysis.rank_deficiency`),
    as SVD-truncated copies: their widths and their exact pairs (the copies of one encoder are nested)."""
    from ..study.validation import rank_deficiency_group

    grid = config["analysis"].get("rank_deficiency")
    if not grid:
        return None
    group = rank_deficiency_group(config)
    copies = {f"{name}@{level}": {"source": "derived", "base": name, "transform": "svd_truncate", "fraction": level}
              for name in group for level in grid["levels"]}
    encoders = {**{name: {"source": "model"} for name in group}, **copies}
    ranks = effective_widths(encoders, {name: widths[name] for name in group})
    exact = frozenset(pair for pair in affine_pairs(encoders) if pair[0] in copies and pair[1] in copies)
    return {name: ranks[name] for name in copies}, exact


def planned_jobs(config: Mapping[str, Any]) -> dict[str, int]:
    """Jobs per rule of a whole run of a validated config, as the workflow plans them (rules without
    jobs left out). Not the staging downloads, which run only for what ``resources/`` lacks."""
    from ..study.families import family_members, training_dynamics_members
    from ..study.validation import extrinsic_layers, extrinsic_parts

    sources = [spec["source"] for spec in config["encoders"].values()]
    parts = extrinsic_parts(config)  # None: one extrinsic job per task and layer; else parts and a merge
    models = sum(source not in ("derived", "embeddings") for source in sources)
    tasks, encoders = len(config["tasks"]), len(sources)
    layers, outer = len(layer_positions(config["layers"])), len(extrinsic_layers(config))
    dynamics = bool(training_dynamics_members(family_members(config.get("encoder_families"))))
    jobs = {
        "staging_complete": 1, "prepare_task": tasks, "embed": models * tasks,
        "import_embeddings": sources.count("embeddings") * tasks, "derive": sources.count("derived") * tasks,
        "intrinsic": tasks * layers, "probe": encoders * tasks, "probe_table": tasks * outer, "extrinsic": tasks * outer,
        "extrinsic_part": 0 if parts is None else tasks * outer * len(parts),
        "extrinsic_summary": 1, "correlate": 1, "paper_comparison": 1, "rank_analysis": 1, "preorder": 1,
        "rank_deficiency": tasks, "figure_asymmetry_grid": 1, "figure_extrinsic_vs_intrinsic": 1,
        "figure_layer_trend": 1, "figure_rank_deficiency": 1, "figure_training_dynamics": int(dynamics),
        "provenance": 1,
    }
    return {rule: count for rule, count in jobs.items() if count}


# the rules whose work job_projection sizes from the config; every other rule's work is a per-job constant
SIZED_RULES = (*PROJECTED_RULES, "embed", "correlate")


def correlation_work(config: Mapping[str, Any]) -> float:
    """The correlate job's work: Table 1's correlations, one per task, extrinsic layer, intrinsic
    measure (``analysis.intrinsic_measures``) and extrinsic measure (``extrinsic.measures``), each over
    the encoders of ``analysis.encoder_group`` (all when null) with the configured permutations and
    resamples (:meth:`affine_homotopy.jobs.cost.JobCosts.correlation_cell_seconds`), and the first
    correlation's one-off cost (``JobCosts.correlation_first_call``)."""
    from ..core.measures import extrinsic_selection
    from ..study.validation import extrinsic_layers

    analysis = config["analysis"]
    k = len(analysis["encoder_group"] or config["encoders"])
    cells = (len(config["tasks"]) * len(extrinsic_layers(config)) * len(analysis["intrinsic_measures"])
             * len(extrinsic_selection(config)))
    if not cells:
        return 0.0
    costs = job_costs()
    return costs.correlation_first_call + cells * costs.correlation_cell_seconds(
        k, analysis["n_permutations"], analysis["n_bootstrap"])


def job_projection(config: Mapping[str, Any], tokens: Mapping[str, float] | None = None,
                   widths: Mapping[str, int] | None = None) -> dict[str, tuple[int, float]]:
    """Per rule of a validated config: (jobs, projected single-thread CPU seconds of all of them).

    A job costs its rule's start-up (:class:`affine_homotopy.jobs.cost.JobCosts`) plus its work: the
    pairwise stages of :func:`study_projection` (intrinsic, probe, extrinsic, rank_deficiency), the
    forward pass of the embed jobs, per token of each task's examples where ``tokens`` (task -> mean
    tokens per example, :func:`affine_homotopy.jobs.cost_check.prepared_tokens` of a run's prepared
    data) has the task and else as long as the measured SST-2 sentences, and Table 1's correlations (:func:`correlation_work`); every other
    rule's work (tables, figures, data preparation, derived copies, provenance) is its per-job
    constant (``JobCosts.work``), measured on a reference run, or nothing where that run had no such
    job. A rule without a measured start-up is not projected (NaN). ``widths`` (encoder -> width, for
    a finished run its embeddings' widths: :func:`affine_homotopy.jobs.cost_check.run_widths`) overrides
    the widths this machine's model files give (:func:`encoder_widths`)."""
    costs = job_costs()
    projection = study_projection(config, widths)
    encoders = config["encoders"]
    stored = encoder_widths(encoders, widths)
    out = {}
    jobs = planned_jobs(config)
    split = "extrinsic_part" in jobs  # extrinsic.sources_per_job: the parts do the work
    for rule, count in jobs.items():
        # a part runs the extrinsic script and starts as an extrinsic job does; the merge that then
        # holds the rule's name only reads and writes tables (its start-up priced as the same script's)
        startup_rule = "extrinsic" if rule == "extrinsic_part" else rule
        if startup_rule not in costs.startup:
            out[rule] = (count, math.nan)
            continue
        if rule == "extrinsic_part":
            out[rule] = (count, count * costs.startup[startup_rule] + projection.rules.get("extrinsic", 0.0))
            continue
        if rule == "extrinsic" and split:
            out[rule] = (count, count * costs.startup[rule])
            continue
        if rule == "embed":
            # one job per (model encoder, task): one model load, both splits' examples
            work = sum(costs.embed_seconds(task_size(spec, "train") + task_size(spec, "dev"),
                                           stored[name], (tokens or {}).get(task))
                       for name, encoder in encoders.items() if encoder["source"] not in ("derived", "embeddings")
                       for task, spec in config["tasks"].items())
        elif rule == "correlate":
            work = correlation_work(config)
        elif rule in SIZED_RULES:
            work = projection.rules.get(rule, 0.0)
        else:
            work = count * costs.work.get(rule, 0.0)
        out[rule] = (count, count * costs.startup[rule] + work)
    return out


def study_estimate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Disk for all embeddings and the largest single job's memory, in MB, from the config; and the
    projected CPU time (``projection``, :func:`study_projection`)."""
    encoders = config["encoders"]
    n_layers = len(layer_positions(config["layers"]))  # a list, or {relative: [...]}
    widths = {name: encoder_width(name, encoders) for name in encoders}
    disk = 0.0
    largest = 0.0
    bytes_per_value = 2 if config["embedding"].get("storage_dtype") == "float16" else 4
    for spec in config["tasks"].values():
        n_train, n_dev = task_size(spec, "train"), task_size(spec, "dev")
        disk += sum((n_train + n_dev) * n_layers * d * bytes_per_value for d in widths.values()) / MB
        pair = pairwise_resources(n_train, list(widths.values()), config["intrinsic"]["block_mb"])
        largest = max(largest, pair["mem_mb"])
        for d in widths.values():
            largest = max(largest, embed_resources(n_train + n_dev, d, n_layers)["mem_mb"])
    return {"embeddings_disk_mb": disk, "largest_job_mem_mb": largest, "projection": study_projection(config)}


# Fixed requests for jobs whose size does not grow with the study; generous, and growing with each
# retry like the estimates above.
FIXED_RESOURCES = {
    "marker": {"mem_mb": 1000, "runtime": 10},  # staging markers, provenance, a probe table
    "table": {"mem_mb": 2000, "runtime": 30},  # statistics, tables and figures (pandas, matplotlib, permutations)
    "download": {"mem_mb": 4000, "runtime": 120},  # hub downloads: network-bound
    "data": {"mem_mb": 4000, "runtime": 20},  # one task split as a table (MNLI: 393k rows)
}


def fixed_resources(kind: str, attempt: int = 1) -> dict[str, int]:
    return {key: _scaled(value, attempt) for key, value in FIXED_RESOURCES[kind].items()}


def probe_resources(n_train: int, n_dev: int, width: int, n_layers: int, probe: Mapping[str, Any], n_random: int,
                    n_classes: int = 3, attempt: int = 1) -> dict[str, int]:
    """Memory of one encoder's task and random-label probes for every layer (``probe``: the config's
    ``probe`` section). Run time: :func:`projected_runtime`."""
    arrays_mb = (n_train + n_dev) * width * n_layers * 4 / MB
    heads_mb = 4 * n_train * (n_random + 1) * n_classes * 8 / MB  # logits and gradients of all heads, float64
    return {"mem_mb": _scaled(2000 + 3 * arrays_mb + heads_mb, attempt)}
