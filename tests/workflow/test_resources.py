"""Resource requests tell the truth: every job asks for memory and time, a GPU only when the config lets
it use one (the same rule for embedding and all-pairs jobs), the embed and all-pairs jobs the threads
the config gives them, rank_deficiency the threads of the intrinsic jobs (the same solver), and the
extrinsic jobs one thread (their certified LPs run on one
BLAS thread). Checked on the jobs Snakemake plans (dry runs) and on the rule files."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.helpers import DEMO, PAPER_GPU_RULES, REPO, paper_plan, planned_jobs, rule_blocks

pytestmark = [pytest.mark.workflow, pytest.mark.timeout(900)]
PAIRWISE = {"intrinsic", "rank_deficiency"}  # the d_aff solver: multi-threaded products


@pytest.fixture(scope="module")
def plans(dry_run) -> dict[str, list[dict[str, object]]]:
    runs = {
        "demo_cpu": ("--cores", "4", "--configfile", str(DEMO), "--config", "device=cpu"),
        "paper_cpu": paper_plan("cpu"),
        "paper_auto": paper_plan("auto"),
    }
    return {name: planned_jobs(dry_run(*args)) for name, args in runs.items()}


def test_every_planned_job_requests_memory_and_time(plans) -> None:
    for name, jobs in plans.items():
        assert len(jobs) > 50, f"{name}: only {len(jobs)} jobs parsed from the dry run"
        for job in jobs:
            resources = job["resources"]
            assert int(resources.get("mem_mb", 0)) > 0 and int(resources.get("runtime", 0)) > 0, (name, job)


def test_no_job_asks_for_a_gpu_under_device_cpu(plans) -> None:
    for name in ("demo_cpu", "paper_cpu"):
        asking = {job["rule"] for job in plans[name] if int(job["resources"].get("gpu", 0)) > 0}
        assert not asking, f"{name}: {sorted(asking)} request a GPU although device: cpu"
    asking = {job["rule"] for job in plans["paper_auto"] if int(job["resources"].get("gpu", 0)) > 0}
    assert asking == PAPER_GPU_RULES  # device: auto: embedding and the d_aff jobs; extrinsic.device: cpu


def test_rank_deficiency_has_the_threads_of_the_other_all_pairs_jobs(plans) -> None:
    threads = {job["rule"]: job["threads"] for job in plans["paper_cpu"] if job["rule"] in PAIRWISE}
    assert set(threads) == PAIRWISE and len(set(threads.values())) == 1 and threads["intrinsic"] > 1, threads


def test_thread_counts_follow_the_config(plans) -> None:
    """embedding.threads and intrinsic.threads set the embed and the all-pairs jobs' threads: the demo
    sets 1 for both, the paper config leaves the schema's default of 2."""
    demo = yaml.safe_load(DEMO.read_text())
    expected = {"embed": demo["embedding"]["threads"], "intrinsic": demo["intrinsic"]["threads"],
                "rank_deficiency": demo["intrinsic"]["threads"]}
    assert expected == {"embed": 1, "intrinsic": 1, "rank_deficiency": 1}  # else the check below shows nothing
    for name, wanted in (("demo_cpu", expected), ("paper_cpu", dict.fromkeys(expected, 2))):
        found = {job["rule"]: {j["threads"] for j in plans[name] if j["rule"] == job["rule"]}
                 for job in plans[name] if job["rule"] in expected}
        assert found == {rule: {count} for rule, count in wanted.items()}, (name, found)


def test_extrinsic_jobs_ask_for_the_one_thread_their_lps_use(plans) -> None:
    threads = {job["threads"] for job in plans["paper_cpu"] if job["rule"] in ("extrinsic_part", "extrinsic")}
    assert threads == {1}, threads
    assert any(job["rule"] == "extrinsic_part" for job in plans["paper_cpu"])  # the paper's jobs are split


def test_every_rule_in_the_rule_files_declares_memory_and_time() -> None:
    for file, name, block in rule_blocks():
        resources = re.search(r"(?m)^    resources:\n((?:        .*\n)+)", block)
        assert resources, f"{file}: rule {name} declares no resources"
        assert "mem_mb=" in resources[1] and "runtime=" in resources[1], f"{file}: rule {name}"


def test_run_times_of_the_all_pairs_and_probe_jobs_come_from_the_cost_model(plans) -> None:
    """Each planned job asks for at least the measured cost model's CPU time of that job (its task's N,
    the study's encoders; a part of the paper's extrinsic jobs, split by source, its share of the
    sources), and so for more on bigger tasks; none is a hand formula."""
    import yaml

    from affine_homotopy.study.validation import check_config
    from affine_homotopy.costs.model import project
    from affine_homotopy.costs.study import task_size

    config = check_config(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()), REPO / "workflow" / "schemas"
                          / "config.schema.yaml")
    widths = dict.fromkeys(config["encoders"], 768)
    assert config["extrinsic"]["sources_per_job"] == 1
    for rule, stage, share in (("intrinsic", "intrinsic", 1.0), ("extrinsic_part", "extrinsic", 1 / len(widths))):
        runtimes = {}
        for task, spec in config["tasks"].items():
            projected_minutes = share * project(config, widths, {task: task_size(spec, "train")}, 1).rules[stage] / 60
            requested = {int(job["resources"]["runtime"]) for job in plans["paper_auto"]
                         if job["rule"] == rule and job["wildcards"].get("task") == task}
            assert len(requested) == 1 and min(requested) >= projected_minutes, (rule, task, requested, projected_minutes)
            runtimes[task] = requested.pop()
        assert runtimes["sst2"] > runtimes["mrpc"] > runtimes["rte"], (rule, runtimes)  # N 67,349 > 3,668 > 2,490
