"""Encoder families: one template in the config, one encoder per combination of its axis values.

``encoder_families`` are expanded into ``encoders`` before the schema is checked (see
:func:`affine_homotopy.study.validation.check_config`); a family name in ``analysis.encoder_group`` or
``analysis.rank_deficiency.group`` stands for its members. Families with a ``step`` axis
(checkpoints along training) feed the training-dynamics figure.
"""

from __future__ import annotations

import copy
import itertools
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class FamilyMember:
    """One encoder of a family: its name and the axis values it was expanded from."""

    name: str
    family: str
    values: dict[str, Any]


def _placeholders(template: str, key: str) -> set[str]:
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    except ValueError as error:
        raise ConfigError(f"config key '{key}' has value {template!r}, which is not a valid template ({error}). "
                          "Write placeholders as {seed}; double a literal brace ({{ or }}).", key=f"{key}") from None
    if any(not field.isidentifier() for field in fields):
        raise ConfigError(f"config key '{key}' has value {template!r}: placeholders must be plain axis names "
                          "such as {seed} (no empty {}, no attributes or indices).", key=f"{key}")
    return set(fields)


def _value_text(value: Any, width: int) -> str:
    return str(value).zfill(width) if isinstance(value, int) and value >= 0 else str(value)


def family_members(families: Mapping[str, Any] | None) -> dict[str, list[FamilyMember]]:
    """The members of every family, in a stable order: families in config order; within a family,
    the product of its axes in the order the axes are written (the first axis outermost), each axis
    in its listed order. A member's name is ``<family>_<value>[_<value>...]``, integers zero-padded
    to the width of the axis's widest value (``multibert_00`` ... ``multibert_24``).

    An *axis* is a key whose value is a list; every other key is an encoder setting in which
    ``{axis}`` placeholders are filled (``model: "google/multiberts-seed_{seed}"``).
    """
    out: dict[str, list[FamilyMember]] = {}
    for family, spec in (families or {}).items():
        key = f"encoder_families.{family}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"config key '{key}' has value {spec!r}; a family is a mapping of encoder settings "
                              "and axes, e.g. {source: hf, model: 'google/multiberts-seed_{seed}', seed: [0, 1]}.",
                              key=f"{key}")
        axes = {k: v for k, v in spec.items() if isinstance(v, list)}
        used: dict[str, str] = {}
        for field, value in spec.items():
            if isinstance(value, str):
                for name in _placeholders(value, f"{key}.{field}"):
                    used.setdefault(name, field)
        for name, field in used.items():
            if name not in axes:
                known = ", ".join("{" + a + "}" for a in axes) or "none"
                raise ConfigError(
                    f"config key '{key}.{field}' has value {spec[field]!r}: placeholder {{{name}}} has no values. "
                    f"Fix: add a list '{name}: [...]' to the family, or use one of its axes ({known}).",
                    key=f"{key}.{field}")
        for name, values in axes.items():
            if name not in used:
                raise ConfigError(
                    f"config key '{key}.{name}' has values {values}, but no setting of the family uses the "
                    f"placeholder {{{name}}}. Fix: use '{{{name}}}' in the model id (e.g. "
                    f"'google/multiberts-seed_{{{name}}}'), or remove '{name}'.", key=f"{key}.{name}")
            if not values or any(isinstance(v, bool) or not isinstance(v, int | float | str) for v in values):
                raise ConfigError(f"config key '{key}.{name}' has value {values}; an axis is a non-empty list of "
                                  "numbers or names.", key=f"{key}.{name}")
        if not axes:
            raise ConfigError(f"config key '{key}' has no axis (a list of values such as 'seed: [0, 1, 2]'), so it "
                              "would expand to nothing. Fix: add an axis and use it as a placeholder, or move the "
                              "encoder under 'encoders'.", key=f"{key}")
        widths = {name: max((len(str(v)) for v in values if isinstance(v, int)), default=0)
                  for name, values in axes.items()}
        members = []
        for combination in itertools.product(*axes.values()):
            values = dict(zip(axes, combination))
            suffix = "_".join(_value_text(v, widths[a]) for a, v in values.items())
            members.append(FamilyMember(f"{family}_{suffix}", family, values))
        out[family] = members
    return out


def _member_spec(spec: Mapping[str, Any], member: FamilyMember) -> dict[str, Any]:
    return {k: (v.format(**member.values) if isinstance(v, str) else copy.deepcopy(v))
            for k, v in spec.items() if not isinstance(v, list)}


def expand_families(config: dict[str, Any]) -> dict[str, list[FamilyMember]]:
    """Expand ``config['encoder_families']`` into ``config['encoders']`` in place (members first, in
    :func:`family_members` order, then the hand-written encoders); returns the members per family.

    ConfigError for a placeholder without values, values without a placeholder, and two encoders
    of the same name (two members, or a member and a hand-written encoder), or a family named like
    an encoder.
    """
    families = config.get("encoder_families")
    if not families:
        return {}
    if not isinstance(families, Mapping):
        raise ConfigError(f"config key 'encoder_families' has value {families!r}; it maps family names to "
                          "templates, e.g. {multibert: {source: hf, model: 'google/multiberts-seed_{seed}', "
                          "seed: [0, 1, 2]}}.", key="encoder_families")
    members = family_members(families)
    handwritten = config.get("encoders") or {}
    if not isinstance(handwritten, Mapping):
        return members  # the schema names the problem
    origin: dict[str, str] = {name: f"encoders.{name}" for name in handwritten}  # where each name comes from
    expanded: dict[str, Any] = {}
    for family, group in members.items():
        if family in handwritten:
            raise ConfigError(f"config key 'encoder_families.{family}': an encoder is also called '{family}', so the "
                              "name is ambiguous in 'analysis.encoder_group'. Fix: rename the family or the encoder.",
                              key=f"encoder_families.{family}")
        for member in group:
            spec = _member_spec(families[family], member)
            previous = handwritten.get(member.name)
            if isinstance(previous, Mapping) and all(previous.get(k) == v for k, v in spec.items()):
                continue  # expanded before (a config checked twice): keep it where it is
            here = f"encoder_families.{family} ({', '.join(f'{k}={v}' for k, v in member.values.items())})"
            if member.name in origin:
                raise ConfigError(
                    f"config key 'encoder_families.{family}' expands to encoder name '{member.name}' from {here}, "
                    f"which is already taken by {origin[member.name]}. Fix: rename the family or the encoder, or "
                    "remove the repeated value.", key=f"encoder_families.{family}")
            expanded[member.name] = spec
            origin[member.name] = here
    config["encoders"] = {**expanded, **handwritten}
    return members


STEP_AXIS = "step"


def training_dynamics_members(members: Mapping[str, list[FamilyMember]]) -> dict[str, list[dict[str, Any]]]:
    """Families with a ``step`` axis (checkpoints), for the training-dynamics figure.

    Per family, one record per member: ``encoder``, ``step`` (a number) and ``line``, the member's
    other axis values (``seed=3``; one line per value, ``""`` when ``step`` is the only axis). The
    final checkpoint of a line is its member with the largest step.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for family, group in members.items():
        if not group or STEP_AXIS not in group[0].values:
            continue
        steps = [m.values[STEP_AXIS] for m in group]
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in steps):
            raise ConfigError(
                f"config key 'encoder_families.{family}.{STEP_AXIS}' has values {sorted(set(map(str, steps)))}; "
                "a step axis orders checkpoints on the training-dynamics figure, so its values must be numbers. "
                "Fix: list numbers (e.g. [0, 20, 2000]) and put any unit in the template ('step_{step}k').",
                key=f"encoder_families.{family}.{STEP_AXIS}")
        out[family] = [
            {"encoder": m.name, "step": m.values[STEP_AXIS],
             "line": ", ".join(f"{k}={v}" for k, v in m.values.items() if k != STEP_AXIS)}
            for m in group
        ]
    return out


def with_family_note(message: str, members: Mapping[str, list[FamilyMember]]) -> str:
    for family, group in members.items():
        for member in group:
            if f"'encoders.{member.name}" in message:
                return f"{message} (encoder '{member.name}' is expanded from 'encoder_families.{family}')"
    return message


def expand_group(key: str, group: list[str] | None, members: Mapping[str, list[FamilyMember]]) -> list[str] | None:
    """A group of encoder names in which a family name stands for all its members (in family order)."""
    if group is None:
        return None
    out: list[str] = []
    for name in group:
        if name in members:
            out.extend(m.name for m in members[name])
        else:
            out.append(name)
    repeated = sorted({n for n in out if out.count(n) > 1})
    if repeated:
        raise ConfigError(f"config key '{key}' names encoder(s) {repeated} twice (perhaps once by name and once "
                          "through its family). Fix: list each encoder or family once.", key=f"{key}")
    return out


