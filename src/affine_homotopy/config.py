"""Study configuration: schema validation with defaults, and the checks a schema cannot express.

Every problem is reported as a :class:`ConfigError` whose message names the config key, the value
found and what would fix it, before any job runs.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import ConfigError
from .tasks import GLUE_TASKS, glue_dir_files

__all__ = ["ConfigError", "GLUE_TASKS", "check_config", "load_config"]


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


def check_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Schema validation, defaults, then the semantic checks; returns the completed config."""
    if not isinstance(config, dict):
        raise ConfigError("the config must be a mapping of keys to values (see config/demo.yaml).")
    validate_schema(config, schema_path)
    _check_encoders(config["encoders"], config["layers"])
    _check_tasks(config["tasks"])
    group = config["analysis"]["encoder_group"]
    if group is not None:
        unknown = [name for name in group if name not in config["encoders"]]
        if unknown:
            raise ConfigError(
                f"config key 'analysis.encoder_group' names unknown encoder(s) {unknown}; "
                f"known encoders: {', '.join(config['encoders'])}."
            )
        if len(group) < 2:
            raise ConfigError("config key 'analysis.encoder_group' needs at least 2 encoders.")
    return config


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
    return None


def _cached_hf_dir(model: str, revision: str | None) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        return None
    found = try_to_load_from_cache(model, "config.json", revision=revision)
    return Path(found).parent if isinstance(found, str) else None


def encoder_depth(model_dir: Path) -> int:
    """Number of transformer layers from a model's config.json (hidden states 0..depth)."""
    import json

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
                "A derived encoder must end at an hf, path or package encoder."
            )
        seen.append(base)
        current = base
    return current


_TRANSFORM_PARAMETERS = {"svd_truncate": "fraction", "gaussian_noise": "sigma"}


def _check_encoders(encoders: dict[str, dict[str, Any]], layers: list[int]) -> None:
    for name, spec in encoders.items():
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
        model_dir = local_model_dir(name, spec)
        if model_dir is None:
            continue  # an hf model not downloaded yet: its depth is checked by the embed job
        check_layers(name, encoder_depth(model_dir), layers)


def check_layers(name: str, depth: int, layers: list[int]) -> None:
    too_deep = [layer for layer in layers if layer > depth]
    if too_deep:
        raise ConfigError(
            f"config key 'layers' has value {layers}, but encoder '{name}' has depth {depth} "
            f"(hidden states 0..{depth}); layer(s) {too_deep} do not exist. Use layers <= {depth}."
        )


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
