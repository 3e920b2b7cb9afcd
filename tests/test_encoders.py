"""Embedding with a tiny random BERT: shapes, pooling, pair encoding, batching invariance, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from affine_homotopy.errors import ConfigError, NumericalError
from affine_homotopy.encoders import check_finite, embed_texts, load_encoder

TEXTS_A = ["the film was good", "a very very dull and boring plot that would not end", "no", "she said it was great"]
TEXTS_B = ["the movie was great", "the plot was dull", "yes", "he said it was bad"]


@pytest.fixture(scope="module")
def encoder(tiny_models):
    return load_encoder("tiny_a", {"source": "path", "path": str(tiny_models["tiny_a"])})


def manual(encoder, a, b=None, layer=2):
    batch = encoder.tokenizer(a, b, return_tensors="pt")
    with torch.inference_mode():
        states = encoder.model(**batch, output_hidden_states=True).hidden_states[layer][0]
    return states.mean(0).numpy(), states[0].numpy()


def test_shape_dtype_and_revision(encoder) -> None:
    out = embed_texts(encoder, TEXTS_A, None, [0, 2], batch_size=2)
    assert out.shape == (2, 4, 32) and out.dtype == np.float32
    assert encoder.depth == 2 and encoder.revision.startswith("sha256:")


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_batched_sorted_padded_equals_one_at_a_time(encoder, pooling) -> None:
    batched = embed_texts(encoder, TEXTS_A, TEXTS_B, [1, 2], pooling=pooling, batch_size=3)
    for k in range(len(TEXTS_A)):
        mean, cls = manual(encoder, TEXTS_A[k], TEXTS_B[k], layer=2)
        np.testing.assert_allclose(batched[1, k], mean if pooling == "mean" else cls, atol=1e-5)


def test_pairs_are_encoded_as_pairs(encoder) -> None:
    pair = embed_texts(encoder, TEXTS_A[:1], TEXTS_B[:1], [2])[0, 0]
    joined = embed_texts(encoder, [TEXTS_A[0] + " " + TEXTS_B[0]], None, [2])[0, 0]
    np.testing.assert_allclose(pair, manual(encoder, TEXTS_A[0], TEXTS_B[0])[0], atol=1e-5)
    assert not np.allclose(pair, joined, atol=1e-4)  # segment ids and [SEP] make a difference


def test_layer_beyond_depth_names_encoder_and_depth(encoder) -> None:
    with pytest.raises(ConfigError, match=r"encoder 'tiny_a' has depth 2"):
        embed_texts(encoder, TEXTS_A, None, [3], name="tiny_a")


def test_non_finite_values_name_encoder_task_and_layer() -> None:
    array = np.zeros((2, 3, 4), dtype=np.float32)
    array[1, 2, 0] = np.nan
    with pytest.raises(NumericalError, match=r"encoder 'e', task 't', split train, layer 6: 1 non-finite"):
        check_finite(array, [3, 6], "e", "t", "train")
