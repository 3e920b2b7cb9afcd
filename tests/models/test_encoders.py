"""Embedding with a tiny random BERT: shapes, pooling, pair encoding, batching invariance, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from affine_homotopy.errors import ConfigError, NumericalError
from affine_homotopy.models.encoders import check_finite, embed_texts, load_encoder

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


# ---------------------------------------------------------------------------------------------
# decoder-only models, last-token pooling, padding on either side

DECODER_TEXTS = ["the film was good", "a very very dull and boring plot that would not end", "no",
                 "she said it was great", "the service was awful but the food was brilliant"]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request, tmp_path_factory):
    from tests.helpers import write_tiny_decoder

    folder = write_tiny_decoder(tmp_path_factory.mktemp(request.param), request.param, layers=3)
    return request.param, folder


def unpadded(encoder, text, layer, pooling):
    """The representation from one example alone (no padding), pooled by hand."""
    batch = encoder.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        states = encoder.model(**batch, output_hidden_states=True).hidden_states[layer][0]
    return {"last": states[-1], "mean": states.mean(0), "cls": states[0]}[pooling].numpy()


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_decoder_batched_equals_one_at_a_time(decoder, side, pooling) -> None:
    kind, folder = decoder
    encoder = load_encoder(kind, {"source": "path", "path": str(folder), "pad_token": "eos"})
    encoder.tokenizer.padding_side = side
    assert encoder.depth == 3
    # batch size 3 over 5 texts of different lengths: every batch is padded
    batched = embed_texts(encoder, DECODER_TEXTS, None, [1, 3], pooling=pooling, batch_size=3)
    for k, text in enumerate(DECODER_TEXTS):
        for slot, layer in enumerate([1, 3]):
            np.testing.assert_allclose(batched[slot, k], unpadded(encoder, text, layer, pooling), atol=2e-5)


def test_left_padded_bert_and_roberta_keep_their_positions(tiny_models, tmp_path) -> None:
    """Encoders too: BERT takes the mask-derived positions, RoBERTa (positions from its padding_idx)
    is left to number its own."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    from tests.helpers import WORDS

    vocab = {t: k for k, t in enumerate(dict.fromkeys(["<s>", "<pad>", "</s>", "<unk>"] + WORDS))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>", model_input_names=["input_ids", "attention_mask"]).save_pretrained(tmp_path)
    torch.manual_seed(0)
    RobertaModel(RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=130, pad_token_id=1)).save_pretrained(tmp_path)
    for name, folder in (("bert", tiny_models["tiny_a"]), ("roberta", tmp_path)):
        encoder = load_encoder(name, {"source": "path", "path": str(folder)})
        encoder.tokenizer.padding_side = "left"
        batched = embed_texts(encoder, DECODER_TEXTS, None, [2], pooling="mean", batch_size=5)
        for k, text in enumerate(DECODER_TEXTS):
            np.testing.assert_allclose(batched[0, k], unpadded(encoder, text, 2, "mean"), atol=2e-5, err_msg=name)


@pytest.mark.parametrize("side", ["left", "right"])
def test_pooling_locates_the_real_tokens_from_the_mask(side) -> None:
    from affine_homotopy.models.encoders import pool

    lengths = [4, 1, 3]
    width = max(lengths)
    state = torch.full((3, width, 2), float("nan"))  # padding is NaN: it must not leak into any pooling
    mask = torch.zeros(3, width, dtype=torch.long)
    real = {}
    for row, n in enumerate(lengths):
        values = torch.arange(2 * n, dtype=torch.float32).reshape(n, 2) + 10 * row
        span = slice(width - n, width) if side == "left" else slice(0, n)
        state[row, span], mask[row, span] = values, 1
        real[row] = values
    for pooling, expected in (("mean", lambda v: v.mean(0)), ("cls", lambda v: v[0]), ("last", lambda v: v[-1])):
        pooled = pool(state, mask, pooling)
        for row in range(3):
            torch.testing.assert_close(pooled[row], expected(real[row]), msg=f"{pooling}, row {row}")


def test_missing_padding_token_names_the_key_and_the_fix(decoder) -> None:
    kind, folder = decoder
    with pytest.raises(ConfigError, match=rf"encoder '{kind}': its tokenizer has no padding token.*"
                                          rf"'encoders\.{kind}\.pad_token'.*pad_token: eos"):
        load_encoder(kind, {"source": "path", "path": str(folder), "pooling": "last"})


def test_trust_remote_code_is_off_unless_the_encoder_turns_it_on(tiny_models, tmp_path, caplog) -> None:
    import json
    import shutil

    folder = tmp_path / "custom"
    shutil.copytree(tiny_models["tiny_a"], folder)
    (folder / "custom_tiny.py").write_text(
        "from transformers import BertConfig, BertModel\n\n\n"
        "class TinyCustomConfig(BertConfig):\n    model_type = 'tiny_custom'\n\n\n"
        "class TinyCustomModel(BertModel):\n    config_class = TinyCustomConfig\n"
    )
    settings = json.loads((folder / "config.json").read_text())
    settings.update(model_type="tiny_custom", architectures=["TinyCustomModel"],
                    auto_map={"AutoConfig": "custom_tiny.TinyCustomConfig", "AutoModel": "custom_tiny.TinyCustomModel"})
    (folder / "config.json").write_text(json.dumps(settings))
    spec = {"source": "path", "path": str(folder)}
    with pytest.raises(ConfigError, match=r"'encoders\.custom\.trust_remote_code' is off"):
        load_encoder("custom", spec)
    with caplog.at_level("WARNING", logger="affine_homotopy.models.encoders"):
        encoder = load_encoder("custom", {**spec, "trust_remote_code": True})
    assert type(encoder.model).__name__ == "TinyCustomModel"  # the folder's own code ran
    assert "encoder 'custom': trust_remote_code is on" in caplog.text
