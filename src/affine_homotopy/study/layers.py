"""Layer positions: how a config names the layers it compares, and the labels that name output folders.

A *position* is one entry of the config's ``layers``; its *label* names the output folders
(``intrinsic/<task>/<label>/...``) and the ``layer`` column of every table, so matrices of one label
always compare like with like. Three kinds (one kind per config):

* ``layers: [1, 4, 8, 12]`` -- absolute hidden-state indices ``L`` (0 = embedding output,
  ``depth`` = last transformer layer), label ``layerL``. The same index in every model.
* ``layers: [last]`` -- each model's last layer (its ``depth``), label ``last``.
* ``layers: {relative: [0.25, 0.5, 1.0]}`` -- fractions ``f`` in (0, 1] of each model's depth
  ``D``, label ``depth`` + ``f`` with at least two decimals (``depth0.25``, ``depth0.50``,
  ``depth1.00``; up to six when needed, ``depth0.125``). Resolved per model to the hidden-state
  index ``round(f * D)``, rounding half up (a tie goes to the deeper layer: 0.5 of 3 layers is layer
  2), computed on ``f`` as written in decimal (so 0.35 of 10 is 4, not 3 from 3.4999...), and at
  least 1: relative positions never reach the embedding output (use ``layers: [0]`` for it).

Python types keep the kinds apart after :func:`layer_positions`: ``int`` absolute, ``float``
relative, the string ``last``. The embed job resolves positions with the model's depth
(:func:`resolve_layers`) and records, per slice, the absolute index (``layers``) and the label
(``positions``) in the embeddings' sidecar; derived encoders copy their base's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ..errors import ConfigError

LAST = "last"
_LABEL = re.compile(r"^(?:layer(?P<index>\d+)|depth(?P<fraction>\d\.\d{2,6})|last)$")

Position = int | float | str


def layer_positions(layers: Any) -> list[Position]:
    """The config's ``layers`` value as a list of positions (int absolute, float relative, ``last``)."""
    if isinstance(layers, Mapping):
        return [float(f) for f in layers["relative"]]
    return [p if p == LAST else int(p) for p in layers]


def _fraction_text(fraction: float) -> str:
    whole, _, decimals = f"{fraction:.6f}".rstrip("0").partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


def layer_label(position: Any) -> str:
    """The folder label of one position: ``4`` -> ``layer4``, ``0.5`` -> ``depth0.50``, ``last`` -> ``last``.

    A label passes through unchanged, so any position a config can hold (an int, a fraction,
    ``last`` or a label string) maps to the label that names its outputs.
    """
    if isinstance(position, bool):
        raise ValueError(f"unknown layer position {position!r}")
    if isinstance(position, int):
        if position < 0:
            raise ValueError(f"layer index {position} is negative")
        return f"layer{position}"
    if isinstance(position, float):
        if not 0.0 < position <= 1.0:
            raise ValueError(f"relative depth {position} is outside (0, 1]")
        return f"depth{_fraction_text(position)}"
    if isinstance(position, str) and _LABEL.match(position):
        return position
    raise ValueError(f"unknown layer position {position!r}")


def layer_labels(positions: Sequence[Any]) -> list[str]:
    """Labels of the configured positions, in config order."""
    return [layer_label(p) for p in positions]


def resolve_layer(position: Any, depth: int) -> int:
    """Absolute hidden-state index of one position (or label) in a model with ``depth`` layers.

    Absolute indices are returned as they are (:func:`affine_homotopy.study.model_lookup.check_layers` checks
    them against the depth); see the module docstring for the rounding of relative depths.
    """
    label = layer_label(position)
    if label == LAST:
        return depth
    match = _LABEL.match(label)
    assert match is not None  # layer_label returns only valid labels
    if match["index"] is not None:
        return int(match["index"])
    # the fraction as written (repr is the shortest decimal that round-trips), not its binary value
    fraction = Decimal(repr(position)) if isinstance(position, float) else Decimal(match["fraction"])
    return max(1, int((fraction * depth).quantize(Decimal(1), rounding=ROUND_HALF_UP)))


def resolve_layers(positions: Sequence[Any], depth: int) -> list[int]:
    """Absolute hidden-state index of every position, in order (two positions may share one)."""
    return [resolve_layer(p, depth) for p in positions]


def check_layer_spec(layers: Any) -> None:
    """ConfigError (key, value, fix) for a ``layers`` value that is not one of the three kinds."""
    kinds = ("hidden-state indices such as 'layers: [1, 4, 8, 12]', each model's last layer "
             "'layers: [last]', or fractions of each model's depth 'layers: {relative: [0.5, 1.0]}'")
    if isinstance(layers, Mapping):
        if set(layers) != {"relative"} or not isinstance(layers["relative"], list) or not layers["relative"]:
            raise ConfigError(f"config key 'layers' has value {dict(layers)!r}; the mapping form takes one key, "
                              f"'relative', with a non-empty list of fractions. Use {kinds}.", key="layers")
        fractions = layers["relative"]
        for value in fractions:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"config key 'layers.relative' has value {fractions}: {value!r} is not a "
                                  "number. Fix: list fractions of each model's depth, e.g. [0.25, 0.5, 1.0].",
                                  key="layers.relative")
            if not 0 < value <= 1:
                raise ConfigError(
                    f"config key 'layers.relative' has value {fractions}: {value} is outside (0, 1]. A relative "
                    "depth is a fraction of each model's number of layers (1.0 = its last layer) and is "
                    "rounded to at least layer 1. Fix: use fractions in (0, 1]; for the embedding output "
                    "use absolute indices, 'layers: [0, ...]'.", key="layers.relative")
        positions: list[Position] = [float(f) for f in fractions]
    elif isinstance(layers, list) and layers:
        for value in layers:
            if value != LAST and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"config key 'layers' has value {layers}: {value!r} is not a layer position. "
                                  f"Use {kinds}.", key="layers")
        if LAST in layers and len(layers) > 1:
            raise ConfigError(
                f"config key 'layers' has value {layers}: 'last' cannot be combined with other entries in "
                "one list ('last' is a different index in models of different depths, so the list would "
                "mix two kinds of position). Fix: use 'layers: [last]' alone, absolute indices alone, or "
                "'layers: {relative: [0.5, 1.0]}' (1.0 is each model's last layer).", key="layers")
        positions = layer_positions(layers)
    else:
        raise ConfigError(f"config key 'layers' has value {layers!r}. Use {kinds}.", key="layers")
    labels = layer_labels(positions)
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"config key 'layers' has value {layers}: positions repeat (labels {repeated}). "
                          "Fix: list each position once (relative depths are labelled to 6 decimals).", key="layers")


def configured_label(key: str, value: Any, positions: Sequence[Any]) -> str:
    """The label of a position chosen by config key ``key`` (an int, ``last``, a fraction or a label;
    None = the last configured position); ConfigError when it is not one of the configured ones."""
    labels = layer_labels(positions)
    if value is None:
        return labels[-1]
    try:
        label = layer_label(value)
    except ValueError:
        label = None
    if label not in labels:
        raise ConfigError(
            f"config key '{key}' has value {value!r}, which is not one of the configured layer positions "
            f"{list(positions)} (labels {labels}). Fix: use one of them (a position or its label), or null "
            "for the last.", key=f"{key}")
    return label


def slot_of(meta: dict[str, Any], layer: int | str) -> int:
    """Index into an embedding array's first axis for a hidden-state index or a position label.

    ``meta`` is the array's sidecar: ``layers`` lists the absolute index of each slice and
    ``positions`` (when present) the label of each slice.
    """
    indices = list(meta["layers"])
    labels = list(meta.get("positions") or [layer_label(int(i)) for i in indices])
    if isinstance(layer, str):
        if layer not in labels:
            raise KeyError(f"embeddings hold layer positions {labels}, not {layer!r}")
        return labels.index(layer)
    if layer not in indices:
        raise KeyError(f"embeddings hold layers {indices}, not layer {layer}")
    return indices.index(layer)
