"""Study configuration: schema validation with defaults, and the checks a schema cannot express.

(Families live in :mod:`affine_homotopy.study.families`, model lookup in :mod:`affine_homotopy.study.model_lookup`;
:mod:`affine_homotopy.config` gathers all three for the workflow.)

Every problem is reported as a :class:`ConfigError` whose message names the config key, the value
found and what would fix it, before any job runs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..errors import ConfigError
from .families import expand_families, expand_group, training_dynamics_members, with_family_note
from .layers import check_layer_spec, configured_label, layer_label, layer_labels, layer_positions
from .selection import check_extrinsic_selection, check_measure_selection
from .model_lookup import (
    base_encoder,
    check_layers,
    check_package_in_env,
    encoder_depth,
    local_model_dir,
    missing_pad_token_message,
    tokenizer_has_pad_token,
)
from .tasks import GLUE_TASKS, glue_dir_files

__all__ = ["ConfigError", "check_config", "extrinsic_layers", "load_config", "rank_deficiency_group", "table_layer",
           "validate_schema"]


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
    with open(schema_path) as handle:  # libyaml's safe loader when PyYAML has it: much faster on the schema
        schema = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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


# keys the schema knows by another name, (section, name in the config, name in the schema): a config
# that uses the first gets the second in its error, instead of the schema's unknown-key message
RENAMED_KEYS = (("intrinsic", "rank_tolerance_multiplier", "rank_multiplier"),)


def check_renamed_keys(config: Mapping[str, Any]) -> None:
    """A ConfigError naming the key to use for each key of :data:`RENAMED_KEYS` the config holds."""
    for section, old, new in RENAMED_KEYS:
        part = config.get(section)
        if isinstance(part, Mapping) and old in part:
            raise ConfigError(f"config key '{section}.{old}' was renamed: use '{section}.{new}' (same meaning).",
                              key=f"{section}.{old}")


def load_config(path: str | Path, schema_path: str | Path) -> dict[str, Any]:
    with open(path) as handle:
        config = yaml.safe_load(handle) or {}
    return check_config(config, schema_path)


def check_config(config: dict[str, Any], schema_path: str | Path, job_env: str | Path | None = None,
                 data_checks: bool = True) -> dict[str, Any]:
    """Family expansion, schema validation, defaults, then the semantic checks; returns the completed config.

    ``data_checks``: also read your own data where the config names it (:mod:`affine_homotopy.study.user_data`,
    :mod:`affine_homotopy.study.precomputed`): every ``table`` task's files (columns, texts, labels, classes,
    ids) and every ``embeddings`` encoder's files (layers, rows, NaN/Inf). The workflow's main process does;
    a job process that re-reads the workflow (on a cluster) skips it. The files' names, formats and
    the keys that name them are checked either way.

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
    check_renamed_keys(config)
    members = expand_families(config)
    if "layers" in config:
        check_layer_spec(config["layers"])
    try:
        validate_schema(config, schema_path)
    except ConfigError as error:
        raise ConfigError(with_family_note(str(error), members)) from None
    _check_encoders(config["encoders"], layer_positions(config["layers"]), job_env)
    _check_tasks(config["tasks"])
    _check_user_data(config, data_checks)  # table tasks and embeddings encoders: their files
    check_measure_selection(config)  # intrinsic.measures and what the analysis needs of it (selection.py)
    check_extrinsic_selection(config)  # extrinsic.measures (selection.py)
    training_dynamics_members(members)  # a step axis must be numeric
    analysis = config["analysis"]
    positions = layer_positions(config["layers"])
    extrinsic_layers(config)  # each one a configured layer
    table_layer(config)  # a configured layer, and one of the extrinsic layers
    configured_label("analysis.rank_deficiency.layer", analysis["rank_deficiency"]["layer"], positions)
    analysis["encoder_group"] = expand_group("analysis.encoder_group", analysis["encoder_group"], members)
    rank_deficiency = analysis["rank_deficiency"]
    rank_deficiency["group"] = expand_group("analysis.rank_deficiency.group", rank_deficiency["group"], members)
    rank_deficiency_group(config)  # an unknown name or an empty group fails here, before any job
    group = analysis["encoder_group"]
    if group is not None:
        unknown = [name for name in group if name not in config["encoders"]]
        if unknown:
            raise ConfigError(
                f"config key 'analysis.encoder_group' names unknown encoder(s) {unknown}; "
                f"known encoders: {', '.join(config['encoders'])}"
                + (f"; families: {', '.join(members)}." if members else "."), key="analysis.encoder_group")
        if len(group) < 2:
            raise ConfigError("config key 'analysis.encoder_group' needs at least 2 encoders.",
                              key="analysis.encoder_group")
    return config


# ---------------------------------------------------------------------------------------------
# encoders


_TRANSFORM_PARAMETERS = {"svd_truncate": "fraction", "gaussian_noise": "sigma"}


def _check_encoders(encoders: dict[str, dict[str, Any]], layers: list[Any], job_env: str | Path | None = None) -> None:
    for name, spec in encoders.items():
        if spec["source"] == "pypi":
            from .model_lookup import check_pypi_spec

            check_pypi_spec(name, spec)
        if spec["source"] != "derived":
            continue
        base_encoder(name, encoders)
        needed = _TRANSFORM_PARAMETERS.get(spec["transform"])
        if needed and needed not in spec:
            raise ConfigError(
                f"config key 'encoders.{name}' (transform {spec['transform']}) is missing "
                f"'{needed}'. Add e.g. '{needed}: 0.5'.", key=f"encoders.{name}")
    for name, spec in encoders.items():
        if spec["source"] == "derived":
            continue
        if spec["source"] == "package" and job_env is not None:
            check_package_in_env(name, spec, job_env)  # the embed job checks depth and padding token
            continue
        model_dir = local_model_dir(name, spec)
        if model_dir is None:
            continue  # an hf model not downloaded yet: the embed job checks depth and padding token
        check_layers(name, encoder_depth(model_dir, name), layers)
        if not spec.get("pad_token") and not tokenizer_has_pad_token(model_dir):
            raise ConfigError(missing_pad_token_message(name, spec))


# ---------------------------------------------------------------------------------------------
# tasks


def glue_task_of(name: str, spec: Mapping[str, Any]) -> str:
    task = spec.get("glue_task") or (name if name in GLUE_TASKS else None)
    if task is None:
        raise ConfigError(
            f"config key 'tasks.{name}' needs 'glue_task' (one of {', '.join(GLUE_TASKS)}): the "
            "task name is not a GLUE task name, so it cannot be inferred.", key=f"tasks.{name}")
    return task


def _check_tasks(tasks: dict[str, dict[str, Any]]) -> None:
    from .user_data import table_files

    for name, spec in tasks.items():
        if spec["source"] == "table":
            table_files(name, spec)  # one file to split, or a train and a validation file
        if spec["source"] == "hf_dataset":
            fraction = spec.get("validation_fraction") is not None
            if fraction and spec.get("validation") is not None:
                raise ConfigError(
                    f"task '{name}': config key 'tasks.{name}.validation_fraction' holds out part of the "
                    f"'{spec['train']}' split, but 'tasks.{name}.validation' = {spec['validation']!r} names an eval "
                    "split too. Fix: remove one of them.", key=f"tasks.{name}.validation_fraction")
        if spec["source"] in ("glue", "glue_dir"):
            spec["glue_task"] = glue_task_of(name, spec)
        if spec["source"] == "glue_dir":
            for split, path in glue_dir_files(spec["path"], spec["glue_task"]).items():
                if not path.is_file():
                    raise ConfigError(
                        f"config key 'tasks.{name}.path' has value {spec['path']!r}, but the "
                        f"{split} file {path} does not exist. The folder must hold "
                        "<TASK>/train.tsv and <TASK>/dev.tsv in the GLUE layout.", key=f"tasks.{name}.path")


def _check_user_data(config: dict[str, Any], data_checks: bool) -> None:
    """Your own data: each table task's files (read when ``data_checks``) and each embeddings encoder's file per
    task (its layout; its rows and values too where the task's examples are known here)."""
    from .precomputed import check_embeddings_encoder, embeddings_format, file_key
    from .user_data import known_task_ids, table_files, table_task
    from .user_files import existing_file, table_format

    tasks = config["tasks"]
    for name, spec in tasks.items():
        if spec["source"] == "table":
            for key, value in table_files(name, spec).items():
                table_format(existing_file(value, key, f"task '{name}'"), key, f"task '{name}'")
            if data_checks:
                table_task(name, spec)
    labels = layer_labels(layer_positions(config["layers"]))
    known: dict[str, Any] = {}

    def task_ids(task: str) -> Any:
        if task not in known:
            known[task] = known_task_ids(task, tasks[task]) if data_checks else None
        return known[task]

    for name, spec in config["encoders"].items():
        if spec["source"] != "embeddings":
            continue
        if not data_checks:
            for task, value in spec["files"].items():
                what = f"encoder '{name}', task '{task}'"
                embeddings_format(existing_file(value, file_key(name, task), what), file_key(name, task), what)
            continue
        check_embeddings_encoder(name, spec, list(tasks), labels, task_ids)


# ---------------------------------------------------------------------------------------------
# defaults that depend on other keys (one definition, read by the rule files)


def extrinsic_parts(config: Mapping[str, Any]) -> list[list[str]] | None:
    """The encoders each extrinsic job maps from (``extrinsic.sources_per_job`` consecutive encoders of
    ``encoders``, in their order), or None: one job per task and layer computes every ordered pair."""
    per_job = config.get("extrinsic", {}).get("sources_per_job")
    if per_job is None:
        return None
    names = list(config["encoders"])
    return [names[first : first + per_job] for first in range(0, len(names), per_job)]


def extrinsic_layers(config: Mapping[str, Any]) -> list[str]:
    """Labels of the layers the extrinsic stage, its probes and Table 1 run at (``extrinsic.layers``), in
    the order of the configured ``layers``: null means every configured layer. Each entry is a position
    as the ``layers`` key writes it (12, last, 0.5) or its label (layer12, depth0.50); ConfigError (key,
    value, the configured layers, the fix) for one that is not configured, or for a repeated one."""
    positions = layer_positions(config["layers"])
    configured = layer_labels(positions)
    chosen = config.get("extrinsic", {}).get("layers")
    if chosen is None:
        return configured
    labels = []
    for value in chosen:
        try:
            label = layer_label(value)
        except ValueError:
            label = None
        if label not in configured:
            raise ConfigError(
                f"config key 'extrinsic.layers' = {list(chosen)} names {value!r}, which is not one of the configured "
                f"layer positions (config key 'layers': {list(positions)}, labels {configured}). Fix: list configured "
                "positions (or their labels), add it to 'layers', or set extrinsic.layers: null for every configured "
                "layer.", key="extrinsic.layers")
        labels.append(label)
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"config key 'extrinsic.layers' = {list(chosen)} names a layer more than once (labels "
                          f"{repeated}). Fix: list each position once.", key="extrinsic.layers")
    return [label for label in configured if label in labels]


def table_layer(config: Mapping[str, Any]) -> str:
    """Label of the layer of Table 1 (Markdown, LaTeX), Figure 2 and paper_comparison.md
    (``analysis.table_layer``): a configured position or its label, which must be one of the extrinsic
    layers (:func:`extrinsic_layers`); null means the last of them (the last configured layer unless
    ``extrinsic.layers`` says otherwise). ConfigError naming both keys when it is not an extrinsic layer."""
    value = config["analysis"].get("table_layer")
    layers = extrinsic_layers(config)
    if value is None:
        return layers[-1]
    label = configured_label("analysis.table_layer", value, layer_positions(config["layers"]))
    if label not in layers:
        chosen = config["extrinsic"]["layers"]
        raise ConfigError(
            f"config key 'analysis.table_layer' has value {value!r} (label {label}), which is not one of the layers "
            f"the extrinsic stage runs at: config key 'extrinsic.layers' = {list(chosen)} (labels {layers}). Table 1, "
            "Figure 2 and paper_comparison.md set extrinsic against intrinsic distances at that layer. Fix: set "
            f"analysis.table_layer to one of {list(chosen)} (or null for the last of them), or add {value!r} to "
            "extrinsic.layers.", key="analysis.table_layer")
    return label


def rank_deficiency_group(config: Mapping[str, Any]) -> list[str]:
    """The encoders of Figure 3 (``analysis.rank_deficiency.group``): null means every non-derived encoder."""
    encoders = config["encoders"]
    group = config["analysis"]["rank_deficiency"]["group"]
    if group is None:
        return [name for name, spec in encoders.items() if spec["source"] != "derived"]
    if not group:
        raise ConfigError("config key 'analysis.rank_deficiency.group' is an empty list. Fix: list at least one "
                          "encoder, or use null for the default (every non-derived encoder).",
                          key="analysis.rank_deficiency.group")
    unknown = [name for name in group if name not in encoders]
    if unknown:
        raise ConfigError(f"config key 'analysis.rank_deficiency.group' names unknown encoder(s) {unknown}; "
                          f"known encoders: {', '.join(encoders)}.", key="analysis.rank_deficiency.group")
    return list(group)
