"""Rebuild the fp32 all-MiniLM-L6-v2 ONNX export as a sentence-transformers model (same weights).

The TorchScript exporter keeps module paths: named initializers map to state-dict keys directly,
and each MatMul node ``/m/<module path>/MatMul`` holds its Linear weight transposed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def sentence_transformer_from_onnx(model_dir: Path, work: Path) -> Any:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    graph = onnx.load(str(model_dir / "model.onnx")).graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    state: dict[str, Any] = {}
    for name, arr in weights.items():
        if name.startswith("m."):
            state[name[2:]] = torch.from_numpy(np.array(arr))
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in weights and node.name.endswith("/MatMul"):
            module = node.name.strip("/").removesuffix("/MatMul").replace("/", ".").removeprefix("m.")
            state[f"{module}.weight"] = torch.from_numpy(np.array(weights[node.input[1]]).T.copy())
    # all-MiniLM-L6-v2's architecture (the folder's config.json describes the export, not the model).
    config = BertConfig(
        vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
        max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12,
    )
    bert = BertModel(config, add_pooling_layer=False)
    missing, unexpected = bert.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "position_ids" not in k]:
        raise RuntimeError(f"weight mapping incomplete: missing={missing} unexpected={unexpected}")
    hf_dir = work / "hf"
    bert.save_pretrained(hf_dir)
    BertTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"), do_lower_case=True).save_pretrained(hf_dir)
    transformer = models.Transformer(str(hf_dir), max_seq_length=256)
    return SentenceTransformer(modules=[transformer, models.Pooling(384, "mean"), models.Normalize()], device="cpu")
