"""Build BERT-style ONNX graphs: cross-encoders with seeded random weights, sentence encoders from real weights.

No cross-encoder weights can be downloaded on the project's machines, so tests build a tiny one
and benchmarks build one with the exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2
(6 layers, hidden 384, 12 heads, intermediate 1536): inference cost does not depend on the
weights. That graph has the inputs and output of a Hugging Face export (``input_ids``,
``attention_mask``, ``token_type_ids`` → ``logits [batch, labels]``, one label unless asked).

A sentence encoder is built from a Hugging Face ``BertModel``'s tensors (e.g. a
``model.safetensors`` read with ``safetensors.numpy``; no torch) and outputs
``last_hidden_state [batch, sequence, hidden]``, like the sentence-transformers ONNX export
(pooling and normalization are the encoder's). Needs the ``onnx`` package.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class BertShape:
    vocab_size: int = 30522
    hidden: int = 384
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BertShape:
        """The shape in a Hugging Face ``config.json`` of a BERT model (absolute positions, GELU)."""
        if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only BERT with GELU and absolute position embeddings is supported")
        return cls(
            vocab_size=int(config["vocab_size"]),
            hidden=int(config["hidden_size"]),
            layers=int(config["num_hidden_layers"]),
            heads=int(config["num_attention_heads"]),
            intermediate=int(config["intermediate_size"]),
            max_positions=int(config["max_position_embeddings"]),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        )


MINILM_L6 = BertShape()

#: A tensor by its Hugging Face name (``encoder.layer.0.attention.self.query.weight``) and shape
#: (linear layers ``[out, in]``, as torch stores them).
Weights = Callable[[str, tuple[int, ...]], np.ndarray]


def random_weights(seed: int, init_std: float) -> Weights:
    """BERT's initialization: normal weights, zero biases, LayerNorm at identity."""
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name.endswith("LayerNorm.weight"):
            return np.ones(shape, np.float32)
        if name.endswith("bias"):
            return np.zeros(shape, np.float32)
        return (rng.normal(size=shape) * init_std).astype(np.float32)

    return weight


def named_weights(tensors: Mapping[str, np.ndarray], prefix: str = "") -> Weights:
    """Tensors as ``safetensors.numpy.load`` returns them; ``prefix`` is prepended to each name."""

    def weight(name: str, shape: tuple[int, ...]) -> np.ndarray:
        full = prefix + name
        if full not in tensors:
            raise KeyError(f"the weights have no tensor {full!r}")
        arr = np.asarray(tensors[full])
        if arr.shape != shape:
            raise ValueError(f"{full} has shape {arr.shape}, the graph needs {shape}")
        return arr.astype(np.float32, copy=False)

    return weight


class _Graph:
    def __init__(self) -> None:
        import onnx

        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self._counter = iter(range(1_000_000))

    def const(self, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        name = f"c{next(self._counter)}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op: str, inputs: list[str], output: str | None = None, **attrs: object) -> str:
        from onnx import helper

        out = output or f"t{next(self._counter)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out


def _bert_encoder(g: _Graph, shape: BertShape, w: Weights, output: str | None = None) -> str:
    """The encoder's last hidden state ``[batch, sequence, hidden]`` (named ``output`` if given)."""
    from onnx import TensorProto

    h, nh = shape.hidden, shape.heads
    hd = h // nh

    def layer_norm(x: str, name: str, out: str | None = None) -> str:
        gamma, beta = g.const(w(f"{name}.weight", (h,))), g.const(w(f"{name}.bias", (h,)))
        return g.node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=shape.layer_norm_eps)

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        # Torch stores a linear layer as [out, in]; MatMul multiplies by [in, out].
        kernel = g.const(np.ascontiguousarray(w(f"{name}.weight", (n_out, n_in)).T))
        return g.node("Add", [g.node("MatMul", [x, kernel]), g.const(w(f"{name}.bias", (n_out,)))])

    seq = g.node("Gather", [g.node("Shape", ["input_ids"]), g.const(np.array(1, np.int64))], axis=0)
    positions = g.node("Range", [g.const(np.array(0, np.int64)), seq, g.const(np.array(1, np.int64))])
    words = g.node("Gather", [g.const(w("embeddings.word_embeddings.weight", (shape.vocab_size, h))), "input_ids"])
    pos = g.node("Gather", [g.const(w("embeddings.position_embeddings.weight", (shape.max_positions, h))), positions])
    types = g.node("Gather", [g.const(w("embeddings.token_type_embeddings.weight", (shape.type_vocab_size, h))), "token_type_ids"])
    x = layer_norm(g.node("Add", [g.node("Add", [words, pos]), types]), "embeddings.LayerNorm")
    mask = g.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = g.node("Mul", [g.node("Sub", [g.const(np.array(1.0, np.float32)), mask]), g.const(np.array(-10000.0, np.float32))])
    bias = g.node("Unsqueeze", [bias, g.const(np.array([1, 2], np.int64))])
    split = g.const(np.array([0, 0, nh, hd], np.int64))
    merge = g.const(np.array([0, 0, h], np.int64))
    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        q = g.node("Transpose", [g.node("Reshape", [dense(x, f"{p}.attention.self.query", h, h), split])], perm=[0, 2, 1, 3])
        k = g.node("Transpose", [g.node("Reshape", [dense(x, f"{p}.attention.self.key", h, h), split])], perm=[0, 2, 3, 1])
        v = g.node("Transpose", [g.node("Reshape", [dense(x, f"{p}.attention.self.value", h, h), split])], perm=[0, 2, 1, 3])
        scores = g.node("Add", [g.node("Mul", [g.node("MatMul", [q, k]), g.const(np.array(1 / np.sqrt(hd), np.float32))]), bias])
        ctx = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
        ctx = g.node("Reshape", [g.node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = layer_norm(g.node("Add", [x, dense(ctx, f"{p}.attention.output.dense", h, h)]), f"{p}.attention.output.LayerNorm")
        up = dense(x, f"{p}.intermediate.dense", h, shape.intermediate)
        # GELU (erf form), spelled out: opset 17 has no Gelu operator.
        gelu = g.node("Mul", [g.node("Mul", [up, g.const(np.array(0.5, np.float32))]),
                              g.node("Add", [g.const(np.array(1.0, np.float32)),
                                             g.node("Erf", [g.node("Div", [up, g.const(np.array(np.sqrt(2.0), np.float32))])])])])
        last = i == shape.layers - 1
        x = layer_norm(g.node("Add", [x, dense(gelu, f"{p}.output.dense", shape.intermediate, h)]), f"{p}.output.LayerNorm",
                       output if last else None)
    return x


def _save(g: _Graph, name: str, output: Any, path: Path) -> Path:
    """Check the graph and write it to ``path`` atomically: a reader never sees half a file."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        g.nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask", "token_type_ids")],
        [output],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="scoring_core.model_builder")
    model.ir_version = 8  # what opset 17 needs; newer onnx writes IR versions onnxruntime may not read
    onnx.checker.check_model(model)
    write_atomically(path, model.SerializeToString())
    return path


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed over it: a concurrent reader
    (another process sharing the cache folder) sees the old file or the whole new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the file is read by other users' processes too
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_cross_encoder(
    path: Path, shape: BertShape = MINILM_L6, seed: int = 0, init_std: float = 0.02, labels: int = 1, squeeze: bool = False
) -> Path:
    """Write a sequence-classification ``model.onnx`` for ``shape`` to ``path`` (a file path) and return it.

    ``init_std`` is the weights' standard deviation: BERT's 0.02 makes the logits of an untrained
    model almost constant; tests that compare rankings use a larger one. ``labels`` is the number
    of logits per pair (2: a softmax classifier's ``[irrelevant, relevant]``); the weights before
    the classifier do not depend on it. ``squeeze`` outputs one label's logits as ``[batch]``, as
    some exports do.
    """
    if squeeze and labels != 1:
        raise ValueError(f"squeeze needs one label, got labels={labels}")
    from onnx import TensorProto, helper

    g = _Graph()
    w = random_weights(seed, init_std)
    h = shape.hidden
    x = _bert_encoder(g, shape, w)
    cls = g.node("Gather", [x, g.const(np.array(0, np.int64))], axis=1)
    pooled = g.node("Tanh", [g.node("Add", [g.node("MatMul", [cls, g.const(w("pooler.dense.weight", (h, h)).T.copy())]),
                                            g.const(w("pooler.dense.bias", (h,)))])])
    logits = g.node("Add", [g.node("MatMul", [pooled, g.const(w("classifier.weight", (labels, h)).T.copy())]),
                            g.const(w("classifier.bias", (labels,)))], None if squeeze else "logits")
    if squeeze:
        g.node("Squeeze", [logits, g.const(np.array([1], np.int64))], "logits")
    dims: list[Any] = ["batch"] if squeeze else ["batch", labels]
    return _save(g, "bert_sequence_classification", helper.make_tensor_value_info("logits", TensorProto.FLOAT, dims), path)


def build_sentence_encoder(path: Path, weights: Weights, shape: BertShape = MINILM_L6) -> Path:
    """Write a ``model.onnx`` that outputs ``last_hidden_state`` for ``weights`` to ``path`` and return it."""
    from onnx import TensorProto, helper

    g = _Graph()
    _bert_encoder(g, shape, weights, "last_hidden_state")
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", shape.hidden])
    return _save(g, "bert_sentence_encoder", out, path)
