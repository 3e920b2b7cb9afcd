"""The cost model's fit and projection (affine_homotopy.costs.model): exact properties on synthetic timings,
not the timings themselves."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
import yaml

from affine_homotopy.core.measures import EXTRINSIC_MEASURES
from affine_homotopy.costs.model import (D_REF, MEASURED_SETTINGS, N_REF, WORKING_SET_STAGES, StageCost, fit_stage,
                                         project, solver_stage, stage_costs)

STAGE_COSTS = stage_costs()

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
    from affine_homotopy.study.validation import check_config

    with open("config/paper.yaml") as handle:
        return check_config(yaml.safe_load(handle), SCHEMA)


def projection_of(config: dict, k: int, n: int, n_layers: int = 2, copies: int = 0, exact=frozenset({("e0", "e1")})):
    """K encoders of width D_REF, one pair of them exact (so that every stage counts)."""
    return project(config, {f"e{i}": D_REF for i in range(k)}, {"task": n}, n_layers, copies, exact_pairs=exact)


def test_projection_grows_as_the_model_says(paper_config) -> None:
    paper_config = copy.deepcopy(paper_config)
    paper_config["intrinsic"]["measures"] = ["d_aff", "d_lin", "cka"]  # every stage counted
    paper_config["extrinsic"].update(measures=list(EXTRINSIC_MEASURES), layers=None)  # at every layer
    base = projection_of(paper_config, 4, N_REF)
    # pairwise stages grow as K (K - 1), per-encoder stages as K; the exact pair is counted apart
    double_k = projection_of(paper_config, 8, N_REF)
    assert double_k.stages["d_aff"] / base.stages["d_aff"] == pytest.approx((8 * 7 - 1) / (4 * 3 - 1))
    for stage in ("d_psi", "d_worst", "d_worst_search"):
        assert double_k.stages[stage] / base.stages[stage] == pytest.approx((8 * 7 - 1) / (4 * 3 - 1)), stage
        assert double_k.stages[f"{stage}_exact"] == pytest.approx(base.stages[f"{stage}_exact"]), stage
        assert base.stages[f"{stage}_exact"] > 0, stage
    assert double_k.stages["d_aff_exact"] == pytest.approx(base.stages["d_aff_exact"])
    assert base.stages["d_aff_exact"] > 0
    assert double_k.stages["task_probe"] / base.stages["task_probe"] == pytest.approx(2)
    # N enters through each stage's exponent, layers linearly
    double_n = projection_of(paper_config, 4, 2 * N_REF)
    for stage, cost in STAGE_COSTS.items():
        if stage in WORKING_SET_STAGES.values():
            assert double_n.stages[stage] == base.stages[stage] == 0  # priced into its base stage
        elif stage in WORKING_SET_STAGES:  # 2 N_REF rows at D_REF take the working-set path, N_REF rows do not
            path = STAGE_COSTS[solver_stage(stage, 2 * N_REF, D_REF)]
            assert solver_stage(stage, N_REF, D_REF) == stage and path is not cost
            assert double_n.stages[stage] / base.stages[stage] == pytest.approx(
                path.seconds(2 * N_REF, D_REF) / cost.seconds(N_REF, D_REF))
        else:
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
    assert bare.stages["d_worst_exact"] == bare.stages["d_worst_search_exact"] == 0
    config["extrinsic"]["n_random_classifiers"] = 50
    half = projection_of(config, 4, N_REF)
    config["extrinsic"]["n_random_classifiers"] = 100
    full = projection_of(config, 4, N_REF)
    assert full.stages["d_worst"] == pytest.approx(2 * half.stages["d_worst"])
    assert full.stages["d_worst_exact"] == pytest.approx(2 * half.stages["d_worst_exact"])
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


def test_projection_counts_only_the_selected_extrinsic_measures(paper_config) -> None:
    """d_worst_search's stage only when selected; without d_worst neither it nor its random-label probes.
    Each difference is the unselected stages' K (K - 1) pairs per extrinsic layer, from STAGE_COSTS."""
    config = copy.deepcopy(paper_config)
    config["extrinsic"]["layers"] = None  # every one of the projection's layers
    k, n_layers, pairs = 4, 2, 12
    config["extrinsic"]["measures"] = ["d_psi", "d_worst", "d_worst_search"]
    full = projection_of(config, k, N_REF, n_layers)
    config["extrinsic"]["measures"] = ["d_psi", "d_worst"]
    worst = projection_of(config, k, N_REF, n_layers)
    config["extrinsic"]["measures"] = ["d_psi"]
    bare = projection_of(config, k, N_REF, n_layers)
    assert full.stages["d_worst_search"] > 0 and worst.stages["d_worst_search"] == 0
    search = config["extrinsic"]["worst_search"]
    search_scale = (search["steps"] + search["candidates"]) / MEASURED_SETTINGS["search_work"]
    # projection_of's one exact pair costs the exact stages, the other pairs the full ones
    assert full.rules["extrinsic"] - worst.rules["extrinsic"] == pytest.approx(
        n_layers * search_scale * ((pairs - 1) * STAGE_COSTS["d_worst_search"].seconds(N_REF, D_REF)
                                   + STAGE_COSTS["d_worst_search_exact"].seconds(N_REF, D_REF)))
    assert bare.stages["d_worst"] == bare.stages["random_probe"] == 0 < worst.stages["random_probe"]
    n_random = config["extrinsic"]["n_random_classifiers"]
    assert worst.rules["extrinsic"] - bare.rules["extrinsic"] == pytest.approx(
        n_layers * n_random * ((pairs - 1) * STAGE_COSTS["d_worst"].seconds(N_REF, D_REF)
                               + STAGE_COSTS["d_worst_exact"].seconds(N_REF, D_REF)))
    assert worst.rules["probe"] - bare.rules["probe"] == pytest.approx(worst.stages["random_probe"])
    # the intrinsic rule and the task probes do not depend on the extrinsic selection
    for part in (worst, bare):
        assert part.rules["intrinsic"] == full.rules["intrinsic"]
        assert part.stages["task_probe"] == full.stages["task_probe"]
        assert part.total == pytest.approx(sum(part.stages.values()))


@pytest.mark.parametrize("extrinsic_layers", [1, 3])
def test_the_probe_and_extrinsic_rules_run_at_the_extrinsic_layers(paper_config, extrinsic_layers: int) -> None:
    """extrinsic.layers scales the probe and extrinsic rules (and their stages) by its number of layers;
    the intrinsic rule stays at every configured layer."""
    config = copy.deepcopy(paper_config)
    config["extrinsic"]["layers"] = None
    n_layers = 4
    every = projection_of(config, 4, N_REF, n_layers)
    config["extrinsic"]["layers"] = [1, 4, 8, 12][-extrinsic_layers:]
    part = projection_of(config, 4, N_REF, n_layers)
    ratio = extrinsic_layers / n_layers
    assert part.rules["intrinsic"] == pytest.approx(every.rules["intrinsic"])
    for rule in ("probe", "extrinsic"):
        assert part.rules[rule] == pytest.approx(ratio * every.rules[rule]), rule
    for stage in ("task_probe", "random_probe", "d_psi", "d_worst", "d_worst_search"):
        assert part.stages[stage] == pytest.approx(ratio * every.stages[stage]), stage
    assert part.stages["d_aff"] == every.stages["d_aff"] and part.total == pytest.approx(sum(part.stages.values()))
    # an explicit count (one job's layers, costs.resources.projected_runtime) overrides the config's
    assert project(config, {f"e{i}": D_REF for i in range(4)}, {"task": N_REF}, n_layers,
                   extrinsic_layers=n_layers, exact_pairs={("e0", "e1")}).rules == pytest.approx(every.rules)


def test_study_projection_runs_the_extrinsic_rules_at_the_extrinsic_layers(paper_config) -> None:
    """The start-up projection of a config: probe and extrinsic rules at extrinsic.layers only."""
    from affine_homotopy.costs.study import study_projection

    config = copy.deepcopy(paper_config)
    config["extrinsic"]["layers"] = None
    every = study_projection(config)
    config["extrinsic"]["layers"] = [12]
    final = study_projection(config)
    n_layers = len(config["layers"])
    assert final.rules["intrinsic"] == pytest.approx(every.rules["intrinsic"])
    for rule in ("probe", "extrinsic"):
        assert final.rules[rule] == pytest.approx(every.rules[rule] / n_layers), rule


def test_d_aff_is_priced_by_the_solver_path_it_takes() -> None:
    """Below the working-set rule's threshold a pair costs d_aff's power law, from it on d_aff_working_set's;
    the threshold is the solver's own rule (N >= 10 first sets of 4 (D + 1) rows)."""
    from affine_homotopy.core.minimax import uses_working_set

    for width in (384, 768):
        threshold = 10 * 4 * (width + 1)
        assert not uses_working_set(threshold - 1, width + 1) and uses_working_set(threshold, width + 1)
        assert solver_stage("d_aff", threshold - 1, width) == "d_aff"
        assert solver_stage("d_aff", threshold, width) == "d_aff_working_set"
    assert solver_stage("d_psi", 10**6, 384) == "d_psi"  # no working-set path
    assert solver_stage("d_lin", 15_360, 384) == "d_lin_working_set"  # its design has no constant column
    costs = {"factorise": StageCost(0, 0, 0, "encoder"), "d_aff": StageCost(1.0, 1.0, 0, "ordered pair"),
             "d_aff_working_set": StageCost(0.25, 0.5, 0, "ordered pair")}
    costs.update({stage: StageCost(0, 0, 0, unit) for stage, unit in
                  (("d_aff_exact", "exact ordered pair"), ("d_lin", "ordered pair"),
                   ("d_lin_working_set", "ordered pair"), ("baselines", "ordered pair"),
                   ("task_probe", "encoder layer"), ("random_probe", "random classifier"), ("d_psi", "ordered pair"),
                   ("d_worst", "random classifier"), ("d_worst_search", "ordered pair"),
                   ("d_psi_exact", "exact ordered pair"), ("d_worst_exact", "random classifier"),
                   ("d_worst_search_exact", "exact ordered pair"))})
    config = {"probe": {"l2_grid": [1.0], "max_iter": 10, "random_max_iter": 10},
              "extrinsic": {"random_probes": {"method": "sgd", "epochs": 1, "learning_rates": [1.0]},
                            "worst_search": {"steps": 0, "candidates": 0}, "measures": ["d_psi"],
                            "n_random_classifiers": 0},
              "intrinsic": {"measures": ["d_aff"]}}
    widths = {"a": 384, "b": 384}
    for n, expected in ((15_399, 2 * 1.0 * 15_399 / N_REF), (15_400, 2 * 0.25 * (15_400 / N_REF) ** 0.5)):
        projected = project(config, widths, {"task": n}, 1, costs=costs)
        assert projected.stages["d_aff"] == pytest.approx(expected)


def test_stage_cost_formula() -> None:
    cost = StageCost(2.0, 1.5, 2.0, "ordered pair")
    assert cost.seconds(N_REF, D_REF) == 2.0
    assert cost.seconds(4 * N_REF, 2 * D_REF) == pytest.approx(2.0 * 8 * 4)
    assert math.isfinite(cost.seconds(1, 1)) and np.isclose(cost.seconds(N_REF, D_REF), cost.seconds_ref)


def test_width_factors_pass_through_each_measured_width_and_extend_with_the_outer_slopes() -> None:
    factors = ((96, 0.1), (192, 0.4), (768, 16.0))
    cost = StageCost(2.0, 1.0, 4.0, "ordered pair", factors)
    for width, factor in (*factors, (D_REF, 1.0)):  # each knot, and 1 at D_REF
        assert cost.seconds(N_REF, width) == pytest.approx(2.0 * factor)
    # between two knots the geometric mean at the geometric middle (linear in log D and log cost)
    assert cost.width_factor(math.sqrt(96 * 192)) == pytest.approx(math.sqrt(0.1 * 0.4))
    assert cost.width_factor(math.sqrt(192 * D_REF)) == pytest.approx(math.sqrt(0.4))
    # beyond the outer widths the outer segments' slopes: 0.1 -> 0.4 over a doubling is a slope of 2,
    # 1 -> 16 over a doubling a slope of 4
    assert cost.width_factor(48) == pytest.approx(0.1 / 4)
    assert cost.width_factor(1536) == pytest.approx(16.0 * 16)
    # one measured width: the power law through it, whatever the d_exponent field says
    single = StageCost(1.0, 0.0, 0.0, "ordered pair", ((768, 2 ** 1.5),))
    for width in (100, 300, 500, 1000, 3000):
        assert single.width_factor(width) == pytest.approx((width / D_REF) ** 1.5)
    # none: the power d_exponent, 1 everywhere at 0
    assert StageCost(1.0, 0.0, 1.5, "ordered pair").width_factor(768) == pytest.approx(2 ** 1.5)
    assert StageCost(1.0, 0.0, 0.0, "ordered pair").width_factor(76) == 1.0


def test_fit_recovers_each_widths_factor_at_the_reference_line() -> None:
    from affine_homotopy.costs.model import fit_width_factors

    a, alpha = 3.0, 0.8
    line = lambda n: a * (n / N_REF) ** alpha  # noqa: E731
    truth = {96: 0.15, 192: 0.45, 768: 9.0}
    points = [(n, D_REF, line(n)) for n in (2000, 8000, 20000)]
    # the narrow widths at N = 2,000 only, the wide one at two other N: each compares with the line at its N
    points += [(2000, 96, truth[96] * line(2000)), (2000, 192, truth[192] * line(2000)),
               (5000, 768, truth[768] * line(5000) * 1.1), (12000, 768, truth[768] * line(12000) / 1.1)]
    factors = fit_width_factors(points)
    assert factors == pytest.approx(truth, rel=1e-9)  # the geometric mean of 1.1 and 1 / 1.1 is 1
    seconds, n_exp, d_exp, _ = fit_stage(points)
    assert (seconds, n_exp) == pytest.approx((a, alpha))
    assert d_exp == pytest.approx(math.log(9.0) / math.log(2))  # the power just above D_REF
    # narrow widths only: the power of the segment below D_REF, which the projection extends above it
    narrow = points[:5]
    assert fit_stage(narrow)[2] == pytest.approx(math.log(0.45) / math.log(192 / D_REF))
    assert StageCost(a, alpha, 0.0, "ordered pair", tuple(fit_width_factors(narrow).items())).width_factor(768) == \
        pytest.approx(2 ** (math.log(0.45) / math.log(192 / D_REF)))
    assert fit_width_factors([(n, D_REF, line(n)) for n in (2000, 8000)]) == {}


def test_start_up_estimate_reports_the_projection(paper_config) -> None:
    from affine_homotopy.costs.study import study_estimate

    estimate = study_estimate(paper_config)
    projection = estimate["projection"]
    assert set(projection.rules) == {"intrinsic", "probe", "extrinsic", "rank_deficiency"}
    assert projection.total > 0 and projection.rules["rank_deficiency"] > 0
    assert f"dominant stage: {projection.dominant_stage}" in projection.summary()


def test_the_projection_prints_when_asked(paper_config, capsys) -> None:
    """`python -m affine_homotopy.costs project` prints each rule's and the total CPU hours of the config's
    projection, on one core and on the cores given, and its dominant stage."""
    from affine_homotopy.costs.__main__ import main
    from affine_homotopy.costs.study import study_projection

    main(["project", "--configfile", "config/paper.yaml", "--cores", "4"])
    out = capsys.readouterr().out
    projection = study_projection(paper_config)
    for rule, seconds in projection.rules.items():
        assert re.search(rf"^{rule}\s+{seconds / 3600:.3g}\s+{seconds / 3600 / 4:.3g}$", out, re.M), (rule, out)
    assert re.search(rf"^total\s+{projection.total / 3600:.3g}\s+{projection.total / 3600 / 4:.3g}$", out, re.M), out
    assert f"dominant stage: {projection.dominant_stage}" in out


def toy_config(method: str = "sgd") -> dict:
    """The keys project() reads, set away from the measured settings so that every scale factor counts."""
    return {
        "intrinsic": {"measures": ["d_aff", "d_lin", "d_iso", "cka"]},
        "probe": {"l2_grid": [0.01, 0.1], "max_iter": 250, "random_max_iter": 40},
        "extrinsic": {"measures": ["d_psi", "d_worst", "d_worst_search"], "n_random_classifiers": 10,
                      "random_probes": {"method": method, "epochs": 10, "learning_rates": [0.1, 0.2]},
                      "worst_search": {"steps": 3, "candidates": 10}},
    }


@pytest.mark.parametrize("method", ["sgd", "lbfgs"])
def test_projected_hours_of_a_toy_study_match_a_hand_computation(method: str) -> None:
    """3 encoders (widths 384, 768, 384), one task of N = 20,000, 2 layer positions, a grid of 4 copies:
    every stage written out from the coefficients, T = a (N / 10,000)^b (D / 384)^c per unit (c through the
    factor measured at D = 768), a pair at
    the geometric mean of its two widths (its extrinsic stages at its source's), d_aff by the solver path
    the pair takes."""
    widths, n, layers, copies = {"e0": 384, "e1": 768, "e2": 384}, 20_000, 2, 4

    def t(stage: str, d: int) -> float:
        a, b = STAGE_COSTS[stage].seconds_ref, STAGE_COSTS[stage].n_exponent
        # every width here lies in [384, 768]: the power through the factor measured at 768 (d_factors), else
        # the power of the segment from the widest measured width below 384, else d_exponent's
        factors = dict(STAGE_COSTS[stage].d_factors)
        below = max((w for w in factors if w < 384), default=None)
        c = (math.log(factors[768]) / math.log(2) if 768 in factors
             else math.log(factors[below]) / math.log(below / 384) if below else STAGE_COSTS[stage].d_exponent)
        return a * 2.0**b * (d / 384) ** c  # N / N_REF = 2

    wide = 768  # the grid of copies at the widest encoder
    mixed = math.sqrt(384 * 768)  # e0 <-> e1 and e2 <-> e1: four ordered pairs; e0 <-> e2 at 384
    per_encoder = lambda stage: t(stage, 384) + t(stage, 768) + t(stage, 384)  # noqa: E731
    per_pair = lambda stage: 4 * t(stage, mixed) + 2 * t(stage, 384)  # noqa: E731
    task_probe_scale = (2 * 250) / (4 * 500)  # l2 grid x max_iter, against the measured 4 x 500
    random_scale = (10 * 2) / (20 * 4) if method == "sgd" else 40 / (20 * 4)  # epochs x rates, or L-BFGS iterations
    search_scale = (3 + 10) / 7  # steps + candidates, against the measured 3 + 4
    # d_aff and d_lin: at N = 20,000 the two pairs at 384 take the working-set path (N >= 10 x 4 x 385, or
    # 384 without the constant), the wider ones not
    d_aff = 4 * t("d_aff", mixed) + 2 * t("d_aff_working_set", 384)
    d_lin = 4 * t("d_lin", mixed) + 2 * t("d_lin_working_set", 384)
    intrinsic = layers * (per_encoder("factorise") + d_aff + d_lin + per_pair("baselines"))
    probe = layers * (task_probe_scale * per_encoder("task_probe") + random_scale * 10 * per_encoder("random_probe"))
    # the extrinsic stages at the source's width: e1 is the source of two pairs, e0 and e2 of two each
    per_source = lambda stage: 2 * t(stage, 768) + 4 * t(stage, 384)  # noqa: E731
    extrinsic = layers * (per_encoder("factorise") + per_source("d_psi") + 10 * per_source("d_worst")
                          + search_scale * per_source("d_worst_search"))
    rank_deficiency = copies * t("factorise", wide) + copies * (copies - 1) * t("d_aff", wide)
    expected_hours = (intrinsic + probe + extrinsic + rank_deficiency) / 3600

    projection = project(toy_config(method), widths, {"task": n}, layers, copies)
    assert projection.rules == pytest.approx({"intrinsic": intrinsic, "probe": probe, "extrinsic": extrinsic,
                                              "rank_deficiency": rank_deficiency}, rel=1e-12)
    assert projection.total / 3600 == pytest.approx(expected_hours, rel=1e-12)
    assert projection.summary(cores=2).startswith(f"{expected_hours / 2:.3g} h on 2 core(s)")
    # the selection is honoured: without d_lin the intrinsic rule loses exactly its term
    config = toy_config(method)
    config["intrinsic"]["measures"] = ["d_aff", "d_iso", "cka"]
    without = project(config, widths, {"task": n}, layers, copies)
    assert without.rules["intrinsic"] == pytest.approx(intrinsic - layers * d_lin, rel=1e-12)


def test_an_exact_pairs_extrinsic_stages_cost_their_own_coefficients() -> None:
    """3 encoders, one exact ordered pair among the 6: each extrinsic stage counts the 5 other pairs, its
    _exact stage the one (unit costs chosen apart so that any mix-up shows), at the configured budgets."""
    from affine_homotopy.costs.model import STAGE_UNITS

    costs = {stage: StageCost(0.0, 0.0, 0.0, unit) for stage, unit in STAGE_UNITS.items()}
    for stage, seconds in (("d_psi", 1.0), ("d_worst", 10.0), ("d_worst_search", 100.0), ("d_psi_exact", 0.5),
                           ("d_worst_exact", 0.25), ("d_worst_search_exact", 0.125)):
        costs[stage] = StageCost(seconds, 0.0, 0.0, STAGE_UNITS[stage])
    config = toy_config()
    n_random, scale = 10, (3 + 10) / MEASURED_SETTINGS["search_work"]
    projected = project(config, dict.fromkeys(("a", "b", "c"), D_REF), {"task": N_REF}, 1, costs=costs,
                        exact_pairs={("a", "b")})
    expected = {"d_psi": 5 * 1.0, "d_worst": 5 * n_random * 10.0, "d_worst_search": 5 * scale * 100.0,
                "d_psi_exact": 0.5, "d_worst_exact": n_random * 0.25, "d_worst_search_exact": scale * 0.125}
    assert {stage: projected.stages[stage] for stage in expected} == pytest.approx(expected, rel=1e-12)
    assert projected.rules["extrinsic"] == pytest.approx(sum(expected.values()), rel=1e-12)
    # a pair not among the encoders is ignored; no exact pair: every pair at the full stages
    alike = project(config, dict.fromkeys(("a", "b", "c"), D_REF), {"task": N_REF}, 1, costs=costs,
                    exact_pairs={("a", "z")})
    assert alike.stages["d_psi"] == pytest.approx(6.0) and alike.stages["d_psi_exact"] == 0


def test_the_exact_pairs_of_a_config_are_those_at_the_float_floor() -> None:
    """affine_pairs names, from the config alone, the ordered pairs whose d_aff is at the float floor:
    checked on the derived copies themselves (a random base of rank 12 in 16 dimensions; every derived
    transform, a copy of a copy, and nested truncations), against a floor far below the other pairs."""
    from affine_homotopy.core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from affine_homotopy.costs.study import affine_pairs, effective_widths
    from affine_homotopy.models.derived import derive

    encoders = {
        "base": {"source": "package"},
        "svd75": {"source": "derived", "base": "base", "transform": "svd_truncate", "fraction": 0.75},
        "svd50": {"source": "derived", "base": "base", "transform": "svd_truncate", "fraction": 0.5},
        "affine": {"source": "derived", "base": "base", "transform": "random_affine", "seed": 0},
        "affine_svd50": {"source": "derived", "base": "affine", "transform": "svd_truncate", "fraction": 0.5},
        "noise": {"source": "derived", "base": "base", "transform": "gaussian_noise", "sigma": 0.1, "seed": 0},
    }
    rng = np.random.default_rng(0)
    base = (rng.standard_normal((1, 300, 12)) @ rng.standard_normal((12, 16))).astype(np.float32)
    arrays = {"base": base}
    for name, spec in encoders.items():  # bases come before their copies
        if spec["source"] == "derived":
            arrays[name] = derive(spec, arrays[spec["base"]], arrays[spec["base"]][:, :5], [1])[0]
    names = list(encoders)
    result = pairwise_intrinsic([arrays[n][0] for n in names], names, IntrinsicSettings(measures=("d_aff",)))
    d_aff = result.matrices["d_aff"]
    exact = affine_pairs(encoders)
    scale = max(float(np.abs(a).max()) for a in arrays.values())
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                assert (d_aff[i, j] <= 1e-4 * scale) == ((a, b) in exact), (a, b, d_aff[i, j])
    assert ("svd75", "svd50") in exact and ("svd50", "svd75") not in exact and ("affine", "base") in exact
    widths = effective_widths(encoders, {"base": 16})
    assert widths == {"base": 16, "svd75": 12, "svd50": 8, "affine": 16, "affine_svd50": 8, "noise": 16}


def test_the_demo_projection_costs_its_exact_pairs_and_truncated_copies_apart() -> None:
    """The demo's 42 ordered pairs: 16 exact by construction (minilm and its affine image both ways,
    either of them onto a truncation, a truncation onto a smaller one), the truncations at their ranks;
    Figure 3's grid of one encoder at 4 levels: every copy onto a smaller level is exact."""
    from affine_homotopy.costs.study import affine_pairs, effective_widths, rank_deficiency_grid, study_projection
    from affine_homotopy.study.validation import check_config

    with open("config/config.yaml") as handle:
        config = check_config(yaml.safe_load(handle), SCHEMA)
    encoders = config["encoders"]
    exact = affine_pairs(encoders)
    assert len(exact) == 16 and not any("noise" in pair[0] or "noise" in pair[1] for pair in exact)
    ranks = effective_widths(encoders, dict.fromkeys(encoders, 384))
    assert ranks["minilm_svd20"] == 77 and ranks["minilm_affine"] == ranks["minilm_noise"] == 384
    levels = config["analysis"]["rank_deficiency"]["levels"]
    copy_ranks, copy_exact = rank_deficiency_grid(config, {"minilm": 384})
    assert len(copy_ranks) == len(levels) and len(copy_exact) == len(levels) * (len(levels) - 1) // 2
    full_rank = project(config, dict.fromkeys(encoders, 384), {"t": 2000}, 3, len(levels))
    assert 0 < study_projection(config).rules["intrinsic"] < full_rank.rules["intrinsic"]
