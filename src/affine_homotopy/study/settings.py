"""The one bridge from a study config to the engines' settings: :func:`intrinsic_settings` and
:func:`extrinsic_settings` read a validated config and build the settings dataclasses, which check
themselves. An error a setting raises names its argument (``error.argument``); here it becomes the
config key (``error.key``) that set it, so the message names what the user wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from ..core.extrinsic import ExtrinsicSettings
from ..core.intrinsic import IntrinsicSettings
from ..core.linalg import DTYPES
from ..errors import AffineHomotopyError, ConfigError


@contextmanager
def config_keys(keys: Mapping[str, str]) -> Iterator[None]:
    """A settings error that names its ``argument`` re-raised as a ConfigError naming the config key
    ``keys[argument]`` (its ``key`` field and the message's start)."""
    try:
        yield
    except AffineHomotopyError as error:
        key = keys.get(error.argument) if error.argument else None
        if key is None:
            raise
        raise ConfigError(f"config key '{key}': {error}", argument=error.argument, key=key,
                          value=error.value) from None


def intrinsic_settings(config: Mapping[str, Any], device: torch.device | str = "cpu",
                       **overrides: Any) -> IntrinsicSettings:
    """The intrinsic engine's settings of a validated study config (its ``intrinsic`` section; ``threads``
    sets how a job runs, not what it computes, and is not read). ``overrides``: fields the caller sets
    instead, e.g. ``keep_weights``, or the rank-deficiency grid's own ``tol`` and ``max_iter``."""
    section = config["intrinsic"]
    options = dict(
        tol=section["tol"], max_iter=section["max_iter"], rank_multiplier=section["rank_multiplier"],
        solver=section["solver"], lawson_power=section["lawson_power"],
        anderson_memory=section["anderson_memory"], block_mb=section["block_mb"],
        dtype=DTYPES[section["dtype"]], iterate_dtype=DTYPES[section["iterate_dtype"]], device=device,
        measures=tuple(section["measures"]), working_set=section["working_set"],
    )
    keys = {name: f"intrinsic.{name}" for name in options if name not in overrides and name != "device"}
    with config_keys(keys):
        return IntrinsicSettings(**{**options, **overrides})


def extrinsic_settings(config: Mapping[str, Any], device: torch.device | str = "cpu") -> ExtrinsicSettings:
    """The extrinsic engine's settings of a validated study config (its ``extrinsic`` section, and the rank
    rule of its ``intrinsic`` section: the extrinsic maps use the same family as ``d_aff``)."""
    section, search = config["extrinsic"], config["extrinsic"]["worst_search"]
    plain = ("tol", "atol", "max_lp", "max_iter", "refine_iter", "rounds", "working_set", "working_budget",
             "inverse_temperature", "block_mb")
    searched = ("steps", "step_size", "radius", "candidates", "accept_rtol", "temperature")
    options = {**{name: section[name] for name in plain}, **{f"search_{name}": search[name] for name in searched},
               "temperatures": tuple(section["temperatures"]), "rank_multiplier": config["intrinsic"]["rank_multiplier"],
               "dtype": DTYPES[section["dtype"]], "measures": tuple(section.get("measures", ExtrinsicSettings.measures))}
    keys = {**{name: f"extrinsic.{name}" for name in (*plain, "temperatures", "dtype", "measures")},
            **{f"search_{name}": f"extrinsic.worst_search.{name}" for name in searched},
            "rank_multiplier": "intrinsic.rank_multiplier"}
    with config_keys(keys):
        return ExtrinsicSettings(**options, device=device)
