"""ONNX export of a BERT encoder -> PyTorch ``BertModel`` (all hidden states, not only the last).

An ONNX export of a sentence encoder usually exposes only its final outputs (the last hidden state
and the pooled sentence embedding). The study needs every layer, so the export's weights are put
back into a ``transformers.BertModel``, whose forward pass returns all hidden states.

How the weights are found (exports of ``torch.onnx`` in TorchScript mode, as sentence-transformers
and Optimum produce them):

* Embedding tables, LayerNorm parameters and biases keep their PyTorch names (with a prefix such as
  ``model.0.auto_model.``), possibly behind ``Identity`` nodes when the exporter de-duplicated
  equal tensors.
* The weight of each linear layer is folded into an anonymous initializer (``onnx::MatMul_470``)
  stored **transposed** (``[in, out]``: ONNX computes ``x @ W``; ``torch.nn.Linear`` stores
  ``[out, in]``). Its name is recovered from the ``Add`` that adds the named bias to the product.
* The number of attention heads is not a property of any weight. It is taken from the config, or
  else chosen as the one head count whose converted model reproduces the ONNX graph's own output.

Every conversion is checked against the ONNX graph itself, run by onnxruntime, on padded random
token sequences; a mismatch is a :class:`StagingError`, so a converted model that differs from its
export is never used.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StagingError

log = logging.getLogger(__name__)

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
# Relative tolerance of the check against the ONNX graph: float32 round-off of a few layers.
CHECK_TOLERANCE = 1e-4


def _import_onnx(what: str) -> Any:
    try:
        import onnx
    except ImportError as error:
        raise StagingError(
            f"{what} needs the 'onnx' package to read the export, and it is not installed. "
            "Fix: pip install -e . (it is a dependency of this project) or pip install onnx."
        ) from error
    return onnx


def _aliases(graph: Any, initializers: Mapping[str, Any]) -> dict[str, str]:
    """Map every tensor name that is an initializer, or an Identity of one, to that initializer."""
    alias = {name: name for name in initializers}
    changed = True
    while changed:
        changed = False
        for node in graph.node:
            if node.op_type == "Identity" and node.input[0] in alias and node.output[0] not in alias:
                alias[node.output[0]] = alias[node.input[0]]
                changed = True
    return alias


def bert_weights(model: Any, source: str = "ONNX model") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """BertModel state dict (NumPy) and the architecture facts readable from an ONNX BERT export.

    ``model`` is an ``onnx.ModelProto``. Returns ``(state, facts)``; ``facts`` holds vocab_size,
    hidden_size, num_hidden_layers, intermediate_size, max_position_embeddings, type_vocab_size,
    layer_norm_eps and hidden_act.
    """
    onnx = _import_onnx(f"converting {source}")
    from onnx import numpy_helper

    graph = model.graph
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:  # some exporters store weights as Constant nodes
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            value = numpy_helper.to_array(onnx.helper.get_attribute_value(node.attribute[0]))
            if value.ndim >= 1 and value.size > 1:
                arrays[node.output[0]] = value
    alias = _aliases(graph, arrays)
    embedding_keys = [name for name in alias if name.endswith(WORD_EMBEDDINGS)]
    if len(embedding_keys) != 1:
        raise StagingError(
            f"{source}: expected exactly one tensor named '*{WORD_EMBEDDINGS}' (a BERT export), found "
            f"{embedding_keys or 'none'}. Only BERT-architecture ONNX exports can be converted."
        )
    prefix = embedding_keys[0][: -len(WORD_EMBEDDINGS)]
    state = {name[len(prefix):]: arrays[alias[name]] for name in alias if name.startswith(prefix)}
    state.update(_linear_weights(graph, arrays, alias, prefix))
    facts = _architecture(graph, state, prefix, source, onnx)
    return state, facts


def _linear_weights(graph: Any, arrays: Mapping[str, np.ndarray], alias: Mapping[str, str], prefix: str
                    ) -> dict[str, np.ndarray]:
    """The Linear layers' weights, found as a MatMul whose output one Add shifts by a named bias."""
    state: dict[str, np.ndarray] = {}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in alias:
            continue
        weight = arrays[alias[node.input[1]]]
        biases = [
            other
            for add in consumers.get(node.output[0], [])
            if add.op_type == "Add"
            for other in add.input
            if other != node.output[0] and other in alias and other.startswith(prefix) and other.endswith(".bias")
        ]
        if len(biases) != 1:
            continue  # not a linear layer (e.g. a matmul of activations)
        key = biases[0][len(prefix): -len(".bias")] + ".weight"
        state[key] = np.ascontiguousarray(weight.T)  # ONNX [in, out] -> torch Linear [out, in]
    return state


def _architecture(graph: Any, state: Mapping[str, np.ndarray], prefix: str, source: str, onnx: Any
                  ) -> dict[str, Any]:
    """The BertConfig facts that the weights and the graph's operators determine."""
    layer_numbers = {int(m[1]) for key in state if (m := re.match(r"encoder\.layer\.(\d+)\.", key))}
    if not layer_numbers:
        raise StagingError(f"{source}: no transformer layers ('{prefix}encoder.layer.<n>.*') found.")
    epsilons = [
        onnx.helper.get_attribute_value(a)
        for node in graph.node
        if node.op_type == "LayerNormalization"
        for a in node.attribute
        if a.name == "epsilon"
    ]
    ops = {node.op_type for node in graph.node}
    if "Erf" not in ops:
        raise StagingError(
            f"{source}: no 'Erf' operator, so the activation is not BERT's exact GELU; only GELU (erf) "
            "exports are supported."
        )
    word = state["embeddings.word_embeddings.weight"]
    return {
        "vocab_size": int(word.shape[0]),
        "hidden_size": int(word.shape[1]),
        "num_hidden_layers": max(layer_numbers) + 1,
        "intermediate_size": int(state["encoder.layer.0.intermediate.dense.bias"].shape[0]),
        "max_position_embeddings": int(state["embeddings.position_embeddings.weight"].shape[0]),
        "type_vocab_size": int(state["embeddings.token_type_embeddings.weight"].shape[0]),
        # float32 storage of 1e-12 reads back as 9.99999996e-13: keep float32's 7 digits
        "layer_norm_eps": float(f"{epsilons[0]:.7g}") if epsilons else 1e-12,
        "hidden_act": "gelu",
    }


def _bert_model(state: Mapping[str, np.ndarray], facts: Mapping[str, Any], heads: int, source: str) -> Any:
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(**facts, num_attention_heads=heads)
    model = BertModel(config, add_pooling_layer=False).eval()
    expected = {k: v for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    missing = sorted(set(expected) - set(state))
    if missing:
        raise StagingError(
            f"{source}: the export lacks {len(missing)} BertModel weight(s), e.g. {missing[:4]}; the graph "
            "does not follow the layout this converter reads (see affine_homotopy.models.onnx_convert)."
        )
    wrong = [k for k in expected if tuple(state[k].shape) != tuple(expected[k].shape)]
    if wrong:
        raise StagingError(
            f"{source}: weight shapes differ from a BertModel with {facts}: "
            + ", ".join(f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}" for k in wrong[:4])
        )
    model.load_state_dict({k: torch.from_numpy(np.array(state[k], dtype=np.float32)) for k in expected}, strict=False)
    return model


def check_inputs(vocab_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random token ids (3 sequences of 9 tokens, two right-padded) for comparing two models."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab_size, size=(3, 9), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    return ids, mask


def onnx_outputs(path: str | Path, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Every graph output of the ONNX model at ``path`` on ``ids`` and ``mask``, run by onnxruntime.

    (``onnx.reference``, the operator-by-operator NumPy interpreter, fails on some exports'
    GatherElements, so the reference here is onnxruntime, which serves such exports in production.)
    """
    try:
        import onnxruntime
    except ImportError as error:
        raise StagingError(
            "checking an ONNX conversion needs 'onnxruntime', which is not installed. "
            "Fix: pip install -e . (it is a dependency of this project)."
        ) from error
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    for graph_input in session.get_inputs():
        name = graph_input.name
        feeds[name] = mask if "mask" in name else (np.zeros_like(ids) if "type" in name else ids)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def _version(package: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(package)


def _relative_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.max(np.abs(ours - theirs)) / max(float(np.max(np.abs(theirs))), 1e-12))


def _last_state_error(model: Any, outputs: Mapping[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> tuple[float, str]:
    """Smallest relative error between the model's last hidden state and any matching graph output."""
    import torch

    with torch.inference_mode():
        last = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
    errors = {
        name: _relative_error(last, value)
        for name, value in outputs.items()
        if value.shape == last.shape and np.issubdtype(value.dtype, np.floating)
    }
    if not errors:
        return float("inf"), ""
    name = min(errors, key=errors.get)
    return errors[name], name


def convert_onnx_bert(
    onnx_path: str | Path, heads: int | None = None, source: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Load a BERT ONNX export as a ``BertModel``, checked against the graph's own output.

    ``heads``: number of attention heads; ``None`` = the unique head count whose model reproduces
    the graph. Returns the model and a record of the check (output compared, relative error).
    """
    source = source or str(onnx_path)
    onnx = _import_onnx(f"converting {source}")
    try:
        proto = onnx.load(str(onnx_path))
    except Exception as error:  # protobuf decode errors have several types
        raise StagingError(f"{source}: not a readable ONNX model: {type(error).__name__}: {error}") from error
    state, facts = bert_weights(proto, source)
    ids, mask = check_inputs(facts["vocab_size"])
    outputs = onnx_outputs(onnx_path, ids, mask)
    hidden = facts["hidden_size"]
    candidates = [heads] if heads else [h for h in range(1, hidden + 1) if hidden % h == 0 and hidden // h >= 4]
    matches = []
    tried = {}
    for count in candidates:
        if hidden % count:
            raise StagingError(f"{source}: num_attention_heads {count} does not divide hidden size {hidden}.")
        model = _bert_model(state, facts, count, source)
        error, output = _last_state_error(model, outputs, ids, mask)
        tried[count] = error
        if error <= CHECK_TOLERANCE:
            matches.append((count, model, error, output))
    if len(matches) != 1:
        found = ", ".join(f"{h} heads: {e:.2g}" for h, e in tried.items())
        reason = "no head count" if not matches else f"{len(matches)} head counts"
        raise StagingError(
            f"{source}: {reason} reproduce(s) the ONNX graph's last hidden state to relative error "
            f"{CHECK_TOLERANCE:g} ({found}). Set 'num_attention_heads' for this encoder, or the export is "
            "not a plain BERT encoder."
        )
    count, model, error, output = matches[0]
    log.info("converted %s: %s, %d heads; last hidden state equals graph output %r to %.2g (relative)",
             source, facts, count, output, error)
    record = {
        "architecture": {**facts, "num_attention_heads": count},
        "checked_against": f"onnxruntime {_version('onnxruntime')}",
        "checked_output": output,
        "relative_error": error,
        "tolerance": CHECK_TOLERANCE,
    }
    return model, record
