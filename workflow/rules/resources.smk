# Per-job resources (mem_mb, runtime, disk_mb) estimated from the config; they grow with each retry.
import functools
import math

from affine_homotopy.costs.resources import (
    embed_resources,
    fixed_resources,
    pairwise_resources,
    probe_resources,
    projected_runtime,
)
from affine_homotopy.costs.study import encoder_width, task_size

TASK_SIZES = {(t, s): task_size(config["tasks"][t], s) for t in TASKS for s in SPLITS}
WIDTHS = {e: encoder_width(e, config["encoders"]) for e in ENCODERS}


def embed_resource(key):
    # one embed job runs both splits of its task
    def estimate(wildcards, attempt):
        n = sum(TASK_SIZES[(wildcards.task, split)] for split in SPLITS)
        return embed_resources(n, WIDTHS[wildcards.encoder], len(LAYERS), attempt)[key]

    return estimate


@functools.cache
def all_pairs_runtime(rule, n, attempt):
    # the same for every job of `rule` on a task of n fit examples (every layer): one projection each
    return projected_runtime(config, rule, WIDTHS, n, attempt=attempt)


def pairwise_resource(key, rule="intrinsic"):
    # one all-pairs job (task, layer) of `rule`; run time from the measured cost model
    def estimate(wildcards, attempt):
        n = TASK_SIZES[(wildcards.task, "train")]
        if key == "runtime":
            return all_pairs_runtime(rule, n, attempt)
        block = config["intrinsic"]["block_mb"]
        return pairwise_resources(n, list(WIDTHS.values()), block, 8, attempt)[key]

    return estimate


def extrinsic_part_runtime(wildcards, attempt):
    # the single extrinsic job's request, shared by its parts in proportion to their sources
    n = TASK_SIZES[(wildcards.task, "train")]
    share = len(EXTRINSIC_PARTS[int(wildcards.part)]) / len(ENCODERS)
    return max(10, math.ceil(all_pairs_runtime("extrinsic", n, attempt) * share))


def rank_deficiency_resource(key):
    # one all-pairs job over every truncation level of every encoder of the group
    def estimate(wildcards, attempt):
        n = TASK_SIZES[(wildcards.task, "train")]
        levels = config["analysis"]["rank_deficiency"]["levels"]
        widths = [WIDTHS[e] for e in RANK_DEFICIENCY_GROUP for _ in levels]
        if key == "runtime":
            group = {e: WIDTHS[e] for e in RANK_DEFICIENCY_GROUP}
            return projected_runtime(
                config, "rank_deficiency", group, n, rank_deficiency_copies=len(widths), attempt=attempt
            )
        return pairwise_resources(n, widths, config["intrinsic"]["block_mb"], 8, attempt)[key]

    return estimate


def probe_resource(key):
    def estimate(wildcards, attempt):
        sizes = TASK_SIZES[(wildcards.task, "train")], TASK_SIZES[(wildcards.task, "dev")]
        width = WIDTHS[wildcards.encoder]
        n_layers = len(EXTRINSIC_LAYERS)
        if key == "runtime":  # this encoder's probes of every extrinsic layer, from the measured cost model
            return projected_runtime(config, "probe", {wildcards.encoder: width}, sizes[0], n_layers, attempt=attempt)
        return probe_resources(*sizes, width, n_layers, config["probe"], N_RANDOM_PROBES, attempt=attempt)[key]

    return estimate


def fixed_resource(kind, key):
    # jobs whose size does not grow with the study: markers, tables, figures, downloads
    return lambda wildcards, attempt: fixed_resources(kind, attempt)[key]
