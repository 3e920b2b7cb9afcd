"""Per-job resource requests of the workflow's rules, from the config alone (no data needs to exist yet).

Snakemake rules call these through the functions of workflow/rules/resources.smk, so that a cluster
gets sensible ``mem_mb``/``runtime``/``disk_mb`` requests, and every estimate grows linearly with the
retry ``attempt``. Memory and disk are deliberately generous upper estimates; the run times of the
intrinsic, extrinsic, probe and rank-deficiency jobs come from the cost model
(:func:`affine_homotopy.costs.model.project`, one job's projection times :data:`RUNTIME_SAFETY`), the
embedding jobs' from a throughput estimate (the cost model does not project the forward pass).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .model import project

DEFAULT_PARAMETERS = 125_000_000  # roughly BERT/RoBERTa-base
MB = 2**20
# a base model's forward pass on one CPU core at 128 tokens, rounded down; GPUs are far faster
EMBED_EXAMPLES_PER_SECOND = 20


def _scaled(value: float, attempt: int) -> int:
    return int(math.ceil(value * max(1, attempt)))


# The cost model is single-threaded CPU on the measuring machine; a request of a few times the projection
# (plus 10 minutes of start-up) leaves room for slower cores and for the fits' error, and grows with each retry.
RUNTIME_SAFETY = 3.0
PROJECTED_RULES = ("intrinsic", "extrinsic", "probe", "rank_deficiency")


def projected_runtime(config: Mapping[str, Any], rule: str, widths: Mapping[str, int], n_train: int,
                      n_layers: int = 1, rank_deficiency_copies: int = 0, threads: int = 1,
                      attempt: int = 1) -> int:
    """Minutes to request for one job of ``rule`` (one of :data:`PROJECTED_RULES`): the cost model's
    CPU time for that job (``widths``: the encoders it handles; ``n_layers``: layers in the job),
    spread over ``threads``, times :data:`RUNTIME_SAFETY`. The job's layers count for every rule (a
    probe job fits the extrinsic layers, an intrinsic or extrinsic job one layer). Every pair is
    costed at full rank and as not exact (no :func:`~affine_homotopy.costs.study.effective_widths`, no
    :func:`~affine_homotopy.costs.study.affine_pairs`): a
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
        "runtime": _scaled(10 + n / EMBED_EXAMPLES_PER_SECOND / 60, attempt),
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
