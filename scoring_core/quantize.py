"""Int8 quantization of an ONNX encoder: int8 weights in blocks, activations quantized per row.

Each linear layer becomes onnxruntime's ``MatMulNBits`` (8 bits, blocks of :data:`BLOCK` along
the inputs, ``accuracy_level`` 4: int8 arithmetic). It quantizes its input per row and block, so
a text's vector does not depend on the other texts of its batch. Dynamic quantization
(``quantize_dynamic``: one activation scale per tensor, over the whole batch) gave a text
embedded alone and the same text in a batch of 32 a cosine down to 0.9865: a query and the
passage it was ingested as no longer matched exactly, and which neighbours a batch held decided.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from scoring_core.model_builder import write_atomically

#: Weights per scale along a layer's inputs. Measured on all-MiniLM-L6-v2 (64 passages of 60-90
#: words): 32 keeps a text's vector alone and in a batch equal to the bit, cosine to fp32 mean
#: 0.9997 (min 0.9994); 128 let the batch move a vector (cosine 0.9997) and fit fp32 worse (min 0.9987).
BLOCK = 32
#: The first onnxruntime that quantizes and runs MatMulNBits with 8 bits (pyproject.toml's floor too).
MIN_ONNXRUNTIME = "1.22"


def quantize_int8(src: Path, dst: Path) -> Path:
    """Write an int8 copy of ``src`` to ``dst`` and return ``dst``. Needs the ``onnx`` package.

    ``dst`` is replaced whole or not at all: a quantization that fails or is interrupted (Ctrl-C)
    leaves what was there.

    Measured on all-MiniLM-L6-v2, one thread on this project's 2-core VM without VNNI: 16 passages
    of 90 words in 1.8 s (fp32 2.5 s, dynamic int8 0.9 s), a query in 7.1 ms (12.7, 5.5);
    embedding cosine to fp32 mean 0.9997, against 0.992 for dynamic int8.
    """
    import onnx
    from onnx import helper, numpy_helper
    try:
        from onnxruntime.capi._pybind_state import quantize_matmul_8bits  # what onnxruntime's own MatMulNBits quantizer calls
    except ImportError:
        # Both came in 1.22: before, the quantizer is missing and MatMulNBits loads 4-bit weights only.
        import onnxruntime

        raise ImportError(f"quantize_int8 needs onnxruntime>={MIN_ONNXRUNTIME} (8-bit MatMulNBits), "
                          f"found {onnxruntime.__version__}: upgrade onnxruntime") from None

    model = onnx.load(str(src))
    graph = model.graph
    floats = {t.name: t for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2}
    quantized: dict[str, list[str]] = {}
    nodes = []
    for node in graph.node:
        weight = floats.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None:
            # Attention's products of two activations and every other operator stay in float.
            nodes.append(node)
            continue
        k, n = weight.dims
        if weight.name not in quantized:
            packed, scales = _blocks(numpy_helper.to_array(weight), quantize_matmul_8bits)
            quantized[weight.name] = [f"{weight.name}_q8", f"{weight.name}_scales"]
            graph.initializer.extend([numpy_helper.from_array(packed, quantized[weight.name][0]),
                                      numpy_helper.from_array(scales, quantized[weight.name][1])])
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], *quantized[weight.name]], list(node.output), name=node.name,
                                      domain="com.microsoft", K=k, N=n, bits=8, block_size=BLOCK, accuracy_level=4))
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    # Models of IR version 3 list their initializers among the inputs too: a dropped weight would be a required input.
    names = {t.name for t in kept}
    inputs = [i for i in graph.input if i.name in names or i.name not in floats]
    del graph.input[:]
    graph.input.extend(inputs)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    write_atomically(dst, model.SerializeToString())
    return dst


def _blocks(weight: np.ndarray, quantize: Callable[..., None]) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` ``[K, N]`` as MatMulNBits' int8 blocks ``[N, blocks, BLOCK]`` and their scales
    ``[N, blocks]``; symmetric, so no zero points."""
    k, n = weight.shape
    blocks = -(-k // BLOCK)
    padded = np.zeros((blocks * BLOCK, n), np.float32)
    padded[:k] = weight
    packed = np.zeros((n, blocks, BLOCK), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    quantize(packed, padded, scales, np.zeros((n, blocks), np.uint8), BLOCK, n, k, True)
    return packed, scales
