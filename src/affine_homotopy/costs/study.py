"""A study's cost from its config: the sizes and widths it works at, its projected CPU time per rule
and stage, and per rule its jobs (Snakemake's own plan of the workflow) with their CPU time.

Sizes that the config does not fix are taken from what is known about the source: GLUE split sizes
for ``glue`` tasks, the line count of a ``glue_dir`` file, a model's ``config.json`` for local
models, and BERT-base's width (768) for hub models that are not downloaded yet.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..study.layers import layer_positions
from ..study.model_lookup import base_encoder, local_model_dir
from ..study.tasks import glue_dir_files
from .model import Projection, job_costs, project
from .resources import MB, PROJECTED_RULES, embed_resources, pairwise_resources

GLUE_SIZES = {  # (train, dev) examples of nyu-mll/glue; MNLI dev = validation_matched
    "sst2": (67_349, 872), "mrpc": (3_668, 408), "rte": (2_490, 277),
    "cola": (8_551, 1_043), "mnli": (392_702, 9_815), "qqp": (363_846, 40_430),
}
DEFAULT_WIDTH = 768


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
    """Encoder -> its stored width: ``known`` (encoder -> width, e.g. :func:`affine_homotopy.costs.check.run_widths`
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
    drops a real encoder's smallest directions, the image keeps their share, the residuals stay above
    the float floor and the pair costs as any pair. A truncated copy lies in the span its base keeps,
    so its pairs stay exact."""
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




def study_projection(config: Mapping[str, Any], widths: Mapping[str, int] | None = None) -> Projection:
    """Projected single-thread CPU time per rule of a validated config (:func:`affine_homotopy.costs.model.project`):
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


# the rules whose work job_projection sizes from the config; every other rule's work is a per-job constant
SIZED_RULES = (*PROJECTED_RULES, "embed", "correlate")


def planned_jobs(config: Mapping[str, Any], snakefile: str | os.PathLike[str] = "workflow/Snakefile"
                 ) -> dict[str, int]:
    """Jobs per rule of a whole run of ``config``, as the workflow plans them: the job-stats table of
    ``snakemake -n --forceall`` on that config (run in the current folder, as the study is). Not the
    staging downloads, which run only for what ``resources/`` lacks, nor the ``all`` target."""
    import yaml

    with tempfile.TemporaryDirectory() as folder:
        configfile = Path(folder) / "config.yaml"
        configfile.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--quiet", "rules", "--nolock",
                               "--snakefile", str(snakefile), "--configfile", str(configfile)],
                              capture_output=True, text=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"),
                              timeout=600)  # a dry run parses and plans, it never takes minutes
    if done.returncode != 0 or "Job stats:" not in done.stdout:
        raise DataError(f"snakemake could not plan the workflow {snakefile} for this config:\n"
                        f"{(done.stdout + done.stderr)[-2000:]}")
    return job_stats(done.stdout)


def job_stats(output: str) -> dict[str, int]:
    """Rule -> jobs of the first job-stats table in Snakemake's output, less ``all``, ``total`` and the
    ``download_*`` rules."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    return {rule: n for rule, n in counts.items() if rule not in ("all", "total") and not rule.startswith("download_")}


def correlation_work(config: Mapping[str, Any]) -> float:
    """The correlate job's work: Table 1's correlations, one per task, extrinsic layer, intrinsic
    measure (``analysis.intrinsic_measures``) and extrinsic measure (``extrinsic.measures``), each over
    the encoders of ``analysis.encoder_group`` (all when null) with the configured permutations and
    resamples (:meth:`affine_homotopy.costs.model.JobCosts.correlation_cell_seconds`), and the first
    correlation's one-off cost (``JobCosts.correlation_first_call``)."""
    from ..study.selection import extrinsic_selection
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


def embed_work(config: Mapping[str, Any], widths: Mapping[str, int], tokens: Mapping[str, float] | None) -> float:
    """The embed jobs' work: one per (model encoder, task), one model load and both splits' examples."""
    costs = job_costs()
    return sum(costs.embed_seconds(task_size(spec, "train") + task_size(spec, "dev"), widths[name],
                                   (tokens or {}).get(task))
               for name, encoder in config["encoders"].items() if encoder["source"] not in ("derived", "embeddings")
               for task, spec in config["tasks"].items())


def job_projection(config: Mapping[str, Any], jobs: Mapping[str, int], tokens: Mapping[str, float] | None = None,
                   widths: Mapping[str, int] | None = None) -> dict[str, tuple[int, float]]:
    """Per rule of a validated config whose workflow plans ``jobs`` (rule -> jobs, :func:`planned_jobs`):
    (jobs, projected single-thread CPU seconds of all of them).

    A job costs its rule's start-up (:class:`affine_homotopy.costs.model.JobCosts`) plus its work: the
    pairwise stages of :func:`study_projection` (intrinsic, probe, extrinsic, rank_deficiency), the
    forward pass of the embed jobs (:func:`embed_work`; per token of each task's examples where
    ``tokens``, task -> mean tokens per example of a run's prepared data, has the task), and Table 1's
    correlations (:func:`correlation_work`); every other rule's work is its per-job constant
    (``JobCosts.work``), measured on a reference run, or nothing where that run had no such job. A rule
    without a measured start-up is not projected (NaN). ``widths`` (encoder -> width, for a finished
    run its embeddings' widths) overrides the widths this machine's model files give (:func:`encoder_widths`)."""
    costs = job_costs()
    projection = study_projection(config, widths)
    split = "extrinsic_part" in jobs  # extrinsic.sources_per_job: the parts do the work
    out = {}
    for rule, count in jobs.items():
        # a part runs the extrinsic script and starts as an extrinsic job does; the merge that then
        # holds the rule's name only reads and writes tables (its start-up priced as the same script's)
        startup_rule = "extrinsic" if rule == "extrinsic_part" else rule
        if startup_rule not in costs.startup:
            out[rule] = (count, math.nan)
        elif rule == "extrinsic_part":
            out[rule] = (count, count * costs.startup[startup_rule] + projection.rules.get("extrinsic", 0.0))
        elif rule == "extrinsic" and split:
            out[rule] = (count, count * costs.startup[rule])
        else:
            if rule == "embed":
                work = embed_work(config, encoder_widths(config["encoders"], widths), tokens)
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


