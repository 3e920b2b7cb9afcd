"""The online hub route (hub._from_hub, through hub.resolve_snapshot), with huggingface_hub's HfApi and
snapshot_download replaced by fakes: the success path downloads exactly the chosen files at the commit
the hub resolved; 401 and 404 are named errors that do not fall back to the cache; 5xx, a lost
connection and a time-out fall back to the cache; a failed download is a named error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import huggingface_hub
import pytest
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError
from huggingface_hub.hf_api import RepoSibling

from affine_homotopy.study import hub
from affine_homotopy.errors import DataError, StagingError

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {"config.json": 500, "model.safetensors": 4_000_000, "pytorch_model.bin": 4_000_000, "vocab.txt": 900}
HINT = "Fill it with: huggingface-cli download org/model"


def choose(files):
    wanted = ["config.json", "model.safetensors", "vocab.txt"]
    missing = [f for f in wanted if f not in files]
    if missing:
        raise hub.MissingFiles(missing)
    return wanted


def http_error(status: int, cls: type[HfHubHTTPError] = HfHubHTTPError) -> HfHubHTTPError:
    response = httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/api/models/org/model"))
    return cls(f"{status} error from the hub", response=response)


class Hub:
    """Records the calls; ``info_error``/``download_error`` make the hub or the download fail."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, info_error: BaseException | None = None,
                 download_error: BaseException | None = None, files: dict[str, int] = FILES,
                 cached: bool = True) -> None:
        self.info_calls: list[dict[str, Any]] = []
        self.downloads: list[dict[str, Any]] = []
        self.cache = tmp_path / "hf_cache"
        self.snapshot = self.cache / "models--org--model" / "snapshots" / COMMIT
        if cached:
            self.snapshot.mkdir(parents=True)
            for name in files:
                (self.snapshot / name).write_text("x")
        monkeypatch.setenv("HF_HUB_CACHE", str(self.cache))
        outer = self

        class FakeApi:
            def repo_info(self, repo_id, repo_type=None, revision=None, files_metadata=False):
                outer.info_calls.append(dict(repo_id=repo_id, repo_type=repo_type, revision=revision,
                                             files_metadata=files_metadata))
                if info_error is not None:
                    raise info_error
                return SimpleNamespace(sha=COMMIT, siblings=[RepoSibling(rfilename=f, size=s) for f, s in files.items()])

        def fake_download(repo_id, repo_type=None, revision=None, cache_dir=None, allow_patterns=None,
                          local_files_only=False, **other):
            outer.downloads.append(dict(repo_id=repo_id, repo_type=repo_type, revision=revision, cache_dir=cache_dir,
                                        allow_patterns=allow_patterns, local_files_only=local_files_only, **other))
            if local_files_only:  # the cache route
                if not cached:
                    raise LocalEntryNotFoundError("not in the cache")
                return str(outer.snapshot)
            if download_error is not None:
                raise download_error
            return str(outer.snapshot)

        monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)

    def resolve(self, **options: Any) -> hub.Snapshot:
        return hub.resolve_snapshot("org/model", choose=choose, what="encoder 'm'", fill_hint=HINT, **options)


def test_success_downloads_the_chosen_files_at_the_resolved_commit(monkeypatch, tmp_path: Path) -> None:
    fake = Hub(monkeypatch, tmp_path)
    snapshot = fake.resolve(revision="v1.0")
    assert fake.info_calls == [dict(repo_id="org/model", repo_type="model", revision="v1.0", files_metadata=True)]
    assert len(fake.downloads) == 1
    download = fake.downloads[0]
    assert download["revision"] == COMMIT  # the commit the hub resolved, not the moving tag
    assert download["allow_patterns"] == ["config.json", "model.safetensors", "vocab.txt"]  # not pytorch_model.bin
    assert Path(download["cache_dir"]) == fake.cache and not download["local_files_only"]
    assert snapshot.staged_from == hub.HUB and snapshot.route_reason is None
    assert snapshot.commit == COMMIT and snapshot.requested_revision == "v1.0" and snapshot.folder == fake.snapshot
    assert snapshot.files == ("config.json", "model.safetensors", "vocab.txt") and snapshot.cache_dir == fake.cache
    assert snapshot.record()["staged_from"] == "hub"


def test_files_missing_on_the_hub_are_named_before_any_download(monkeypatch, tmp_path: Path) -> None:
    fake = Hub(monkeypatch, tmp_path, files={"config.json": 10, "pytorch_model.bin": 10})
    with pytest.raises(DataError) as error:
        fake.resolve(missing_error=DataError)
    message = str(error.value)
    assert f"'org/model' at commit {COMMIT} on the Hugging Face hub lacks model.safetensors, vocab.txt" in message
    assert HINT in message and fake.downloads == []


@pytest.mark.parametrize("status,cls", [(401, RepositoryNotFoundError), (404, RepositoryNotFoundError),
                                        (403, HfHubHTTPError), (404, HfHubHTTPError)],
                         ids=["401-repo", "404-repo", "403", "404"])
def test_client_errors_are_named_and_do_not_fall_back(monkeypatch, tmp_path: Path, status: int, cls) -> None:
    # the cache holds the model: it must not be used for a client error
    fake = Hub(monkeypatch, tmp_path, info_error=http_error(status, cls))
    with pytest.raises(StagingError) as error:
        fake.resolve(revision="main")
    message = str(error.value)
    assert message.startswith("encoder 'm': could not stage 'org/model' (revision main) from the Hugging Face hub: ")
    assert f"{cls.__name__}: {status} error from the hub" in message
    assert "route 'hub'" in message and "HF_HUB_OFFLINE=1" in message and HINT in message
    assert fake.downloads == []  # neither a download nor a cache lookup


@pytest.mark.parametrize("error", [http_error(500), http_error(502), http_error(503),
                                   httpx2.ConnectError("connection refused"), httpx2.ReadTimeout("timed out")],
                         ids=["500", "502", "503", "no-connection", "time-out"])
def test_server_errors_fall_back_to_the_cache(monkeypatch, tmp_path: Path, caplog, error) -> None:
    fake = Hub(monkeypatch, tmp_path, info_error=error)
    with caplog.at_level("WARNING", logger="affine_homotopy.study.hub"):
        snapshot = fake.resolve()
    assert [d["local_files_only"] for d in fake.downloads] == [True]  # only the cache lookup
    assert snapshot.staged_from == hub.CACHE and snapshot.commit == COMMIT
    assert snapshot.route_reason.startswith(f"the hub was unreachable ({type(error).__name__}: ")
    assert "trying the local cache" in caplog.text


def test_a_fallback_that_finds_nothing_says_both_routes(monkeypatch, tmp_path: Path) -> None:
    fake = Hub(monkeypatch, tmp_path, info_error=http_error(503), cached=False)
    with pytest.raises(StagingError) as error:
        fake.resolve()
    message = str(error.value)
    assert "from the local cache" in message and "because the hub was unreachable (HfHubHTTPError: 503" in message
    assert HINT in message


def test_a_failed_download_is_named(monkeypatch, tmp_path: Path) -> None:
    fake = Hub(monkeypatch, tmp_path, download_error=OSError("[Errno 28] No space left on device"))
    with pytest.raises(StagingError) as error:
        fake.resolve()
    message = str(error.value)
    assert f"downloading 'org/model' at commit {COMMIT} into the cache {fake.cache} failed: OSError: " in message
    assert "No space left on device" in message and "HF_HUB_CACHE" in message and HINT in message
    assert len(fake.downloads) == 1  # no retry from the cache: the hub answered, the disk did not


def test_the_offline_switch_skips_the_hub(monkeypatch, tmp_path: Path) -> None:
    fake = Hub(monkeypatch, tmp_path)
    snapshot = fake.resolve(offline="HF_HUB_OFFLINE=1")
    assert fake.info_calls == [] and snapshot.staged_from == hub.CACHE and snapshot.route_reason == "HF_HUB_OFFLINE=1"
