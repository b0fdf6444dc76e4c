"""Cross-encoder rerankers: a TEI server over HTTP, the local ONNX model, or TEI backed by the local one.

Every implementation returns one score per input text, in input order (TEI answers sorted by
score with an ``index``; we put them back in place).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import httpx

from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
from retrieval_server.backends.executor import BlockingExecutor
from scoring_core.encoders import CrossEncoder

log = logging.getLogger(__name__)


class Reranker(Protocol):
    name: str

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]: ...


class RerankError(Exception):
    """The reranker could not score the texts."""


class OnnxReranker:
    """scoring_core's CrossEncoder on the bounded executor."""

    def __init__(self, model_dir: Path, executor: BlockingExecutor, *, activation: str = "sigmoid", threads: int | None = None) -> None:
        tokenizer = model_dir / "tokenizer.json"
        self._model = CrossEncoder(
            model_dir / "model.onnx", tokenizer if tokenizer.is_file() else BUNDLED_TOKENIZER, activation=activation, threads=threads
        )
        self._executor = executor
        self.name = f"onnx:{model_dir.name}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return (await self._executor.run(self._model.score, query, list(texts))).tolist()


class TeiReranker:
    """Hugging Face text-embeddings-inference ``POST /rerank``.

    Request ``{"query", "texts", "raw_scores", "truncate"}``; response ``[{"index", "score"}]``.
    Large candidate lists are split into calls of at most ``max_batch`` texts (TEI rejects
    bigger ones with 413/422).
    """

    def __init__(
        self, url: str, *, timeout_s: float = 10.0, max_batch: int = 32, raw_scores: bool = False, breaker: CircuitBreaker | None = None
    ) -> None:
        self._client = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout_s)
        self._max_batch = max_batch
        self._raw = raw_scores
        self._breaker = breaker or CircuitBreaker()
        self.name = f"tei:{url}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Scores in input order; while TEI keeps failing (the breaker is open) it fails at once."""
        with self._breaker.calling(lambda: RerankError("TEI /rerank: circuit open after repeated failures")):
            return await self._rerank(query, texts)

    async def _rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        scores: list[float] = [0.0] * len(texts)
        for start in range(0, len(texts), self._max_batch):
            batch = list(texts[start : start + self._max_batch])
            try:
                resp = await self._client.post(
                    "/rerank", json={"query": query, "texts": batch, "raw_scores": self._raw, "truncate": True}
                )
                resp.raise_for_status()
                items = resp.json()
                for item in items:
                    scores[start + int(item["index"])] = float(item["score"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError) as exc:
                raise RerankError(f"TEI /rerank failed: {exc}") from exc
            if len(items) != len(batch):
                raise RerankError(f"TEI /rerank returned {len(items)} scores for {len(batch)} texts")
        return scores

    async def close(self) -> None:
        await self._client.aclose()


class FallbackReranker:
    """The primary (TEI); when it fails, the local model, and the answer says so."""

    def __init__(self, primary: Reranker, fallback: Reranker) -> None:
        self.primary, self.fallback = primary, fallback
        self.name = f"{primary.name} (fallback {fallback.name})"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return (await self.rerank_reporting(query, texts))[0]

    async def rerank_reporting(self, query: str, texts: Sequence[str]) -> tuple[list[float], str | None]:
        """Scores, and the degradation to report when the fallback answered."""
        try:
            return await self.primary.rerank(query, texts), None
        except RerankError:
            log.warning("primary reranker failed; using %s", self.fallback.name, exc_info=True)
            return await self.fallback.rerank(query, texts), "rerank:tei_failed_used_local"
