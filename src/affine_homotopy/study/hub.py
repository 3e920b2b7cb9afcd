"""The Hugging Face hub and its local cache: one way to resolve a repository snapshot.

A snapshot (the files of a model or data set repository at one commit) comes from one of two routes:

* ``hub``: online. The hub resolves the requested revision to a commit, and the chosen files are
  downloaded through the local cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``), so the same call
  fills a cache that machines without internet can share.
* ``cache``: the hub is switched off (``HF_HUB_OFFLINE=1``; for data sets also
  ``HF_DATASETS_OFFLINE=1``) or unreachable (no connection, time-out, server error). The revision
  is resolved in the local cache only, by huggingface_hub's own cache lookup.

Environment variables are read at call time: huggingface_hub reads them once at import, but jobs
and tests set them later. Missing pieces raise a named error that says which route was tried and
how to fill the cache.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AffineHomotopyError, StagingError

log = logging.getLogger(__name__)

HUB = "hub"
CACHE = "cache"
_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's and datasets' truthy values


class MissingFiles(Exception):
    """Raised by a file chooser: the snapshot lacks what is needed (one description per item)."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(", ".join(missing))
        self.missing = list(missing)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE


def offline_switch(datasets: bool = False) -> str | None:
    """The variable that switches the hub off (``"HF_HUB_OFFLINE=1"``), or None when online."""
    names = ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"] + (["HF_DATASETS_OFFLINE"] if datasets else [])
    for name in names:
        if _flag(name):
            return f"{name}={os.environ[name]}"
    return None


def hub_cache_dir() -> Path:
    """The hub cache with huggingface_hub's precedence: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
    HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub."""

    def expand(value: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(value)))

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return expand(os.environ[name])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return expand(home) / "hub"


@dataclass(frozen=True)
class Snapshot:
    """Where a repository's files lie, at which commit, and how they were found."""

    repo_id: str
    repo_type: str
    requested_revision: str | None
    commit: str
    folder: Path
    files: tuple[str, ...]  # the chosen files, relative to ``folder``
    staged_from: str  # HUB or CACHE
    route_reason: str | None  # why the cache was used (None on the hub route)
    cache_dir: Path

    def record(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id, "repo_type": self.repo_type, "requested_revision": self.requested_revision,
            "commit": self.commit, "staged_from": self.staged_from, "route_reason": self.route_reason,
            "cache_dir": str(self.cache_dir),
        }


def resolve_snapshot(
    repo_id: str,
    *,
    choose: Callable[[Sequence[str]], list[str]],
    what: str,
    fill_hint: str,
    repo_type: str = "model",
    revision: str | None = None,
    offline: str | None = None,
    missing_error: type[AffineHomotopyError] = StagingError,
) -> Snapshot:
    """Resolve ``repo_id`` at ``revision`` on the hub, or in the local cache when ``offline`` (the
    switch that is set, see :func:`offline_switch`) or when the hub is unreachable.

    ``choose`` picks the needed files from the repository's file list (hub: before downloading;
    cache: from the snapshot folder) and raises :class:`MissingFiles` when something is lacking;
    that becomes ``missing_error``. ``what`` names the thing being staged in messages (``encoder
    'x'``); ``fill_hint`` says how to fill the cache or stage by hand.
    """
    cache = hub_cache_dir()
    if offline is None:
        try:
            return _from_hub(repo_id, repo_type, revision, cache, choose, what, fill_hint, missing_error)
        except _Unreachable as error:
            offline = f"the hub was unreachable ({error})"
            log.warning("%s: %s; trying the local cache %s", what, offline, cache)
    return _from_cache(repo_id, repo_type, revision, cache, choose, what, fill_hint, missing_error, offline)


class _Unreachable(Exception):
    pass


def _unreachable(error: BaseException) -> bool:
    """No connection, a time-out, offline mode, or a server error: the cache may still serve."""
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, (OfflineModeIsEnabled, httpx2.NetworkError, httpx2.TimeoutException)):
        return True
    response = getattr(error, "response", None)
    return isinstance(error, HfHubHTTPError) and response is not None and response.status_code >= 500


def _revision_text(revision: str | None) -> str:
    return f"revision {revision or 'main'}"


def _from_hub(
    repo_id: str, repo_type: str, revision: str | None, cache: Path, choose: Callable[[Sequence[str]], list[str]],
    what: str, fill_hint: str, missing_error: type[AffineHomotopyError],
) -> Snapshot:
    from huggingface_hub import HfApi, snapshot_download

    tried = "Tried: the Hugging Face hub (route 'hub')."
    try:
        info = HfApi().repo_info(repo_id, repo_type=repo_type, revision=revision, files_metadata=True)
    except Exception as error:  # hub errors come in many types: name them all the same way
        if _unreachable(error):
            raise _Unreachable(f"{type(error).__name__}: {error}") from error
        raise StagingError(
            f"{what}: could not stage {repo_id!r} ({_revision_text(revision)}) from the Hugging Face hub: "
            f"{type(error).__name__}: {error}. {tried} If a pre-filled cache holds it, set HF_HUB_OFFLINE=1 "
            f"to stage from the cache. {fill_hint}"
        ) from error
    sizes = {entry.rfilename: entry.size or 0 for entry in info.siblings or []}
    try:
        files = choose(sorted(sizes))
    except MissingFiles as missing:
        raise missing_error(
            f"{what}: {repo_id!r} at commit {info.sha} on the Hugging Face hub lacks {missing}. {tried} "
            f"{fill_hint}"
        ) from None
    log.info(
        "%s: downloading %d files (%.1f MB) of %s at commit %s through the cache %s",
        what, len(files), sum(sizes[f] for f in files) / 1e6, repo_id, info.sha, cache,
    )
    started = time.monotonic()
    try:
        folder = snapshot_download(repo_id, repo_type=repo_type, revision=info.sha, cache_dir=cache,
                                   allow_patterns=files)
    except Exception as error:
        raise StagingError(
            f"{what}: downloading {repo_id!r} at commit {info.sha} into the cache {cache} failed: "
            f"{type(error).__name__}: {error}. {tried} If that folder is not writable, point HF_HUB_CACHE "
            f"(or HF_HOME) at one that is. {fill_hint}"
        ) from error
    log.info("%s: downloaded in %.1f s", what, time.monotonic() - started)
    return Snapshot(repo_id, repo_type, revision, str(info.sha), Path(folder), tuple(files), HUB, None, cache)


def _from_cache(
    repo_id: str, repo_type: str, revision: str | None, cache: Path, choose: Callable[[Sequence[str]], list[str]],
    what: str, fill_hint: str, missing_error: type[AffineHomotopyError], reason: str,
) -> Snapshot:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError

    tried = f"Tried: the local Hugging Face cache {cache} (route 'cache', because {reason})."
    try:
        folder = Path(snapshot_download(repo_id, repo_type=repo_type, revision=revision, cache_dir=cache,
                                        local_files_only=True))
    except IncompleteSnapshotError as error:
        # The cached listing names files this snapshot lacks (e.g. weights in other formats that
        # were never fetched); ``choose`` decides whether the ones needed here are present.
        folder = Path(error.snapshot_path)
    except (LocalEntryNotFoundError, ValueError, OSError) as error:  # not cached, a bad id, an unreadable cache
        raise StagingError(
            f"{what}: could not stage {repo_id!r} ({_revision_text(revision)}) from the local cache: "
            f"{_cache_contents(cache, repo_id, repo_type, revision)}. {tried} {fill_hint}"
        ) from error
    listing = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    try:
        files = choose(listing)
    except MissingFiles as missing:
        raise missing_error(
            f"{what}: the cached snapshot of {repo_id!r} at commit {folder.name} ({folder}) lacks {missing}. "
            f"{tried} {fill_hint}"
        ) from None
    log.info("%s: %s at commit %s from the local cache %s (%s)", what, repo_id, folder.name, cache, reason)
    return Snapshot(repo_id, repo_type, revision, folder.name, folder, tuple(files), CACHE, reason, cache)


def _cache_contents(cache: Path, repo_id: str, repo_type: str, revision: str | None) -> str:
    """What the cache holds of a repository, for an error message: the commits and their refs."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.file_download import repo_folder_name

    folder = cache / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    if not folder.is_dir():
        return f"the cache holds no copy of {repo_id!r} (no folder {folder})"
    try:
        repos = [r for r in scan_cache_dir(cache).repos if r.repo_id == repo_id and r.repo_type == repo_type]
    except Exception:  # an unreadable cache: the folder is named above, which is what the user needs
        repos = []
    held = [
        revision_info.commit_hash + (f" ({', '.join(sorted(revision_info.refs))})" if revision_info.refs else "")
        for repo in repos for revision_info in sorted(repo.revisions, key=lambda r: r.commit_hash)
    ]
    refs = folder / "refs"
    pointers = {
        p.relative_to(refs).as_posix(): p.read_text().strip() for p in sorted(refs.rglob("*")) if p.is_file()
    } if refs.is_dir() else {}
    wanted = revision or "main"
    commits = {r.commit_hash for repo in repos for r in repo.revisions}
    pointer = (
        f"; refs/{wanted} points to commit {pointers[wanted]}, which has no snapshot"
        if wanted in pointers and pointers[wanted] not in commits else ""
    )
    holding = f"snapshots of commit(s) {', '.join(held)}" if held else "no complete snapshot"
    return f"the cache folder {folder} exists but holds no snapshot for {_revision_text(revision)}{pointer}; it holds {holding}"
