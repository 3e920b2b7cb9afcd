"""Study configuration: schema validation with defaults, and the checks a schema cannot express.

Every problem is reported as a :class:`ConfigError` whose message names the config key, the value
found and what would fix it, before any job runs.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import ConfigError
from .layers import check_layer_spec, configured_label, layer_positions
from .measures import check_measure_selection
from .tasks import GLUE_TASKS, glue_dir_files

__all__ = ["ConfigError", "GLUE_TASKS", "check_config", "expand_families", "family_members", "load_config",
           "training_dynamics_members"]


def _with_defaults(validator_class: type) -> type:
    """Extend a jsonschema validator so that ``default`` values are filled into the instance."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultFillingValidator = _with_defaults(jsonschema.Draft7Validator)


def _key(path: Any) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "<top level>"


def _schema_error_message(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    value = error.instance
    kind = error.validator
    if kind == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"config key '{key}' has value {value!r}; allowed values: {allowed}."
    if kind == "const":
        return f"config key '{key}' has value {value!r}; expected {error.validator_value!r}."
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"config key '{key}' is missing required key '{missing}'. Add it (see workflow/schemas/config.schema.yaml)."
    if kind == "additionalProperties":
        return f"config key '{key}': {error.message}. Remove it or fix its spelling (allowed keys are listed in workflow/schemas/config.schema.yaml)."
    if kind == "pattern":
        return (
            f"config key '{key}' has value {value!r}, which is not a valid name "
            "(use letters, digits, '_', '-' and '.'; it must start with a letter or digit)."
        )
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"config key '{key}' has value {value!r}; it must be {bounds[kind]} {error.validator_value}."
    if kind in ("minItems", "minProperties"):
        return f"config key '{key}' has value {value!r}; it needs at least {error.validator_value} entries."
    if kind == "type":
        return f"config key '{key}' has value {value!r}; expected type {error.validator_value}."
    return f"config key '{key}' has value {value!r}: {error.message}."


def _most_specific(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    # allOf/if-then nesting wraps the useful error; report the deepest one.
    return max(errors, key=lambda e: (len(e.absolute_path), len(list(e.context or []))))


def validate_schema(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` against the YAML JSON-schema at ``schema_path``; fill defaults in place."""
    with open(schema_path) as handle:
        schema = yaml.safe_load(handle)
    validator = _DefaultFillingValidator(schema)
    errors = list(validator.iter_errors(config))
    if errors:
        flat: list[jsonschema.ValidationError] = []
        for error in errors:
            flat.extend(_leaves(error))
        raise ConfigError(_schema_error_message(_most_specific(flat)))
    return config


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    if not error.context:
        return [error]
    out: list[jsonschema.ValidationError] = []
    for sub in error.context:
        out.extend(_leaves(sub))
    return out


def load_config(path: str | Path, schema_path: str | Path) -> dict[str, Any]:
    with open(path) as handle:
        config = yaml.safe_load(handle) or {}
    return check_config(config, schema_path)


def check_config(config: dict[str, Any], schema_path: str | Path, job_env: str | Path | None = None) -> dict[str, Any]:
    """Family expansion, schema validation, defaults, then the semantic checks; returns the completed config.

    ``job_env``: the conda environment file the embedding jobs run in (``--use-conda``:
    ``workflow/envs/embed.yaml``). A ``package`` encoder is then checked against that file (the package must
    be installed there) instead of against the interpreter that checks the config, and its depth and
    padding token are checked by the embed job, in that environment. Without ``job_env`` the jobs run
    in this interpreter, so the package is looked up here.

    ``encoder_families`` are expanded into ``encoders`` first (members before the hand-written
    encoders), so expanded encoders are validated like hand-written ones; family names in
    ``analysis.encoder_group`` and ``analysis.rank_deficiency.group`` become their members.
    """
    if not isinstance(config, dict):
        raise ConfigError("the config must be a mapping of keys to values (see config/config.yaml).")
    members = expand_families(config)
    if "layers" in config:
        check_layer_spec(config["layers"])
    try:
        validate_schema(config, schema_path)
    except ConfigError as error:
        raise ConfigError(_with_family_note(str(error), members)) from None
    _check_encoders(config["encoders"], layer_positions(config["layers"]), job_env)
    _check_tasks(config["tasks"])
    check_measure_selection(config)  # intrinsic.measures and what the analysis needs of it (measures.py)
    training_dynamics_members(members)  # a step axis must be numeric
    analysis = config["analysis"]
    positions = layer_positions(config["layers"])
    configured_label("analysis.table_layer", analysis["table_layer"], positions)
    configured_label("analysis.rank_deficiency.layer", analysis["rank_deficiency"]["layer"], positions)
    analysis["encoder_group"] = _expand_group("analysis.encoder_group", analysis["encoder_group"], members)
    rank_deficiency = analysis["rank_deficiency"]
    rank_deficiency["group"] = _expand_group("analysis.rank_deficiency.group", rank_deficiency["group"], members)
    rank_deficiency_group(config)  # an unknown name or an empty group fails here, before any job
    group = analysis["encoder_group"]
    if group is not None:
        unknown = [name for name in group if name not in config["encoders"]]
        if unknown:
            raise ConfigError(
                f"config key 'analysis.encoder_group' names unknown encoder(s) {unknown}; "
                f"known encoders: {', '.join(config['encoders'])}"
                + (f"; families: {', '.join(members)}." if members else ".")
            )
        if len(group) < 2:
            raise ConfigError("config key 'analysis.encoder_group' needs at least 2 encoders.")
    return config


# ---------------------------------------------------------------------------------------------
# encoder families: one template, one encoder per combination of axis values


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
                          "Write placeholders as {seed}; double a literal brace ({{ or }}).") from None
    if any(not field.isidentifier() for field in fields):
        raise ConfigError(f"config key '{key}' has value {template!r}: placeholders must be plain axis names "
                          "such as {seed} (no empty {}, no attributes or indices).")
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
                              "and axes, e.g. {source: hf, model: 'google/multiberts-seed_{seed}', seed: [0, 1]}.")
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
                    f"Fix: add a list '{name}: [...]' to the family, or use one of its axes ({known})."
                )
        for name, values in axes.items():
            if name not in used:
                raise ConfigError(
                    f"config key '{key}.{name}' has values {values}, but no setting of the family uses the "
                    f"placeholder {{{name}}}. Fix: use '{{{name}}}' in the model id (e.g. "
                    f"'google/multiberts-seed_{{{name}}}'), or remove '{name}'."
                )
            if not values or any(isinstance(v, bool) or not isinstance(v, int | float | str) for v in values):
                raise ConfigError(f"config key '{key}.{name}' has value {values}; an axis is a non-empty list of "
                                  "numbers or names.")
        if not axes:
            raise ConfigError(f"config key '{key}' has no axis (a list of values such as 'seed: [0, 1, 2]'), so it "
                              "would expand to nothing. Fix: add an axis and use it as a placeholder, or move the "
                              "encoder under 'encoders'.")
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
                          "seed: [0, 1, 2]}}.")
    members = family_members(families)
    handwritten = config.get("encoders") or {}
    if not isinstance(handwritten, Mapping):
        return members  # the schema names the problem
    origin: dict[str, str] = {name: f"encoders.{name}" for name in handwritten}  # where each name comes from
    expanded: dict[str, Any] = {}
    for family, group in members.items():
        if family in handwritten:
            raise ConfigError(f"config key 'encoder_families.{family}': an encoder is also called '{family}', so the "
                              "name is ambiguous in 'analysis.encoder_group'. Fix: rename the family or the encoder.")
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
                    "remove the repeated value."
                )
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
                "Fix: list numbers (e.g. [0, 20, 2000]) and put any unit in the template ('step_{step}k')."
            )
        out[family] = [
            {"encoder": m.name, "step": m.values[STEP_AXIS],
             "line": ", ".join(f"{k}={v}" for k, v in m.values.items() if k != STEP_AXIS)}
            for m in group
        ]
    return out


def _with_family_note(message: str, members: Mapping[str, list[FamilyMember]]) -> str:
    for family, group in members.items():
        for member in group:
            if f"'encoders.{member.name}" in message:
                return f"{message} (encoder '{member.name}' is expanded from 'encoder_families.{family}')"
    return message


def _expand_group(key: str, group: list[str] | None, members: Mapping[str, list[FamilyMember]]) -> list[str] | None:
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
                          "through its family). Fix: list each encoder or family once.")
    return out


# ---------------------------------------------------------------------------------------------
# encoders


def module_name(spec: Mapping[str, Any]) -> str:
    return spec.get("module") or spec["package"].replace("-", "_")


def package_model_dir(name: str, spec: Mapping[str, Any]) -> Path:
    """Model folder of a ``package`` encoder; ConfigError with the pip command when missing."""
    module = module_name(spec)
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"config key 'encoders.{name}.package' has value {spec['package']!r}, but Python "
            f"package '{module}' is not installed. Fix: pip install {spec['package']}"
        )
    root = Path(list(found.submodule_search_locations)[0])
    model_dir = root / spec.get("subdir", "model")
    if not (model_dir / "config.json").is_file():
        raise ConfigError(
            f"encoder '{name}': package {spec['package']!r} has no model at {model_dir} "
            f"(no config.json). Set 'encoders.{name}.subdir' to the folder holding the model files."
        )
    return model_dir


def check_package_in_env(name: str, spec: Mapping[str, Any], env_file: str | Path) -> None:
    """A ``package`` encoder under ``--use-conda``: its distribution must be one of ``env_file``'s pip packages."""
    import re

    def canonical(text: str) -> str:
        return re.sub(r"[-_.]+", "-", text).lower()

    environment = yaml.safe_load(Path(env_file).read_text()) or {}
    pip = next((d["pip"] for d in environment.get("dependencies", []) if isinstance(d, dict) and "pip" in d), [])
    names = {canonical(re.split(r"[<>=!~ \[;]", line, maxsplit=1)[0]) for line in pip}
    if canonical(spec["package"]) not in names:
        raise ConfigError(
            f"config key 'encoders.{name}.package' has value {spec['package']!r}, but with --use-conda the "
            f"embedding jobs run in {Path(env_file).name}, which does not install it. Fix: add "
            f"'{spec['package']}==<version>' to its pip section (and to constraints.txt), or run without --use-conda."
        )


def local_model_dir(name: str, spec: Mapping[str, Any]) -> Path | None:
    """Directory of an encoder's model files when it is on this machine without network access."""
    source = spec["source"]
    if source == "path":
        path = Path(spec["path"]).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"config key 'encoders.{name}.path' has value {spec['path']!r}, which is not a "
                "Hugging Face model directory (no config.json there). Fix the path or use "
                "source: hf with a model id."
            )
        return path
    if source == "package":
        return package_model_dir(name, spec)
    if source == "hf":
        return _cached_hf_dir(spec["model"], spec.get("revision"))
    if source == "pypi":
        # what the download stage staged (paths relative to the working directory, the repository
        # root); None before staging, like an hf model not downloaded yet
        staged = Path("resources") / "models" / name
        return staged if (staged / "STAGED.json").is_file() and (staged / "config.json").is_file() else None
    return None


def _cached_hf_dir(model: str, revision: str | None) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        return None
    from .hub import hub_cache_dir  # HF_HOME / HF_HUB_CACHE as set now, not at import

    found = try_to_load_from_cache(model, "config.json", revision=revision, cache_dir=hub_cache_dir())
    return Path(found).parent if isinstance(found, str) else None


def encoder_depth(model_dir: Path) -> int:
    """Number of transformer layers from a model's config.json (hidden states 0..depth)."""
    with open(model_dir / "config.json") as handle:
        cfg = json.load(handle)
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if key in cfg:
            return int(cfg[key])
    raise ConfigError(f"{model_dir}/config.json states no number of layers (num_hidden_layers)")


def base_encoder(name: str, encoders: Mapping[str, Mapping[str, Any]]) -> str:
    """The non-derived encoder at the root of a chain of derived encoders."""
    seen = [name]
    current = name
    while encoders[current]["source"] == "derived":
        base = encoders[current]["base"]
        if base not in encoders:
            raise ConfigError(
                f"config key 'encoders.{current}.base' has value {base!r}, which is not an "
                f"encoder of this config. Known encoders: {', '.join(encoders)}."
            )
        if base in seen:
            chain = " -> ".join([*seen, base])
            raise ConfigError(
                f"config key 'encoders.{current}.base': derived encoders form a cycle ({chain}). "
                "A derived encoder must end at an hf, path, package or pypi encoder."
            )
        seen.append(base)
        current = base
    return current


_TRANSFORM_PARAMETERS = {"svd_truncate": "fraction", "gaussian_noise": "sigma"}


def _check_encoders(encoders: dict[str, dict[str, Any]], layers: list[Any], job_env: str | Path | None = None) -> None:
    for name, spec in encoders.items():
        if spec["source"] == "pypi":
            from .pypi_models import check_pypi_spec

            check_pypi_spec(name, spec)
        if spec["source"] != "derived":
            continue
        base_encoder(name, encoders)
        needed = _TRANSFORM_PARAMETERS.get(spec["transform"])
        if needed and needed not in spec:
            raise ConfigError(
                f"config key 'encoders.{name}' (transform {spec['transform']}) is missing "
                f"'{needed}'. Add e.g. '{needed}: 0.5'."
            )
    for name, spec in encoders.items():
        if spec["source"] == "derived":
            continue
        if spec["source"] == "package" and job_env is not None:
            check_package_in_env(name, spec, job_env)  # the embed job checks depth and padding token
            continue
        model_dir = local_model_dir(name, spec)
        if model_dir is None:
            continue  # an hf model not downloaded yet: the embed job checks depth and padding token
        check_layers(name, encoder_depth(model_dir), layers)
        if not spec.get("pad_token") and not tokenizer_has_pad_token(model_dir):
            raise ConfigError(missing_pad_token_message(name, spec))


def check_layers(name: str, depth: int, layers: list[Any]) -> None:
    """ConfigError when an absolute layer index exceeds the model's depth (relative positions and
    ``last`` always exist; see :mod:`affine_homotopy.layers`)."""
    too_deep = [layer for layer in layers if isinstance(layer, int) and not isinstance(layer, bool) and layer > depth]
    if too_deep:
        raise ConfigError(
            f"config key 'layers' has value {layers}, but encoder '{name}' has depth {depth} "
            f"(hidden states 0..{depth}); layer(s) {too_deep} do not exist. Use layers <= {depth}, "
            "or positions relative to each model's depth: 'layers: {relative: [0.5, 1.0]}' or 'layers: [last]'."
        )


def missing_pad_token_message(name: str, spec: Mapping[str, Any]) -> str:
    pooling = spec.get("pooling")
    return (
        f"encoder '{name}': its tokenizer has no padding token, which batching needs"
        + (f" (pooling '{pooling}')" if pooling else "")
        + f"; config key 'encoders.{name}.pad_token' is not set. Fix: set 'pad_token: eos' under "
        f"encoders.{name} (or bos / unk): padded positions are masked out, so which token pads does not "
        "change the representations. Decoder-only models (GPT-2, Llama, Qwen) usually need this."
    )


def tokenizer_has_pad_token(model_dir: Path) -> bool:
    """Whether the tokenizer saved in ``model_dir`` defines a padding token.

    Read from ``tokenizer_config.json`` / ``special_tokens_map.json`` when they say; otherwise (old
    formats whose tokenizer class supplies a default) the tokenizer is loaded to find out.
    """
    declared = None
    for file in ("special_tokens_map.json", "tokenizer_config.json"):
        path = model_dir / file
        if path.is_file():
            with open(path) as handle:
                settings = json.load(handle)
            if settings.get("pad_token"):
                return True
            if "pad_token" in settings:
                declared = False
    if declared is False:
        return False
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, local_files_only=True).pad_token is not None


# ---------------------------------------------------------------------------------------------
# tasks


def glue_task_of(name: str, spec: Mapping[str, Any]) -> str:
    task = spec.get("glue_task") or (name if name in GLUE_TASKS else None)
    if task is None:
        raise ConfigError(
            f"config key 'tasks.{name}' needs 'glue_task' (one of {', '.join(GLUE_TASKS)}): the "
            "task name is not a GLUE task name, so it cannot be inferred."
        )
    return task


def _check_tasks(tasks: dict[str, dict[str, Any]]) -> None:
    for name, spec in tasks.items():
        if spec["source"] in ("glue", "glue_dir"):
            spec["glue_task"] = glue_task_of(name, spec)
        if spec["source"] == "glue_dir":
            for split, path in glue_dir_files(spec["path"], spec["glue_task"]).items():
                if not path.is_file():
                    raise ConfigError(
                        f"config key 'tasks.{name}.path' has value {spec['path']!r}, but the "
                        f"{split} file {path} does not exist. The folder must hold "
                        "<TASK>/train.tsv and <TASK>/dev.tsv in the GLUE layout."
                    )


# ---------------------------------------------------------------------------------------------
# defaults that depend on other keys (one definition, read by the rule files)


def rank_deficiency_group(config: Mapping[str, Any]) -> list[str]:
    """The encoders of Figure 3 (``analysis.rank_deficiency.group``): null means every non-derived encoder."""
    encoders = config["encoders"]
    group = config["analysis"]["rank_deficiency"]["group"]
    if group is None:
        return [name for name, spec in encoders.items() if spec["source"] != "derived"]
    if not group:
        raise ConfigError("config key 'analysis.rank_deficiency.group' is an empty list. Fix: list at least one "
                          "encoder, or use null for the default (every non-derived encoder).")
    unknown = [name for name in group if name not in encoders]
    if unknown:
        raise ConfigError(f"config key 'analysis.rank_deficiency.group' names unknown encoder(s) {unknown}; "
                          f"known encoders: {', '.join(encoders)}.")
    return list(group)
