"""The ONNX bi-encoder matches sentence-transformers on the same weights (needs the bench-torch extra)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
from scoring_core.encoders import BiEncoder
from tests.support.paths import fp32_model_dir, shared_dir

pytest.importorskip("torch", reason="sentence-transformers parity needs torch: pip install -e '.[bench-torch]'")
pytest.importorskip("sentence_transformers", reason="pip install -e '.[bench-torch]'")


def _texts() -> list[str]:
    """256 texts of 10 to 250+ tokens: SciFact abstracts cut at varied lengths, plus short queries."""
    corpus = shared_dir() / "datasets" / "scifact" / "corpus.jsonl"  # type: ignore[operator]
    rows = [json.loads(line) for _, line in zip(range(200), corpus.open(), strict=False)]
    texts = [r["text"][: 60 + (i * 37) % 1500] for i, r in enumerate(rows)]
    return texts + [r["title"] for r in rows[:56]]


def test_bi_encoder_matches_sentence_transformers(tmp_path: Path) -> None:
    from tests.support.st_parity import sentence_transformer_from_onnx

    model_dir = fp32_model_dir()
    texts = _texts()
    st = sentence_transformer_from_onnx(model_dir, tmp_path).encode(texts, batch_size=32, convert_to_numpy=True)
    ours = BiEncoder(model_dir / "model.onnx", BUNDLED_TOKENIZER, batch_size=32).encode(texts)
    cos = (st * ours).sum(axis=1) / (np.linalg.norm(st, axis=1) * np.linalg.norm(ours, axis=1))
    assert len(texts) == 256
    assert cos.min() >= 0.9999, f"min cosine {cos.min()}"
