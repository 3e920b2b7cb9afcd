"""Scripts look their input files up by key ({(task, layer): path}), never by position."""

from __future__ import annotations

import re

import pytest

from affine_homotopy.jobs.runner import keyed_inputs

from tests.helpers import REPO


def test_files_are_found_by_key_whatever_the_input_order() -> None:
    mapping = {("sst2", "layer1"): "a/sst2/layer1.csv", ("rte", "layer1"): "a/rte/layer1.csv"}
    inputs = ["a/rte/layer1.csv", "a/sst2/layer1.csv"]  # another order than the mapping's
    assert keyed_inputs(mapping, inputs)[("sst2", "layer1")] == "a/sst2/layer1.csv"
    with pytest.raises(RuntimeError, match=r"inputs without a key \['a/mrpc/layer1.csv'\]"):
        keyed_inputs(mapping, [*inputs, "a/mrpc/layer1.csv"])
    with pytest.raises(RuntimeError, match=r"keys without an input \['a/rte/layer1.csv'\]"):
        keyed_inputs(mapping, inputs[1:])


def test_no_workflow_script_zips_its_inputs_against_a_key_list() -> None:
    zipping = re.compile(r"zip\([^)]*snakemake\.(input|output)")
    offenders = [path.name for path in sorted((REPO / "workflow" / "scripts").glob("*.py"))
                 if zipping.search(path.read_text())]
    assert not offenders, f"{offenders} pair inputs with keys by position; pass a {{key: path}} parameter"
