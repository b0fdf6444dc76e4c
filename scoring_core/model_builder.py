"""Build BERT-style sequence-classification ONNX graphs with chosen sizes and seeded random weights.

No cross-encoder weights can be downloaded on the project's machines, so tests build a tiny one
and benchmarks build one with the exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2
(6 layers, hidden 384, 12 heads, intermediate 1536): inference cost does not depend on the
weights. The graph has the inputs and output of a Hugging Face export (``input_ids``,
``attention_mask``, ``token_type_ids`` → ``logits [batch, 1]``). Needs the ``onnx`` package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, slots=True)
class BertShape:
    vocab_size: int = 30522
    hidden: int = 384
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    max_positions: int = 512


MINILM_L6 = BertShape()


def build_cross_encoder(path: Path, shape: BertShape = MINILM_L6, seed: int = 0, init_std: float = 0.02) -> Path:
    """Write ``model.onnx`` for ``shape`` to ``path`` (a file path) and return it.

    ``init_std`` is the weights' standard deviation: BERT's 0.02 makes the logits of an untrained
    model almost constant; tests that compare rankings use a larger one.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    h, nh = shape.hidden, shape.heads
    hd = h // nh
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    counter = iter(range(1_000_000))

    def const(arr: np.ndarray, name: str | None = None) -> str:
        name = name or f"c{next(counter)}"
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(*dims: int) -> str:
        return const((rng.normal(size=dims) * init_std).astype(np.float32))

    def node(op: str, inputs: list[str], **attrs: object) -> str:
        out = f"t{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def layer_norm(x: str) -> str:
        return node("LayerNormalization", [x, const(np.ones(h, np.float32)), const(np.zeros(h, np.float32))], axis=-1, epsilon=1e-12)

    def dense(x: str, n_in: int, n_out: int) -> str:
        return node("Add", [node("MatMul", [x, weight(n_in, n_out)]), const(np.zeros(n_out, np.float32))])

    seq = node("Gather", [node("Shape", ["input_ids"]), const(np.array(1, np.int64))], axis=0)
    positions = node("Range", [const(np.array(0, np.int64)), seq, const(np.array(1, np.int64))])
    emb = node("Add", [node("Gather", [weight(shape.vocab_size, h), "input_ids"]), node("Gather", [weight(shape.max_positions, h), positions])])
    emb = node("Add", [emb, node("Gather", [weight(2, h), "token_type_ids"])])
    x = layer_norm(emb)
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const(np.array(1.0, np.float32)), mask]), const(np.array(-10000.0, np.float32))])
    bias = node("Unsqueeze", [bias, const(np.array([1, 2], np.int64))])
    split = const(np.array([0, 0, nh, hd], np.int64))
    merge = const(np.array([0, 0, h], np.int64))
    for _ in range(shape.layers):
        q = node("Transpose", [node("Reshape", [dense(x, h, h), split])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [dense(x, h, h), split])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [dense(x, h, h), split])], perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), const(np.array(1 / np.sqrt(hd), np.float32))]), bias])
        ctx = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = layer_norm(node("Add", [x, dense(ctx, h, h)]))
        up = dense(x, h, shape.intermediate)
        # GELU (erf form), spelled out: opset 17 has no Gelu operator.
        gelu = node("Mul", [node("Mul", [up, const(np.array(0.5, np.float32))]),
                            node("Add", [const(np.array(1.0, np.float32)), node("Erf", [node("Div", [up, const(np.array(np.sqrt(2.0), np.float32))])])])])
        x = layer_norm(node("Add", [x, dense(gelu, shape.intermediate, h)]))
    cls = node("Gather", [x, const(np.array(0, np.int64))], axis=1)
    pooled = node("Tanh", [dense(cls, h, h)])
    nodes.append(helper.make_node("Add", [node("MatMul", [pooled, weight(h, 1)]), const(np.zeros(1, np.float32))], ["logits"]))

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "bert_sequence_classification",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="scoring_core.model_builder")
    model.ir_version = 8  # what opset 17 needs; newer onnx writes IR versions onnxruntime may not read
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
