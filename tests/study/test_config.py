"""Bad input: every problem is named (key, value, fix) before any job runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from affine_homotopy.study.validation import check_config
from affine_homotopy.errors import ConfigError, StagingError
from affine_homotopy.models.encoders import load_encoder
from affine_homotopy.core.measures import stage_outputs

from tests.helpers import REPO


def base_config(tiny_models: dict[str, Path]) -> dict[str, Any]:
    return {
        "run_name": "t",
        "encoders": {
            "a": {"source": "path", "path": str(tiny_models["tiny_a"])},
            "b": {"source": "derived", "base": "a", "transform": "svd_truncate", "fraction": 0.5},
        },
        "tasks": {"s": {"source": "synthetic", "generator": "synthetic_sentiment"}},
        "layers": [1, 2],
    }


def check(config: dict[str, Any], schema_path: Path) -> dict[str, Any]:
    return check_config(copy.deepcopy(config), schema_path)


def test_valid_config_gets_defaults(tiny_models, schema_path) -> None:
    config = check(base_config(tiny_models), schema_path)
    assert config["embedding"] == {"pooling": "mean", "max_length": 128, "batch_size": 64, "storage_dtype": "float32",
                                   "threads": 2}
    assert config["intrinsic"]["threads"] == 2  # the jobs' threads before the key existed
    assert config["tasks"]["s"]["n_train"] == 2000 and config["device"] == "auto"
    assert config["intrinsic"]["rank_multiplier"] == 5
    # the default selection is what Table 1 and the figures need; d_lin is opt-in
    from affine_homotopy.study.selection import DEFAULT_SELECTION

    assert config["intrinsic"]["measures"] == list(DEFAULT_SELECTION) and "d_lin" not in DEFAULT_SELECTION
    assert "d_aff_rel" not in DEFAULT_SELECTION  # opt-in, as d_lin
    assert set(config["analysis"]["intrinsic_measures"]) <= set(stage_outputs(config["intrinsic"]["measures"]))


def test_shipped_configs_are_valid(schema_path) -> None:
    for name in ("config.yaml", "paper.yaml", "training_dynamics.yaml"):
        config = yaml.safe_load((REPO / "config" / name).read_text())
        check_config(config, schema_path)


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda c: c["encoders"]["a"].update(source="hff"), r"'encoders\.a\.source' has value 'hff'; allowed values: hf, path, package, pypi, derived, embeddings"),
        (lambda c: c["tasks"]["s"].update(source="csv"), r"'tasks\.s\.source' has value 'csv'; allowed values: glue, glue_dir, synthetic, table, hf_dataset"),
        (lambda c: c.update(layers=[1, 7]), r"encoder 'a' has depth 2 .*layer\(s\) \[7\] do not exist"),
        (lambda c: c["encoders"]["b"].update(base="zzz"), r"'encoders\.b\.base' has value 'zzz', which is not an encoder"),
        (lambda c: c["encoders"].update(c1={"source": "derived", "base": "c2", "transform": "random_affine"},
                                        c2={"source": "derived", "base": "c1", "transform": "random_affine"}),
         r"cycle \(c1 -> c2 -> c1\)"),
        (lambda c: c["encoders"].update(p={"source": "package", "package": "no-such-model-pkg"}),
         r"pip install no-such-model-pkg"),
        (lambda c: c["encoders"]["a"].update(path="/nonexistent/model"), r"'encoders\.a\.path' has value '/nonexistent/model'"),
        (lambda c: c["encoders"]["b"].pop("fraction"), r"missing 'fraction'"),
        (lambda c: c["encoders"]["b"].update(fraction=1.5), r"'encoders\.b\.fraction' has value 1\.5; it must be <= 1"),
        (lambda c: c.update(layerz=[1]), r"'layerz' was unexpected"),
        (lambda c: c.pop("run_name"), r"missing required key 'run_name'"),
        (lambda c: c.update(run_name="../x"), r"'run_name' has value '\.\./x', which is not a valid name"),
        (lambda c: c["tasks"].update(g={"source": "glue_dir", "path": "/nonexistent", "glue_task": "rte"}),
         r"'tasks\.g\.path' has value '/nonexistent', but the train file .* does not exist"),
        (lambda c: c["tasks"].update(mytask={"source": "glue"}), r"'tasks\.mytask' needs 'glue_task'"),
        (lambda c: c.update(analysis={"encoder_group": ["a", "nope"]}), r"unknown encoder\(s\) \['nope'\]"),
        (lambda c: c.update(layers={"relative": [0.5, 1.5]}), r"'layers\.relative' has value \[0\.5, 1\.5\]: 1\.5 is outside \(0, 1\]"),
        (lambda c: c.update(layers=["last", 2]), r"'layers' has value \['last', 2\]: 'last' cannot be combined"),
        (lambda c: c.update(layers={"relative": [0.5]}, analysis={"table_layer": 2}),
         r"'analysis\.table_layer' has value 2, which is not one of the configured layer positions \[0\.5\]"),
        (lambda c: c.update(analysis={"rank_deficiency": {"layer": "last"}}),
         r"'analysis\.rank_deficiency\.layer' has value 'last', which is not one of the configured"),
        (lambda c: c["encoders"]["a"].update(pooling="max"), r"'encoders\.a\.pooling' has value 'max'; allowed values: mean, cls, last"),
        (lambda c: c.update(intrinsic={"measures": ["d_aff", "d_lnn"]}),
         r"'intrinsic\.measures' = \['d_aff', 'd_lnn'\] names unknown measure\(s\) \['d_lnn'\]\. Fix: choose from d_aff, d_aff_rel, d_lin"),
        (lambda c: c.update(intrinsic={"measures": ["d_aff", "d_aff_ls"]}), r"d_aff_ls come with d_aff: list that instead"),
        (lambda c: c.update(intrinsic={"measures": ["cka"]}), r"'intrinsic\.measures' = \['cka'\] lacks d_aff.*Fix: add d_aff"),
        (lambda c: c.update(intrinsic={"measures": ["d_aff", "cka"]}, analysis={"intrinsic_measures": ["d_aff", "d_lin"]}),
         r"'analysis\.intrinsic_measures' = \['d_aff', 'd_lin'\] asks Table 1 for \['d_lin'\], but config key "
         r"'intrinsic\.measures' = \['d_aff', 'cka'\] does not compute it\. Fix: add d_lin to intrinsic\.measures"),
        (lambda c: c.update(analysis={"intrinsic_measures": ["d_aff", "ckaa"]}),
         r"'analysis\.intrinsic_measures' = \['d_aff', 'ckaa'\] names unknown measure\(s\) \['ckaa'\]"),
        # extrinsic.measures: unknown names (the choices listed), d_psi required, the search needs d_worst
        (lambda c: c.update(extrinsic={"measures": ["d_psi", "d_wrost"]}),
         r"'extrinsic\.measures' = \['d_psi', 'd_wrost'\] names unknown measure\(s\) \['d_wrost'\]\. Fix: choose "
         r"from d_psi, d_worst, d_worst_search"),
        (lambda c: c.update(extrinsic={"measures": ["d_psi", "bound_worst"]}),
         r"unknown measure\(s\) \['bound_worst'\] \(bound_worst is a file the stage writes with its measure"),
        (lambda c: c.update(extrinsic={"measures": ["d_worst"]}),
         r"'extrinsic\.measures' = \['d_worst'\] lacks d_psi.*Fix: add d_psi to extrinsic\.measures"),
        (lambda c: c.update(extrinsic={"measures": ["d_psi", "d_worst_search"]}),
         r"'extrinsic\.measures' = \['d_psi', 'd_worst_search'\] selects d_worst_search without d_worst.*Fix: add "
         r"d_worst to extrinsic\.measures, or drop d_worst_search"),
        (lambda c: c.update(extrinsic={"measures": []}), r"'extrinsic\.measures' has value \[\]; it needs at least 1"),
        # extrinsic.layers: configured positions (or labels) only, each once; the table layer among them
        (lambda c: c.update(extrinsic={"layers": [2, 3]}),
         r"'extrinsic\.layers' = \[2, 3\] names 3, which is not one of the configured layer positions \(config key "
         r"'layers': \[1, 2\], labels \['layer1', 'layer2'\]\)\. Fix: list configured positions"),
        (lambda c: c.update(extrinsic={"layers": ["last"]}),
         r"'extrinsic\.layers' = \['last'\] names 'last', which is not"),
        (lambda c: c.update(layers={"relative": [0.5, 1.0]}, extrinsic={"layers": [1]}),
         r"'extrinsic\.layers' = \[1\] names 1, which is not one of the configured layer positions .*\[0\.5, 1\.0\]"),
        (lambda c: c.update(extrinsic={"layers": [2, "layer2"]}),
         r"'extrinsic\.layers' = \[2, 'layer2'\] names a layer more than once \(labels \['layer2'\]\)"),
        (lambda c: c.update(extrinsic={"layers": []}), r"'extrinsic\.layers' has value \[\]; it needs at least 1"),
        (lambda c: c.update(extrinsic={"layers": [1]}, analysis={"table_layer": 2}),
         r"'analysis\.table_layer' has value 2 \(label layer2\), which is not one of the layers the extrinsic stage "
         r"runs at: config key 'extrinsic\.layers' = \[1\] \(labels \['layer1'\]\).*Fix: set analysis\.table_layer to "
         r"one of \[1\] \(or null for the last of them\), or add 2 to extrinsic\.layers"),
    ],
)
def test_bad_config_is_named(tiny_models, schema_path, mutate, expected) -> None:
    config = base_config(tiny_models)
    mutate(config)
    with pytest.raises(ConfigError, match=expected):
        check(config, schema_path)


def test_renamed_key_names_the_new_one(tiny_models, schema_path) -> None:
    config = base_config(tiny_models)
    config["intrinsic"] = {"rank_tolerance_multiplier": 5}
    with pytest.raises(ConfigError, match=r"^config key 'intrinsic\.rank_tolerance_multiplier' was renamed: use "
                                          r"'intrinsic\.rank_multiplier' \(same meaning\)\.$"):
        check(config, schema_path)
    config["intrinsic"] = {"rank_multiplier": 3}
    assert check(config, schema_path)["intrinsic"]["rank_multiplier"] == 3


def test_extrinsic_selection_and_layers(tiny_models, schema_path) -> None:
    """The defaults (d_psi, d_worst and d_worst_search at every layer, the table layer the last) and the
    labels of a chosen set of layers: in the order of `layers`, written as positions or labels."""
    from affine_homotopy.study.validation import extrinsic_layers, table_layer
    from affine_homotopy.core.measures import extrinsic_outputs
    from affine_homotopy.study.selection import EXTRINSIC_DEFAULT_SELECTION, extrinsic_selection

    config = check(base_config(tiny_models), schema_path)
    assert config["extrinsic"]["measures"] == list(EXTRINSIC_DEFAULT_SELECTION) == [
        "d_psi", "d_worst", "d_worst_search"]
    assert config["extrinsic"]["layers"] is None and extrinsic_layers(config) == ["layer1", "layer2"]
    assert table_layer(config) == "layer2"
    raw = base_config(tiny_models)
    raw.update(extrinsic={"layers": ["layer2", 1], "measures": ["d_worst_search", "d_worst", "d_psi"]})
    config = check(raw, schema_path)
    assert extrinsic_layers(config) == ["layer1", "layer2"]  # the order of `layers`
    assert extrinsic_selection(config) == ("d_psi", "d_worst", "d_worst_search")  # the registry's order
    raw.update(extrinsic={"layers": [1]}, analysis={"table_layer": None})
    config = check(raw, schema_path)
    assert extrinsic_layers(config) == ["layer1"] and table_layer(config) == "layer1"  # null: the last extrinsic layer
    # the files each selection writes: d_psi's always, d_worst's and the search's with them
    assert extrinsic_outputs(["d_psi"]) == ("d_psi", "d_psi_lower", "bound")
    assert set(extrinsic_outputs(["d_psi", "d_worst"])) == {"d_psi", "d_psi_lower", "bound", "d_worst",
                                                           "d_worst_lower", "bound_worst"}
    every = extrinsic_outputs(["d_psi", "d_worst", "d_worst_search"])
    assert set(every) - set(extrinsic_outputs(["d_psi", "d_worst"])) == {"d_worst_search", "d_worst_search_lower"}


def test_random_probes_are_fitted_only_for_d_worst(tiny_models, schema_path) -> None:
    from affine_homotopy.study.selection import random_classifiers_needed

    raw = base_config(tiny_models)
    raw["extrinsic"] = {"n_random_classifiers": 7}
    assert random_classifiers_needed(check(raw, schema_path)) == 7
    raw["extrinsic"]["measures"] = ["d_psi"]
    assert random_classifiers_needed(check(raw, schema_path)) == 0


def test_unreachable_hub_names_the_model_and_the_fixes(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = {"source": "hf", "model": "no-such-org/no-such-model", "revision": None}
    with pytest.raises(StagingError) as error:
        load_encoder("ghost", spec)
    message = str(error.value)
    assert "no-such-org/no-such-model" in message and "source: path" in message
    assert "huggingface-cli download" in message


def test_relative_and_last_layers_pass_whatever_the_depth(tiny_models, schema_path) -> None:
    for layers in ({"relative": [0.5, 1.0]}, ["last"]):
        config = base_config(tiny_models)
        config.update(layers=layers, analysis={"table_layer": "last" if layers == ["last"] else 0.5})
        check(config, schema_path)


def test_decoder_without_padding_token_fails_before_any_job(tmp_path, schema_path) -> None:
    from tests.helpers import write_tiny_decoder

    folder = write_tiny_decoder(tmp_path / "gpt", "gpt2", layers=2)
    config = {"run_name": "t", "tasks": {"s": {"source": "synthetic", "generator": "synthetic_sentiment"}},
              "layers": ["last"], "encoders": {"gpt": {"source": "path", "path": str(folder), "pooling": "last"},
                                               "gpt_aff": {"source": "derived", "base": "gpt",
                                                           "transform": "random_affine"}}}
    with pytest.raises(ConfigError, match=r"encoder 'gpt': its tokenizer has no padding token, which batching needs "
                                          r"\(pooling 'last'\); config key 'encoders\.gpt\.pad_token' is not set\. "
                                          r"Fix: set 'pad_token: eos'"):
        check(config, schema_path)
    config["encoders"]["gpt"]["pad_token"] = "eos"
    check(config, schema_path)



@pytest.mark.parametrize(
    "section,expected",
    [
        ({"worst_search": {"radius": 0}}, r"'extrinsic\.worst_search\.radius' has value 0; it must be > 0"),
        ({"worst_search": {"radius": -1.5}}, r"'extrinsic\.worst_search\.radius' has value -1\.5; it must be > 0"),
        ({"worst_search": {"temperature": 0}}, r"'extrinsic\.worst_search\.temperature' has value 0; it must be > 0"),
        ({"random_probes": {"method": "adam"}}, r"'extrinsic\.random_probes\.method' has value 'adam'; allowed values: sgd, lbfgs"),
        ({"random_probes": {"learning_rates": [0.1, 0]}}, r"'extrinsic\.random_probes\.learning_rates\.1' has value 0"),
    ],
)
def test_bad_worst_case_settings_are_named(tiny_models, schema_path, section, expected) -> None:
    config = base_config(tiny_models)
    config["extrinsic"] = section
    with pytest.raises(ConfigError, match=expected):
        check(config, schema_path)


def test_the_schemas_extrinsic_defaults_are_the_librarys(tiny_models, schema_path) -> None:
    """A config that sets nothing in `extrinsic` runs the engine with the library's own defaults
    (ExtrinsicSettings()), field by field: the workflow and a library call compute the same numbers."""
    from dataclasses import fields

    from affine_homotopy.core.extrinsic import ExtrinsicSettings

    from affine_homotopy.study.settings import extrinsic_settings

    from_config = extrinsic_settings(check(base_config(tiny_models), schema_path))
    library = ExtrinsicSettings()
    differing = {f.name: (getattr(from_config, f.name), getattr(library, f.name)) for f in fields(ExtrinsicSettings)
                 if getattr(from_config, f.name) != getattr(library, f.name)}
    assert differing == {}


def test_the_schemas_intrinsic_defaults_are_the_librarys(tiny_models, schema_path) -> None:
    """A config that sets nothing in `intrinsic` gives IntrinsicSettings() field by field, except what a study
    chooses for itself: its measures (the default selection; the library computes every measure) and
    keep_weights (the library's choice per call)."""
    from dataclasses import fields

    from affine_homotopy.core.intrinsic import IntrinsicSettings
    from affine_homotopy.study.selection import DEFAULT_SELECTION
    from affine_homotopy.study.settings import intrinsic_settings

    from_config = intrinsic_settings(check(base_config(tiny_models), schema_path))
    library = IntrinsicSettings()
    differing = {f.name: (getattr(from_config, f.name), getattr(library, f.name)) for f in fields(IntrinsicSettings)
                 if getattr(from_config, f.name) != getattr(library, f.name)}
    # iterate_dtype: the schema's float64 is the library's None (iterate in dtype, float64)
    assert differing.pop("iterate_dtype") == (torch.float64, None) and library.dtype == torch.float64
    assert differing == {"measures": (DEFAULT_SELECTION, library.measures)}


def test_a_setting_out_of_range_names_its_config_key(tiny_models, schema_path) -> None:
    """The settings check themselves and name their argument; the bridge from a config names the key."""
    from affine_homotopy.study.settings import intrinsic_settings

    config = check(base_config(tiny_models), schema_path)
    config["intrinsic"]["solver"] = "newton"  # past the schema: the settings' own check
    with pytest.raises(ConfigError, match=r"config key 'intrinsic.solver': unknown minimax solver 'newton'") as raised:
        intrinsic_settings(config)
    assert (raised.value.key, raised.value.argument, raised.value.value) == ("intrinsic.solver", "solver", "newton")
    with pytest.raises(ConfigError, match=r"^max_iter must be at least 1") as raised:  # an override is no key
        intrinsic_settings(check(base_config(tiny_models), schema_path), max_iter=0)
    assert raised.value.key is None and raised.value.argument == "max_iter"


def test_worst_case_defaults_are_the_papers_protocol(tiny_models, schema_path) -> None:
    extrinsic = check(base_config(tiny_models), schema_path)["extrinsic"]
    assert extrinsic["random_probes"] == {"method": "sgd", "epochs": 20, "batch_size": 64,
                                          "learning_rates": [0.01, 0.1, 0.2, 0.4], "l2": 0, "seed": 42}
    assert extrinsic["worst_search"]["radius"] is None and extrinsic["worst_search"]["steps"] > 0
