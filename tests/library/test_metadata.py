"""The package's metadata (issue #27): license, authors, classifiers, urls and keywords in pyproject.toml,
taken from CITATION.cff and LICENSE; one version (pyproject.toml's, read through importlib.metadata by
``affine_homotopy.__version__`` and ``affine-homotopy --version``, and repeated in CITATION.cff);
requires-python as low as the code needs, checked by parsing every module at that grammar and looking
for newer standard-library names; the extras ([onnx], and [workflow] with sentencepiece and
protobuf, tested on a SentencePiece tokenizer trained here and loaded through transformers).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import affine_homotopy
from tests.helpers import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CITATION = yaml.safe_load((REPO / "CITATION.cff").read_text())
# standard-library names newer than the lowest Python the project claims, by the version that added them
NEWER_STDLIB = {
    (3, 11): {"tomllib", "wsgiref.types", "typing.Self", "typing.LiteralString", "typing.Never",
              "typing.assert_never", "typing.reveal_type", "typing.Required", "typing.NotRequired",
              "typing.TypeVarTuple", "typing.Unpack", "typing.dataclass_transform", "enum.StrEnum",
              "enum.verify", "datetime.UTC", "contextlib.chdir", "hashlib.file_digest", "operator.call",
              "asyncio.TaskGroup", "asyncio.timeout", "logging.getLevelNamesMapping", "math.cbrt", "math.exp2",
              "ExceptionGroup", "BaseExceptionGroup", "add_note"},
    (3, 12): {"itertools.batched", "typing.override", "calendar.Month", "pathlib.Path.walk"},
}


def lowest_python() -> tuple[int, int]:
    spec = SpecifierSet(PROJECT["requires-python"])
    lows = [tuple(int(p) for p in s.version.split(".")[:2]) for s in spec if s.operator == ">="]
    assert len(lows) == 1, spec
    return lows[0]


def test_license_authors_classifiers_urls_and_keywords() -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert PROJECT["license"] == CITATION["license"] == "MIT" and license_text.startswith("MIT License")
    assert PROJECT["license-files"] == ["LICENSE"]
    authors = [a["name"] for a in PROJECT["authors"]]
    assert authors == [a["name"] for a in CITATION["authors"]]
    assert all(name in license_text for name in authors)  # "Copyright (c) ... The affine-homotopy authors"
    assert set(CITATION["keywords"]) <= set(PROJECT["keywords"])
    assert CITATION["preferred-citation"]["url"] in PROJECT["urls"].values()
    classifiers = PROJECT["classifiers"]
    assert "Typing :: Typed" in classifiers and (REPO / "src" / "affine_homotopy" / "py.typed").is_file()
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression says it (PEP 639)
    low = lowest_python()
    assert f"Programming Language :: Python :: {low[0]}.{low[1]}" in classifiers
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    assert any(Requirement(r).name == "setuptools" and Requirement(r).specifier.contains("77") for r in build)


def test_one_version_everywhere() -> None:
    version = PROJECT["version"]
    assert metadata.version("affine-homotopy") == version, "reinstall: pip install -e . (stale metadata)"
    assert affine_homotopy.__version__ == version
    assert str(CITATION["version"]) == version
    printed = subprocess.run([sys.executable, "-m", "affine_homotopy", "--version"], capture_output=True, text=True,
                             timeout=120, env={"OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"})
    assert printed.returncode == 0 and printed.stdout.strip() == f"affine-homotopy {version}"
    literal = re.compile(r"__version__\s*=\s*[\"']\d+\.\d+")
    spelled = [path for path in (REPO / "src").rglob("*.py") if literal.search(path.read_text())]
    assert not spelled, f"the version is written out in {spelled}: read it from importlib.metadata"


def test_every_module_parses_at_the_lowest_python_and_uses_no_newer_names() -> None:
    low = lowest_python()
    newer = set().union(*(names for version, names in NEWER_STDLIB.items() if version > low))
    problems = []
    for path in sorted((REPO / "src").rglob("*.py")):
        source = path.read_text()
        try:
            tree = ast.parse(source, filename=str(path), feature_version=low)
        except SyntaxError as error:
            problems.append(f"{path.name}:{error.lineno}: {error.msg}")
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = [f"{node.value.id}.{node.attr}", node.attr]
            elif isinstance(node, ast.Name):
                names = [node.id]
            problems += [f"{path.name}:{node.lineno}: {name}" for name in names if name in newer]
    assert not problems, f"newer than Python {low[0]}.{low[1]}: {problems}"
    assert low <= sys.version_info[:2]


def test_the_extras() -> None:
    extras = {name: [Requirement(r) for r in reqs] for name, reqs in PROJECT["optional-dependencies"].items()}
    assert {r.name for r in extras["onnx"]} == {"onnx", "onnxruntime"}
    workflow = {r.name: r for r in extras["workflow"]}
    assert workflow["affine-homotopy"].extras == {"onnx"}  # the PyPI/ONNX staging route comes with the workflow
    assert {"sentencepiece", "protobuf"} <= set(workflow)
    assert {"hypothesis", "joblib"} <= {r.name for r in extras["test"]}


# the special pieces each family's tokenizer expects in its SentencePiece model
SPECIALS = {
    "t5": dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1),
    "albert": dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3, bos_piece="[CLS]", eos_piece="[SEP]",
                   user_defined_symbols=["[MASK]"]),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", sorted(SPECIALS))
def test_a_sentencepiece_tokenizer_loads_through_transformers(tmp_path, family: str) -> None:
    """T5, ALBERT and DeBERTa-v3 ship SentencePiece models (spiece.model): a tiny one trained here loads
    through transformers (sentencepiece reads it, protobuf converts it), tokenizes and decodes back."""
    import sentencepiece
    from transformers import AlbertTokenizer, T5Tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["the film was good", "the plot was dull and boring", "a brilliant charming movie",
                                 "food and service were awful", "we said that it was great"] * 20))
    folder = tmp_path / family
    folder.mkdir()
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(folder / "spiece"), vocab_size=40, model_type="unigram",
        character_coverage=1.0, minloglevel=2, **SPECIALS[family])
    model = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spiece.model"))
    pieces = {model.id_to_piece(i) for i in range(model.get_piece_size())}
    tokenizer = {"t5": T5Tokenizer, "albert": AlbertTokenizer}[family].from_pretrained(folder)
    text = "the film was brilliant"
    tokens = tokenizer.tokenize(text)
    assert tokens and set(tokens) <= pieces and "<unk>" not in tokens, tokens
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
