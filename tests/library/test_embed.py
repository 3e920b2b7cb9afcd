"""``ah.embed`` (issue 26): representations of your texts by the workflow's own embedding code, from a
model folder, a hub id or a loaded model; a clear ImportError without transformers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import affine_homotopy as ah
from affine_homotopy.models.encoders import embed_texts, load_encoder
from affine_homotopy.study.precomputed import layer_map, open_embeddings

TEXTS = ["the film was good", "a very dull plot", "she said it was brilliant", "the service was bad"]
PAIRS = ["it was good", "not dull", "brilliant", "awful service"]


def test_embed_is_the_embed_jobs_computation(tiny_models) -> None:
    folder = tiny_models["tiny_a"]
    reps = ah.embed(str(folder), TEXTS, layers=[0, 2, "last", 0.5], batch_size=3, device="cpu")
    assert list(reps) == ["layer0", "layer2", "last", "depth0.50"]
    encoder = load_encoder("tiny_a", {"source": "path", "path": str(folder)})
    expected = embed_texts(encoder, TEXTS, None, [0, 2, 2, 1], "mean", 128, 64, "cpu")
    for slot, array in enumerate(reps.values()):
        assert array.dtype == np.float32 and array.shape == (4, 32)
        np.testing.assert_array_equal(array, expected[slot])
    single = ah.embed(folder, TEXTS, layers="last", pooling="cls", device="cpu")
    np.testing.assert_array_equal(single, embed_texts(encoder, TEXTS, None, [2], "cls")[0])
    pairs = ah.embed(folder, TEXTS, layers=1, text_pairs=PAIRS, device="cpu")
    np.testing.assert_array_equal(pairs, embed_texts(encoder, TEXTS, PAIRS, [1])[0])


def test_a_loaded_model_gives_the_same_representations(tiny_models) -> None:
    from transformers import AutoModel, AutoTokenizer

    folder = tiny_models["tiny_b"]
    model = AutoModel.from_pretrained(folder)
    by_folder = ah.embed(folder, TEXTS, layers=[1, 2], device="cpu")
    loaded = ah.embed(model, TEXTS, layers=[1, 2], tokenizer=AutoTokenizer.from_pretrained(folder))
    found = ah.embed(model, TEXTS, layers=[1, 2])  # the tokenizer saved beside the model
    for label in ("layer1", "layer2"):
        np.testing.assert_array_equal(by_folder[label], loaded[label])
        np.testing.assert_array_equal(by_folder[label], found[label])


def test_saved_with_ids_it_is_an_embeddings_file(tiny_models, tmp_path: Path) -> None:
    reps = ah.embed(tiny_models["tiny_a"], TEXTS, layers=[1, 2], device="cpu")
    np.savez(tmp_path / "mine.npz", ids=np.array([f"t{k}" for k in range(4)]), **reps)
    file = open_embeddings(str(tmp_path / "mine.npz"), "encoders.mine.files.t", "encoder 'mine'")
    assert file.ids == ["t0", "t1", "t2", "t3"]
    assert layer_map("mine", {}, file, ["layer1", "layer2"], "t") == {"layer1": "layer1", "layer2": "layer2"}


def test_without_transformers_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails, as in a core install
    with pytest.raises(ImportError, match=r"needs transformers.*\[workflow\] extra: pip install 'affine-homotopy\[workflow\]'"):
        ah.embed("any/model", TEXTS)


@pytest.mark.parametrize("kwargs,expected", [
    ({"texts": "one text"}, r"texts must be a list of strings .*pass \[text\]"),
    ({"texts": ["a", 3]}, r"texts\[1\] is a int, not a string"),
    ({"pooling": "max"}, r"pooling='max'; choose one of mean, cls, last"),
    ({"layers": [1, "layer1"]}, r"names a layer more than once"),
    ({"layers": [1.5]}, r"layers=\[1\.5\]: relative depth 1\.5 is outside \(0, 1\]"),
    ({"text_pairs": ["x"]}, r"text_pairs has 1 texts but texts has 4"),
    ({"model": 42}, r"model must be a hub id, a local model folder or a loaded transformers model, got int"),
])
def test_bad_arguments_are_named(tiny_models, kwargs: dict, expected: str) -> None:
    arguments = {"model": tiny_models["tiny_a"], "texts": TEXTS, **kwargs}
    with pytest.raises(ValueError, match=expected):
        ah.embed(arguments.pop("model"), arguments.pop("texts"), device="cpu", **arguments)
