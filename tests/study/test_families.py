"""Encoder families: template expansion (names, order, models), its errors, family names in groups,
the shipped configs that use templates, and the training-dynamics table and figure."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from affine_homotopy.report import analysis, plotting
from affine_homotopy.study.validation import check_config
from affine_homotopy.study.families import family_members, training_dynamics_members
from affine_homotopy.errors import ConfigError

from tests.helpers import REPO


def config_with(families: dict[str, Any], encoders: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    config = {"run_name": "t", "encoder_families": families, "tasks": {"s": {"source": "synthetic",
              "generator": "synthetic_sentiment"}}, "layers": [1]}
    if encoders is not None:
        config["encoders"] = encoders
    config.update(extra)
    return config


def check(config: dict[str, Any], schema_path: Path) -> dict[str, Any]:
    return check_config(copy.deepcopy(config), schema_path)


def test_paper_config_expands_to_the_25_multiberts_it_used_to_list(schema_path) -> None:
    config = check_config(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()), schema_path)
    # what config/paper.yaml listed by hand before the template: 25 MultiBERTs, then ELECTRA and RoBERTa
    listed = {f"multibert_{seed:02d}": {"source": "hf", "model": f"google/multiberts-seed_{seed}", "revision": None}
              for seed in range(25)}
    listed["electra"] = {"source": "hf", "model": "google/electra-base-discriminator", "revision": None}
    listed["roberta"] = {"source": "hf", "model": "roberta-base", "revision": None}
    assert list(config["encoders"]) == list(listed) and config["encoders"] == listed
    assert config["analysis"]["encoder_group"] == [f"multibert_{seed:02d}" for seed in range(25)]
    again = check_config(copy.deepcopy(config), schema_path)  # checking a checked config changes nothing
    assert again == config


def test_two_axes_first_outer_zero_padded(schema_path) -> None:
    families = {"mb": {"source": "hf", "model": "google/multiberts-seed_{seed}-step_{step}k", "seed": [0, 1, 2],
                       "step": [0, 20, 2000]}}
    config = check(config_with(families), schema_path)
    names = list(config["encoders"])
    assert names == [f"mb_{seed}_{step:04d}" for seed in (0, 1, 2) for step in (0, 20, 2000)]
    assert config["encoders"]["mb_1_0020"]["model"] == "google/multiberts-seed_1-step_20k"
    assert all("seed" not in spec and "step" not in spec for spec in config["encoders"].values())


def test_members_come_before_handwritten_encoders_and_templates_fill_any_setting(tiny_models, schema_path) -> None:
    families = {"noisy": {"source": "derived", "base": "a", "transform": "gaussian_noise", "sigma": 0.1,
                          "seed": 0, "level": ["low", "high"], "revision_note": "{level}"}}
    # 'seed: 0' is a setting (not a list), 'level' an axis of names; an unknown setting reaches the schema
    with pytest.raises(ConfigError, match=r"'encoders\.noisy_(low|high)'.*revision_note.*expanded from "
                                          r"'encoder_families\.noisy'"):
        check(config_with(families, {"a": {"source": "path", "path": str(tiny_models["tiny_a"])}}), schema_path)
    families["noisy"].pop("revision_note")
    families["noisy"]["base"] = "{level}"
    encoders = {"low": {"source": "path", "path": str(tiny_models["tiny_a"])},
                "high": {"source": "path", "path": str(tiny_models["tiny_b"])}}
    config = check(config_with(families, encoders), schema_path)
    assert list(config["encoders"]) == ["noisy_low", "noisy_high", "low", "high"]
    assert config["encoders"]["noisy_high"]["base"] == "high" and config["encoders"]["noisy_high"]["seed"] == 0


def test_format_specs_and_group_expansion(schema_path) -> None:
    families = {"m": {"source": "hf", "model": "org/m-{size}-{seed:02d}", "size": ["s", "l"], "seed": [3, 12]}}
    config = check(config_with(families, {"other": {"source": "hf", "model": "org/other"}},
                               analysis={"encoder_group": ["other", "m"], "rank_deficiency": {"group": ["m"]}}),
                   schema_path)
    assert config["encoders"]["m_l_03"]["model"] == "org/m-l-03"
    assert config["analysis"]["encoder_group"] == ["other", "m_s_03", "m_s_12", "m_l_03", "m_l_12"]
    assert config["analysis"]["rank_deficiency"]["group"] == ["m_s_03", "m_s_12", "m_l_03", "m_l_12"]


@pytest.mark.parametrize(
    "families,encoders,expected",
    [
        ({"mb": {"source": "hf", "model": "google/multiberts-seed_{sed}", "seed": [0, 1]}}, None,
         r"'encoder_families\.mb\.model' has value 'google/multiberts-seed_\{sed\}': placeholder \{sed\} has no "
         r"values\. Fix: add a list 'sed: \[\.\.\.\]' to the family, or use one of its axes \(\{seed\}\)"),
        ({"mb": {"source": "hf", "model": "google/multiberts-seed_{seed}", "seed": [0, 1], "step": [0, 20]}}, None,
         r"'encoder_families\.mb\.step' has values \[0, 20\], but no setting of the family uses the placeholder "
         r"\{step\}\. Fix"),
        ({"mb": {"source": "hf", "model": "google/multiberts-seed_0"}}, None, r"'encoder_families\.mb' has no axis"),
        ({"mb": {"source": "hf", "model": "m{seed}", "seed": [1, "1"]}}, None,
         r"expands to encoder name 'mb_1' from encoder_families\.mb \(seed=1\), which is already taken by "
         r"encoder_families\.mb \(seed=1\)"),
        ({"mb": {"source": "hf", "model": "m{seed}", "seed": [0, 1]}}, {"mb_1": {"source": "hf", "model": "x"}},
         r"expands to encoder name 'mb_1' .* already taken by encoders\.mb_1"),
        ({"a": {"source": "hf", "model": "a{x}", "x": ["b_c"]}, "a_b": {"source": "hf", "model": "{y}", "y": ["c"]}},
         None, r"'encoder_families\.a_b' expands to encoder name 'a_b_c' .* already taken by encoder_families\.a "),
        ({"mb": {"source": "hf", "model": "m{seed}", "seed": [0, 1]}}, {"mb": {"source": "hf", "model": "x"}},
         r"'encoder_families\.mb': an encoder is also called 'mb'"),
        ({"mb": {"source": "hf", "model": "m{}", "seed": [0]}}, None, r"placeholders must be plain axis names"),
        ({"mb": {"source": "hf", "model": "m{seed", "seed": [0]}}, None, r"not a valid template"),
        ({"mb": {"source": "hf", "model": "m{seed}", "seed": []}}, None, r"an axis is a non-empty list"),
        ({"mb": {"source": "hf", "model": "m{seed}-{step}", "seed": [0], "step": ["early", "late"]}}, None,
         r"'encoder_families\.mb\.step' has values \['early', 'late'\]; .* must be numbers"),
    ],
)
def test_bad_templates_are_named(families, encoders, expected, schema_path) -> None:
    with pytest.raises(ConfigError, match=expected):
        check(config_with(families, encoders), schema_path)


def test_training_dynamics_config_expands_seeds_by_checkpoints(schema_path) -> None:
    config = check_config(yaml.safe_load((REPO / "config" / "training_dynamics.yaml").read_text()), schema_path)
    steps = [0, 20, 40, 60, 80, 100, 200, 400, 700, 1000, 1500, 2000]
    assert list(config["encoders"]) == [f"multibert_{seed}_{step:04d}" for seed in range(5) for step in steps]
    assert config["encoders"]["multibert_3_0700"]["model"] == "google/multiberts-seed_3-step_700k"
    records = training_dynamics_members(family_members(config["encoder_families"]))["multibert"]
    assert [r["step"] for r in records[:12]] == steps and records[12]["line"] == "seed=1"
    assert config["layers"] == {"relative": [0.5, 1.0]}


# ---------------------------------------------------------------------------------------------
# the training-dynamics table and figure on synthetic matrices with known structure

SEEDS, STEPS = [0, 1, 2], [0, 20, 100, 2000]


def synthetic_dynamics() -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """d(i -> j) = |step_i - step_j| / 1000 + (0.5 if the seeds differ) + 0.01 * seed_i: within-seed
    distance to the final checkpoint shrinks with the step, across seeds it never falls below 0.5."""
    families = {"mb": {"source": "hf", "model": "m{seed}-{step}", "seed": SEEDS, "step": STEPS}}
    members = training_dynamics_members(family_members(families))["mb"]
    seed = {m["encoder"]: int(m["line"].split("=")[1]) for m in members}
    step = {m["encoder"]: m["step"] for m in members}
    names = list(seed)
    values = np.array([[abs(step[i] - step[j]) / 1000 + 0.5 * (seed[i] != seed[j]) + 0.01 * seed[i] * (i != j)
                        for j in names] for i in names])
    return pd.DataFrame(values, index=names, columns=names), members


def test_training_dynamics_table_reads_the_right_cells() -> None:
    d_aff, members = synthetic_dynamics()
    table = analysis.training_dynamics(d_aff, members)
    assert len(table) == len(SEEDS) * len(STEPS)
    for row in table.itertuples():
        s = int(row.line.split("=")[1])
        assert row.final == f"mb_{s}_2000"
        # row i = the checkpoint, column j = the final checkpoint: i mapped onto j
        expected_to_final = (2000 - row.step) / 1000 + (0.01 * s if row.step != 2000 else 0.0)
        assert row.to_final == pytest.approx(expected_to_final)
        assert row.to_other_finals_median == pytest.approx((2000 - row.step) / 1000 + 0.5 + 0.01 * s)
        # same step, other seeds: exactly 0.5 + 0.01 * s for every peer
        assert row.across_median == row.across_min == row.across_max == pytest.approx(0.5 + 0.01 * s)


def test_training_dynamics_figure_has_one_line_per_seed() -> None:
    d_aff, members = synthetic_dynamics()
    table = pd.concat([analysis.training_dynamics(d_aff, members).assign(family="mb", task=t, layer="depth1.00")
                       for t in ("sst2", "rte")], ignore_index=True)
    fig = plotting.training_dynamics(table, "test")
    axes = fig.axes
    assert len(axes) == 4  # (task) rows x (to final, across seeds)
    left = axes[0]
    labels = [line.get_label() for line in left.get_lines()]
    assert labels == ["seed=0", "seed=1", "seed=2", "median → other seeds' final"]
    np.testing.assert_allclose(left.get_lines()[1].get_ydata(), (2000 - np.array(STEPS)) / 1000 + [0.01, 0.01, 0.01, 0])
    plotting.plt.close(fig)
