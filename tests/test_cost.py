"""The cost model's fit and projection (affine_homotopy.cost): exact properties on synthetic timings,
not the timings themselves."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml

from affine_homotopy.cost import D_REF, N_REF, STAGE_COSTS, StageCost, fit_stage, project

SCHEMA = "workflow/schemas/config.schema.yaml"


def test_fit_recovers_known_exponents() -> None:
    a, alpha, beta = 3.0, 1.3, 1.8
    points = [(n, d, a * (n / N_REF) ** alpha * (d / D_REF) ** beta) for n in (2000, 8000, 20000, 67349)
              for d in (D_REF,)] + [(2000, 768, a * 0.2**alpha * 2**beta), (8000, 768, a * 0.8**alpha * 2**beta)]
    seconds, n_exp, d_exp, residual = fit_stage(points)
    assert (seconds, n_exp, d_exp) == pytest.approx((a, alpha, beta), rel=1e-9)
    assert residual < 1e-12
    noisy = [(n, d, t * (1.1 if k % 2 else 0.9)) for k, (n, d, t) in enumerate(points)]
    assert fit_stage(noisy)[3] > 0.05  # noise shows in the residual
    with pytest.raises(ValueError, match="two or more N"):
        fit_stage([(2000, D_REF, 1.0), (2000, 768, 2.0)])


@pytest.fixture(scope="module")
def paper_config() -> dict:
    from affine_homotopy.config import check_config

    with open("config/paper.yaml") as handle:
        return check_config(yaml.safe_load(handle), SCHEMA)


def projection_of(config: dict, k: int, n: int, n_layers: int = 2, copies: int = 0):
    return project(config, {f"e{i}": D_REF for i in range(k)}, {"task": n}, n_layers, copies)


def test_projection_grows_as_the_model_says(paper_config) -> None:
    paper_config = copy.deepcopy(paper_config)
    paper_config["intrinsic"]["measures"] = ["d_aff", "d_lin", "cka"]  # every stage counted
    base = projection_of(paper_config, 4, N_REF)
    # pairwise stages grow as K (K - 1), per-encoder stages as K
    double_k = projection_of(paper_config, 8, N_REF)
    assert double_k.stages["d_aff"] / base.stages["d_aff"] == pytest.approx(8 * 7 / (4 * 3))
    assert double_k.stages["task_probe"] / base.stages["task_probe"] == pytest.approx(2)
    # N enters through each stage's exponent, layers linearly
    double_n = projection_of(paper_config, 4, 2 * N_REF)
    for stage, cost in STAGE_COSTS.items():
        assert double_n.stages[stage] / base.stages[stage] == pytest.approx(2**cost.n_exponent)
    assert projection_of(paper_config, 4, N_REF, n_layers=4).total / base.total == pytest.approx(2)
    # the rules partition the stages
    assert base.total == pytest.approx(sum(base.stages.values()))
    assert base.dominant_stage == max(base.stages, key=base.stages.get)


def test_projection_follows_the_config(paper_config) -> None:
    config = copy.deepcopy(paper_config)
    config["extrinsic"]["n_random_classifiers"] = 0
    config["extrinsic"]["worst_search"].update(steps=0, candidates=0)
    bare = projection_of(config, 4, N_REF)
    assert bare.stages["d_worst"] == bare.stages["random_probe"] == bare.stages["d_worst_search"] == 0
    config["extrinsic"]["n_random_classifiers"] = 50
    half = projection_of(config, 4, N_REF)
    config["extrinsic"]["n_random_classifiers"] = 100
    full = projection_of(config, 4, N_REF)
    assert full.stages["d_worst"] == pytest.approx(2 * half.stages["d_worst"])
    with_grid = projection_of(config, 4, N_REF, copies=10)
    assert with_grid.rules["rank_deficiency"] == pytest.approx(
        10 * STAGE_COSTS["factorise"].seconds(N_REF, D_REF) + 90 * STAGE_COSTS["d_aff"].seconds(N_REF, D_REF))


def test_projection_counts_only_the_selected_measures(paper_config) -> None:
    config = copy.deepcopy(paper_config)
    config["intrinsic"]["measures"] = ["d_aff"]
    bare = projection_of(config, 4, N_REF)
    assert bare.stages["d_lin"] == bare.stages["baselines"] == 0
    config["intrinsic"]["measures"] = ["d_aff", "d_lin", "pwcca"]
    both = projection_of(config, 4, N_REF)
    # each selected stage adds its K (K - 1) pairs per layer, to the intrinsic rule only
    added = 2 * 12 * (STAGE_COSTS["d_lin"].seconds(N_REF, D_REF) + STAGE_COSTS["baselines"].seconds(N_REF, D_REF))
    assert both.rules["intrinsic"] - bare.rules["intrinsic"] == pytest.approx(added)
    assert both.rules["extrinsic"] == bare.rules["extrinsic"]


def test_stage_cost_formula() -> None:
    cost = StageCost(2.0, 1.5, 2.0, "ordered pair")
    assert cost.seconds(N_REF, D_REF) == 2.0
    assert cost.seconds(4 * N_REF, 2 * D_REF) == pytest.approx(2.0 * 8 * 4)
    assert math.isfinite(cost.seconds(1, 1)) and np.isclose(cost.seconds(N_REF, D_REF), cost.seconds_ref)


def test_start_up_estimate_reports_the_projection(paper_config) -> None:
    from affine_homotopy.resources import study_estimate

    estimate = study_estimate(paper_config)
    projection = estimate["projection"]
    assert set(projection.rules) == {"intrinsic", "probe", "extrinsic", "rank_deficiency"}
    assert projection.total > 0 and projection.rules["rank_deficiency"] > 0
    assert f"dominant stage: {projection.dominant_stage}" in projection.summary()


def test_the_intrinsic_runtime_estimate_follows_the_measure_selection() -> None:
    from affine_homotopy.resources import minimax_solves, pairwise_resources

    assert minimax_solves({"intrinsic": {"measures": ["d_aff", "cka"]}}) == 1
    assert minimax_solves({"intrinsic": {"measures": ["d_aff", "d_lin"]}}) == 2
    one = pairwise_resources(20_000, [768] * 10, 1024, solves=1)["runtime"]
    two = pairwise_resources(20_000, [768] * 10, 1024, solves=2)["runtime"]
    assert two - 10 == pytest.approx(2 * (one - 10), abs=2)  # 10 minutes of start-up, the rest per solve
