"""A study's lock: the commit every hub model, GLUE and Hugging Face data set of the study resolved to,
and the sha256 of every local file it reads (``table`` tasks' data, ``embeddings`` encoders' files).

``config/<run_name>.lock.yaml`` (or the config's ``lock_file``) is written by the staging gate the
first time a study is staged, and committed with the config. Afterwards it is enforced:

* before any job (:func:`check_lock`): the lock must belong to this config (its ``run_name``), hold
  an entry for every hub encoder and GLUE task (missing entry), hold no entry the config no longer
  has or names differently (stale entry), and every locked commit must be a full commit hash;
  a model already staged in ``resources/`` must be the locked commit; every local file must still have
  its locked sha256 (``files``, keyed by the config key that names the file: a changed file is refused);
* when staging (:func:`check_resolved`): the commit the requested revision resolves to upstream must
  be the locked one.

Each error names the key and the fix. ``update_lock: true`` (``--config update_lock=True``) lifts
the checks for one run and the staging gate rewrites the lock from what was staged. Models and data
staged by hand without a commit hash are outside the lock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, StagingError

COMMIT = re.compile(r"^[0-9a-f]{40}$")
GLUE_REPO = "nyu-mll/glue"  # the hub's GLUE data set (tasks.GLUE_REPO; not imported: tasks pulls pandas)
KINDS = {"models": "encoder", "datasets": "task"}
FILES = "files"  # config key of a local file (tasks.x.path, encoders.y.files.x) -> {path, sha256}
UPDATE_HINT = "--config update_lock=True (staging then rewrites the lock from what it stages; commit the new lock)"


def is_commit(value: Any) -> bool:
    return isinstance(value, str) and bool(COMMIT.match(value))


def lock_path(config: Mapping[str, Any]) -> Path:
    """Where the study's lock lives (relative paths: from the working directory, like config/)."""
    return Path(config.get("lock_file") or f"config/{config['run_name']}.lock.yaml")


def lockable(config: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """What the study locks: each hub encoder's model and requested revision, each GLUE and Hugging Face
    data set's, and (``files``) each local file a table task or an embeddings encoder reads."""
    models = {
        name: {"repo_id": spec["model"], "revision": spec.get("revision")}
        for name, spec in config["encoders"].items() if spec["source"] == "hf"
    }
    datasets = {
        name: {"repo_id": GLUE_REPO, "glue_task": spec["glue_task"], "revision": spec.get("revision")}
        for name, spec in config["tasks"].items() if spec["source"] == "glue"
    }
    datasets.update({
        name: {"repo_id": spec["dataset"], "config_name": spec.get("config_name"), "revision": spec.get("revision")}
        for name, spec in config["tasks"].items() if spec["source"] == "hf_dataset"
    })
    return {"models": models, "datasets": datasets, FILES: local_files(config)}


def local_files(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """config key -> {"path": value} of every local file the study reads (table data, embeddings files)."""
    files: dict[str, dict[str, Any]] = {}
    for name, spec in config["tasks"].items():
        if spec["source"] == "table":
            for role in ("path", "train", "validation"):
                if spec.get(role) is not None:
                    files[f"tasks.{name}.{role}"] = {"path": str(spec[role])}
    for name, spec in config["encoders"].items():
        if spec["source"] == "embeddings":
            for task, value in spec["files"].items():
                files[f"encoders.{name}.files.{task}"] = {"path": str(value)}
    return files


def check_revisions(config: Mapping[str, Any]) -> None:
    """A ``revision`` that looks like a commit but is not a full one (an abbreviated hash) is refused:
    the hub resolves branches and tags, and a lock needs the full 40 hex digits."""
    for section, kind in (("encoders", "encoder"), ("tasks", "task")):
        for name, spec in config[section].items():
            revision = spec.get("revision")
            if isinstance(revision, str) and re.fullmatch(r"[0-9a-fA-F]{7,40}", revision) and not is_commit(revision):
                raise ConfigError(
                    f"config key '{section}.{name}.revision' has value {revision!r}, which is not a commit "
                    f"hash (a commit is 40 lower-case hex digits). Fix: give the full commit, a branch or tag "
                    f"name, or leave it out (main; the lock records the commit it resolves to).",
                    key=f"{section}.{name}.revision")


def read_lock(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        lock = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"lock file {path} is not valid YAML ({error}). Fix: restore it from version "
                          f"control, or delete it and stage again to re-create it.") from None
    if not isinstance(lock, dict) or not all(isinstance(lock.get(section) or {}, dict)
                                             for section in ("models", "datasets", FILES)):
        raise ConfigError(f"lock file {path} is not a lock (a mapping with run_name, models, datasets and files). "
                          f"Fix: restore it from version control, or delete it and stage again.")
    return lock


def check_lock(config: Mapping[str, Any], path: Path, staged_models: Mapping[str, str] | None = None,
               hash_files: bool = True) -> dict[str, Any] | None:
    """The lock of this study, checked against the config (see the module's docstring); None when
    there is none yet or ``update_lock`` is set. ``staged_models``: encoder -> commit of the models
    already in ``resources/``. ``hash_files``: compare each local file's sha256 with the lock's (off in a
    job process that re-reads the workflow: the main process has)."""
    check_revisions(config)
    lock = read_lock(path)
    if lock is None or config.get("update_lock"):
        return None
    if lock.get("run_name") != config["run_name"]:
        raise ConfigError(
            f"lock file {path} was written for run_name {lock.get('run_name')!r}, but this config's run_name "
            f"is {config['run_name']!r}: a lock for another config. Fix: point 'lock_file' at this study's "
            f"lock, or delete {path} to create this study's lock when it is staged."
        )
    wanted = lockable(config)
    for section, kind in KINDS.items():
        entries = lock.get(section) or {}
        for name, item in wanted[section].items():
            key = f"{path}: {section}.{name}"
            entry = entries.get(name)
            if entry is None:
                raise ConfigError(
                    f"{key} is missing: the config's {kind} '{name}' ({item['repo_id']}) is not locked. Fix: "
                    f"stage it and record its commit with {UPDATE_HINT}."
                )
            if not is_commit(entry.get("commit")):
                raise ConfigError(
                    f"{key}.commit has value {entry.get('commit')!r}, which is not a commit hash (40 lower-case "
                    f"hex digits). Fix: restore the lock from version control, or re-create the entry with "
                    f"{UPDATE_HINT}."
                )
            differing = [f for f in item if entry.get(f) != item[f]]
            revision = item.get("revision")
            if is_commit(revision) and revision != entry["commit"]:
                differing.append("commit")
            if differing:
                shown = ", ".join(f"{f}: lock {entry.get(f)!r}, config {item.get(f, revision)!r}" for f in differing)
                raise ConfigError(
                    f"{key} is stale: {shown}. Fix: to reproduce the locked study, set the config back; to "
                    f"lock the config's choice, run with {UPDATE_HINT}."
                )
        for name in entries:
            if name not in wanted[section]:
                raise ConfigError(
                    f"{path}: {section}.{name} is stale: the config has no hub {kind} '{name}'. Fix: delete "
                    f"that entry from the lock, or rewrite the lock with {UPDATE_HINT}."
                )
    _check_files(wanted[FILES], lock.get(FILES) or {}, path, hash_files)
    for name, commit in (staged_models or {}).items():
        locked = lock["models"].get(name, {}).get("commit")
        if locked and is_commit(commit) and commit != locked:
            raise ConfigError(
                f"{path}: models.{name}.commit is {locked}, but resources/models/{name} was staged at commit "
                f"{commit}. Fix: delete resources/models/{name} to stage the locked commit, or lock the staged "
                f"one with {UPDATE_HINT}."
            )
    return lock


def _check_files(wanted: Mapping[str, Mapping[str, Any]], entries: Mapping[str, Any], path: Path,
                 hash_files: bool) -> None:
    from .user_files import file_sha256, resolve_path

    for key, item in wanted.items():
        entry = entries.get(key)
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{path}: files.{key} is missing: the file of config key '{key}' ({item['path']}) is not locked. "
                f"Fix: record its sha256 with {UPDATE_HINT}.", key=f"{key}")
        if entry.get("path") != item["path"]:
            raise ConfigError(
                f"{path}: files.{key} is stale: path: lock {entry.get('path')!r}, config {item['path']!r}. Fix: to "
                f"reproduce the locked study, set config key '{key}' back; to lock the new file, run with {UPDATE_HINT}.",
                key=f"{key}")
        if hash_files and resolve_path(item["path"]).is_file():
            found = file_sha256(resolve_path(item["path"]))
            if found != entry.get("sha256"):
                raise ConfigError(
                    f"config key '{key}' = {item['path']!r}: the file has changed since the lock {path} was written "
                    f"(sha256 {found}; the lock pins files.{key}.sha256 = {entry.get('sha256')}). Fix: to reproduce "
                    f"the locked study, restore the file (e.g. from version control); to use the new contents on "
                    f"purpose, run with {UPDATE_HINT}.", key=f"{key}")
    for key in entries:
        if key not in wanted:
            raise ConfigError(
                f"{path}: files.{key} is stale: the config has no local file at config key '{key}'. Fix: delete that "
                f"entry from the lock, or rewrite the lock with {UPDATE_HINT}.", key=f"{key}")


def locked_commit(lock: Mapping[str, Any] | None, section: str, name: str) -> str | None:
    return ((lock or {}).get(section) or {}).get(name, {}).get("commit")


def check_resolved(what: str, repo_id: str, revision: str | None, resolved: str, locked: str | None,
                   lock_file: str | Path | None) -> None:
    """At staging: the commit ``revision`` resolved to must be the locked one."""
    if locked is None or resolved == locked:
        return
    raise StagingError(
        f"{what}: {repo_id!r} at revision {revision or 'main'} resolves to commit {resolved}, but the lock "
        f"{lock_file} pins commit {locked}: upstream has changed. Fix: to reproduce the locked study, set "
        f"'revision: {locked}' for it in the config; to move to the new commit on purpose, run with "
        f"{UPDATE_HINT}."
    )


def build_lock(config: Mapping[str, Any], staged: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The lock for ``config`` from the staging records (``{"models": {encoder: STAGED.json}, "tasks": ...}``);
    entries staged by hand without a commit hash are left out."""
    from .user_files import file_sha256, resolve_path

    wanted = lockable(config)
    records = {"models": staged.get("models", {}), "datasets": staged.get("tasks", {})}
    lock: dict[str, Any] = {"run_name": config["run_name"], "models": {}, "datasets": {}, FILES: {}}
    for section in KINDS:
        for name, item in wanted[section].items():
            commit = records[section].get(name, {}).get("commit")
            if is_commit(commit):
                lock[section][name] = {**item, "commit": commit}
    for key, item in wanted[FILES].items():
        lock[FILES][key] = {**item, "sha256": file_sha256(resolve_path(item["path"]))}
    return lock


def write_lock(path: Path, lock: Mapping[str, Any]) -> None:
    header = ("# The commit every hub model and data set of this study resolved to, and the sha256 of every local\n"
              "# file it reads, written by the staging gate (workflow/rules/download.smk). Commit this file with\n"
              f"# the config; to update it on purpose: {UPDATE_HINT}.\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(header + yaml.safe_dump(dict(lock), sort_keys=False))
    temporary.replace(path)


def staged_model_commits(folder: str | Path, encoders: list[str]) -> dict[str, str]:
    """encoder -> the commit recorded in ``<folder>/<encoder>/STAGED.json``, for those already staged."""
    import json

    commits = {}
    for name in encoders:
        marker = Path(folder) / name / "STAGED.json"
        if marker.is_file():
            commits[name] = str(json.loads(marker.read_text()).get("commit"))
    return commits


def job_lock(config: Mapping[str, Any], section: str, name: str) -> tuple[str | None, Path]:
    """In a staging job: (the locked commit of ``section``/``name`` or None, the lock file); None also
    under ``update_lock``, when the job stages whatever the revision resolves to."""
    path = lock_path(config)
    if config.get("update_lock"):
        return None, path
    return locked_commit(read_lock(path), section, name), path
