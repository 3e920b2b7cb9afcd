"""Layer positions: labels, resolution of relative depths (checked against exact rational rounding),
the three kinds of `layers`, and positions chosen by the analysis keys."""

from __future__ import annotations

from fractions import Fraction
from math import floor

import pytest

from affine_homotopy.errors import ConfigError
from affine_homotopy.study.layers import (
    check_layer_spec,
    configured_label,
    layer_label,
    layer_positions,
    resolve_layer,
    resolve_layers,
    slot_of,
)


def test_labels_name_each_kind() -> None:
    assert [layer_label(p) for p in (0, 4, 12)] == ["layer0", "layer4", "layer12"]
    assert [layer_label(f) for f in (0.25, 0.5, 1.0, 0.125, 1 / 3)] == [
        "depth0.25", "depth0.50", "depth1.00", "depth0.125", "depth0.333333"]
    assert layer_label("last") == "last"
    for label in ("layer4", "depth0.50", "last"):  # a label passes through
        assert layer_label(label) == label
    for bad in (True, -1, 0.0, 1.5, "top", "depth0.5", None):
        with pytest.raises(ValueError):
            layer_label(bad)


def test_positions_keep_their_kind() -> None:
    assert layer_positions([1, 4]) == [1, 4] and all(type(p) is int for p in layer_positions([1, 4]))
    relative = layer_positions({"relative": [0.5, 1]})  # an integer 1 in the relative form is depth 1.0
    assert relative == [0.5, 1.0] and all(type(p) is float for p in relative)
    assert layer_positions(["last"]) == ["last"]


def exact_rounding(fraction: str, depth: int) -> int:
    # the documented rule in exact rationals: round half up, at least layer 1
    return max(1, floor(Fraction(fraction) * depth + Fraction(1, 2)))


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 6, 7, 10, 12, 24, 32, 48])
def test_relative_depth_rounds_half_up_as_written(depth) -> None:
    fractions = ["0.05", "0.1", "0.125", "0.2", "0.25", "0.3", "1/3", "0.35", "0.375", "0.45", "0.5", "0.55",
                 "0.625", "0.65", "0.75", "0.85", "0.9", "0.95", "1.0"]
    for text in fractions:
        value = float(Fraction(text))
        assert resolve_layer(value, depth) == exact_rounding(text if "/" not in text else repr(value), depth), text
    # the label resolves like the fraction it names (to its 6 decimals)
    assert resolve_layer("depth0.50", depth) == resolve_layer(0.5, depth)
    assert resolve_layer("last", depth) == resolve_layer(1.0, depth) == depth
    # monotone in the fraction, never the embedding output, never beyond the top
    resolved = [resolve_layer(float(Fraction(t)), depth) for t in fractions]
    assert resolved == sorted(resolved) and 1 <= min(resolved) and max(resolved) == depth


def test_the_issue_example_layer_three_is_top_middle_and_quarter() -> None:
    # MiniLM-L3, MiniLM-L6 and MPNet (12 layers): layer 3 is the top of one, the middle of another and
    # a quarter of the third
    assert resolve_layer(1.0, 3) == resolve_layer(0.5, 6) == resolve_layer(0.25, 12) == 3
    assert resolve_layers([0.5, 1.0], 3) == [2, 3]  # a tie goes to the deeper layer
    assert resolve_layer(0.35, 10) == 4  # 0.35 as written, not its binary value 0.34999...
    assert resolve_layers([4, "last"], 12) == [4, 12]  # absolute indices pass through


@pytest.mark.parametrize(
    "layers,expected",
    [
        ({"relative": [0, 0.5]}, r"'layers\.relative' has value \[0, 0\.5\]: 0 is outside \(0, 1\].*Fix"),
        ({"relative": [1.5]}, r"'layers\.relative' has value \[1\.5\]: 1\.5 is outside \(0, 1\]"),
        ({"relative": [-0.5]}, r"-0\.5 is outside \(0, 1\]"),
        (["last", 4], r"'layers' has value \['last', 4\]: 'last' cannot be combined .*Fix: use 'layers: \[last\]'"),
        ([4, "last"], r"'last' cannot be combined"),
        ([1, "top"], r"'layers' has value \[1, 'top'\]: 'top' is not a layer position"),
        ({"relative": [0.5, 0.5000001]}, r"positions repeat \(labels \['depth0\.50'\]\)"),
        ({"relative": []}, r"non-empty list"),
        ({"absolute": [1]}, r"one key, 'relative'"),
    ],
)
def test_bad_layer_specs_are_named(layers, expected) -> None:
    with pytest.raises(ConfigError, match=expected):
        check_layer_spec(layers)


def test_good_layer_specs_pass() -> None:
    for layers in ([0, 1, 12], ["last"], {"relative": [0.25, 0.5, 1.0]}, {"relative": [1]}):
        check_layer_spec(layers)


def test_analysis_keys_take_any_configured_position() -> None:
    relative = layer_positions({"relative": [0.5, 1.0]})
    assert configured_label("k", None, relative) == "depth1.00"  # null = the last configured
    assert configured_label("k", 0.5, relative) == configured_label("k", "depth0.50", relative) == "depth0.50"
    assert configured_label("k", "last", ["last"]) == "last"
    assert configured_label("k", 12, [4, 12]) == "layer12"
    with pytest.raises(ConfigError, match=r"config key 'analysis\.table_layer' has value 12, which is not one of "
                                          r"the configured layer positions \[0\.5, 1\.0\] \(labels \['depth0\.50', "
                                          r"'depth1\.00'\]\)"):
        configured_label("analysis.table_layer", 12, relative)
    with pytest.raises(ConfigError, match=r"has value 'top'"):
        configured_label("analysis.table_layer", "top", [4, 12])


def test_slot_of_finds_a_slice_by_label_or_index() -> None:
    meta = {"layers": [2, 3], "positions": ["depth0.50", "depth1.00"]}  # a 3-layer model's sidecar
    assert slot_of(meta, "depth1.00") == 1 and slot_of(meta, 2) == 0
    assert slot_of({"layers": [1, 6]}, "layer6") == 1  # sidecars from before positions were recorded
    with pytest.raises(KeyError, match="depth0.25"):
        slot_of(meta, "depth0.25")
