"""The study configuration, for the workflow and for tests: validation and semantic checks
(:mod:`affine_homotopy.validation`), encoder families (:mod:`affine_homotopy.families`) and model
lookup (:mod:`affine_homotopy.model_lookup`), gathered in one place. Library modules import from
those modules directly, so that none of them needs this one.
"""

from __future__ import annotations

from .errors import ConfigError
from .families import STEP_AXIS, FamilyMember, expand_families, family_members, training_dynamics_members
from .model_lookup import (
    base_encoder,
    check_layers,
    check_package_in_env,
    encoder_depth,
    local_model_dir,
    missing_pad_token_message,
    module_name,
    package_model_dir,
    tokenizer_has_pad_token,
)
from .tasks import GLUE_TASKS
from .validation import (
    check_config,
    extrinsic_layers,
    glue_task_of,
    load_config,
    rank_deficiency_group,
    table_layer,
    validate_schema,
)

__all__ = [
    "ConfigError", "FamilyMember", "GLUE_TASKS", "STEP_AXIS", "base_encoder", "check_config", "check_layers",
    "check_package_in_env", "encoder_depth", "expand_families", "extrinsic_layers", "family_members", "glue_task_of",
    "load_config", "local_model_dir", "missing_pad_token_message", "module_name", "package_model_dir",
    "rank_deficiency_group", "table_layer", "tokenizer_has_pad_token", "training_dynamics_members", "validate_schema",
]
