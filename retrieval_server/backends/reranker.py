"""Cross-encoder rerankers: a TEI server over HTTP, the local ONNX model, or TEI backed by the local one.

Every implementation returns one score per input text, in input order (TEI answers sorted by
score with an ``index``; we put them back in place).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retrieval_server.backends.circuit_breaker import CircuitBreaker, refused_by_breaker
from retrieval_server.backends.embedder import folder_tokenizer
from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.http_body import (
    ResponseRefused,
    ResponseTooLarge,
    error_value,
    failure_text,
    request_bounded,
    response_limit,
    unpooled_client,
)
from scoring_core.encoders import CrossEncoder

log = logging.getLogger(__name__)

#: an item of TEI's answer, ``{"index": 31, "score": -1.2345678e-05}``, is under 50 bytes: twice that
#: leaves room for spacing
_BYTES_PER_SCORE = 100


class Reranker(Protocol):
    name: str

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]: ...


class RerankError(Exception):
    """The reranker could not score the texts."""


class TeiError(RerankError):
    """TEI could not score the texts, or its breaker refused the call: its breaker logs when it
    opens, so each request's failure is not worth a line of its own."""


class OnnxReranker:
    """scoring_core's CrossEncoder on the bounded executor."""

    def __init__(self, model_dir: Path, executor: BlockingExecutor, *, activation: str = "sigmoid", threads: int | None = None,
                 max_tokens: int = 512) -> None:
        self._model = CrossEncoder(
            model_dir / "model.onnx", folder_tokenizer(model_dir), activation=activation, threads=threads, max_length=max_tokens,
        )
        if self._model.max_length < max_tokens:
            log.warning("RETRIEVAL_RERANK_MAX_TOKENS=%d is more than the reranker %s takes: pairs are cut at its %d tokens",
                        max_tokens, model_dir, self._model.max_length)
        self._executor = executor
        self.name = f"onnx:{model_dir.name}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        scores = await self._executor.run(self._model.score, query, list(texts))
        if not np.isfinite(scores).all():
            # A broken export (fp16 overflow, say): fusion and thresholds refuse NaN, failing the
            # whole query where the fused order should answer.
            raise RerankError(f"the local reranker returned a score that is not a finite number for {len(texts)} texts")
        return scores.tolist()


class TeiReranker:
    """Hugging Face text-embeddings-inference ``POST /rerank``.

    Request ``{"query", "texts", "raw_scores", "truncate"}``; response ``[{"index", "score"}]``.
    Large candidate lists are split into calls of at most ``max_batch`` texts (TEI rejects
    bigger ones with 413/422), sent at once.
    """

    def __init__(
        self, url: str, *, timeout_s: float = 10.0, max_batch: int = 32, raw_scores: bool = False, breaker: CircuitBreaker | None = None
    ) -> None:
        self._client = unpooled_client(base_url=url.rstrip("/"), timeout=timeout_s)
        self._max_batch = max_batch
        self._raw = raw_scores
        self._breaker = breaker or CircuitBreaker()
        # Health shows it to callers without credentials: the URL (a host, perhaps a password) is not.
        self.name = "tei"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Scores in input order; while TEI keeps failing (the breaker is open) it fails at once."""
        with self._breaker.calling(lambda: TeiError("TEI /rerank: circuit open after repeated failures")):
            return await self._rerank(query, texts)

    async def _rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        batches = [list(texts[start : start + self._max_batch]) for start in range(0, len(texts), self._max_batch)]
        if len(batches) == 1:
            return await self._score_batch(query, batches[0])
        # TEI batches the requests it has in hand on its own: a long candidate list's calls sent at
        # once cost about the slowest call, one after another their sum. The first failure cancels
        # the others.
        try:
            async with asyncio.TaskGroup() as group:
                calls = [group.create_task(self._score_batch(query, batch)) for batch in batches]
        except* TeiError as failed:
            raise failed.exceptions[0] from None
        return [score for call in calls for score in call.result()]

    async def _score_batch(self, query: str, batch: list[str]) -> list[float]:
        import httpx

        try:
            resp = await request_bounded(
                self._client, "POST", "/rerank", json={"query": query, "texts": batch, "raw_scores": self._raw, "truncate": True},
                limit=response_limit(_BYTES_PER_SCORE * len(batch)),
            )
            resp.raise_for_status()
            items = resp.json()
            batch_scores = dict(_scored(item) for item in items)
        except httpx.HTTPError as exc:
            said = _tei_said(exc.response) if isinstance(exc, httpx.HTTPStatusError) else ""
            raise TeiError(f"TEI /rerank failed: {failure_text(exc)}{said}") from None  # httpx's text names the URL
        except ResponseTooLarge as exc:
            raise TeiError(f"TEI /rerank failed: {exc} for a batch of {len(batch)}") from exc
        # A body within the size limit may still be JSON nested past the parser's recursion, or
        # a number no float holds (a 400-digit score): the local model answers instead.
        except (ResponseRefused, ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise TeiError(f"TEI /rerank failed: {exc}") from exc
        # Each text exactly once: an index out of the batch would score another batch's text
        # (or, negative, the last one), and a repeated one leave a text at 0.
        if len(items) != len(batch) or set(batch_scores) != set(range(len(batch))):
            raise TeiError(f"TEI /rerank returned {len(items)} scores with indexes {sorted(batch_scores)[:8]} for {len(batch)} texts")
        if not all(math.isfinite(score) for score in batch_scores.values()):
            # JSON's NaN and Infinity parse; fusion and thresholds refuse them, failing the whole query.
            raise TeiError(f"TEI /rerank returned a score that is not a finite number for {len(batch)} texts")
        return [batch_scores[i] for i in range(len(batch))]

    async def close(self) -> None:
        await self._client.aclose()


def _tei_said(response: Any) -> str:
    """TEI's own reason for an error status, to follow the status (a 413 or 422 names the batch
    limit a misconfigured TEI_MAX_BATCH passed); cut, as it is the server's text of any length."""
    error = error_value(response)
    return f": {error[:200]}" if isinstance(error, str) and error else ""


def _scored(item: Any) -> tuple[int, float]:
    """One item of TEI's answer: its index, a JSON integer (int() truncated 1.7 to 1 and failed on
    1e400 with OverflowError), and its score, a number (float() took "0.5")."""
    index, score = item["index"], item["score"]
    if type(index) is not int:
        raise TypeError(f"index {str(index)[:40]!r} is not an integer")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise TypeError(f"score {str(score)[:40]!r} is not a number")
    return index, float(score)


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
        except RerankError as exc:
            # Each request's while TEI is down, and the answer says so: its breaker logs when it opens.
            log.debug("primary reranker failed; using %s: %s", self.fallback.name, exc, exc_info=not refused_by_breaker(exc))
            return await self.fallback.rerank(query, texts), "rerank:tei_failed_used_local"


async def scores_reporting(reranker: Reranker, query: str, texts: Sequence[str]) -> tuple[list[float], str | None]:
    """``reranker``'s scores, and the degradation to report when its fallback answered. Duck-typed:
    a traced reranker forwards ``rerank_reporting`` to the one it wraps, and a reranker without a
    fallback has none to report."""
    reporting = getattr(reranker, "rerank_reporting", None)
    if reporting is None:
        return await reranker.rerank(query, texts), None
    return await reporting(query, texts)  # type: ignore[no-any-return]


class ScoringRate:
    """Pairs per second the model has been scoring, as seen by requests (queueing included): an
    exponentially weighted mean over calls, so the estimate follows the machine's load."""

    def __init__(self, weight: float = 0.2) -> None:
        self._weight = weight
        self._pairs_per_s: float | None = None

    def observe(self, pairs: int, seconds: float) -> None:
        if pairs <= 0 or seconds <= 0:
            return
        rate = pairs / seconds
        self._pairs_per_s = rate if self._pairs_per_s is None else (1 - self._weight) * self._pairs_per_s + self._weight * rate

    @property
    def pairs_per_s(self) -> float | None:
        """None until a call was measured."""
        return self._pairs_per_s

    def pairs_within(self, budget_ms: float) -> int | None:
        """How many pairs fit in ``budget_ms`` at the measured rate (None: not measured yet)."""
        if self._pairs_per_s is None:
            return None
        return int(self._pairs_per_s * budget_ms / 1e3)


class PairScores:
    """The scores of recent (query, text) pairs: a pair scored once is not scored again while it
    is among the ``size`` most recently used. Keys are digests, so long texts cost 16 bytes."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._scores: OrderedDict[bytes, float] = OrderedDict()

    @staticmethod
    def key(query: str, text: str) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        # The query's length, not a separator, ends it: either string may hold any character, NUL
        # too, and ("a\0b", "c") joined by NUL was ("a", "b\0c").
        q = query.encode()
        h.update(len(q).to_bytes(8, "little"))
        h.update(q)
        h.update(text.encode())
        return h.digest()

    def get(self, key: bytes) -> float | None:
        score = self._scores.get(key)
        if score is not None:
            self._scores.move_to_end(key)
        return score

    def put(self, key: bytes, score: float) -> None:
        self._scores[key] = score
        self._scores.move_to_end(key)
        while len(self._scores) > self._size:
            self._scores.popitem(last=False)


class MeasuredReranker:
    """A reranker whose scores of recent pairs are remembered and whose scoring rate is measured
    (the rate tells a request how many candidates fit in its time budget)."""

    def __init__(self, inner: Reranker, pair_cache_size: int, rate: ScoringRate | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.inner = inner
        self.name = inner.name
        self.rate = rate or ScoringRate()
        self._pairs = PairScores(pair_cache_size) if pair_cache_size > 0 else None
        self._clock = clock

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return (await self.rerank_reporting(query, texts))[0]

    async def rerank_reporting(self, query: str, texts: Sequence[str]) -> tuple[list[float], str | None]:
        keys = [PairScores.key(query, t) for t in texts] if self._pairs is not None else []
        known = [self._pairs.get(k) for k in keys] if self._pairs is not None else [None] * len(texts)
        todo = [i for i, s in enumerate(known) if s is None]
        # The same text twice in one request is scored once too.
        unique = list(dict.fromkeys(texts[i] for i in todo))
        degraded: str | None = None
        fresh: dict[str, float] = {}
        if unique:
            start = self._clock()
            if isinstance(self.inner, FallbackReranker):
                scores, degraded = await self.inner.rerank_reporting(query, unique)
            else:
                scores = await self.inner.rerank(query, unique)
            if degraded is None:
                self.rate.observe(len(unique), self._clock() - start)
            fresh = dict(zip(unique, scores, strict=True))
            if degraded is not None and isinstance(self.inner, FallbackReranker) and len(todo) < len(texts):
                # The remembered scores are the configured model's, on another scale than the
                # fallback's: ranked together, what was cached decided the order and what passed
                # the threshold. One request's ranking holds one model's scores.
                cached = list(dict.fromkeys(t for t in texts if t not in fresh))
                fresh.update(zip(cached, await self.inner.fallback.rerank(query, cached), strict=True))
                known = [None] * len(texts)
        out = [s if s is not None else fresh[texts[i]] for i, s in enumerate(known)]
        if self._pairs is not None and degraded is None:
            # A fallback model's scores are not the configured model's: they are not remembered.
            for i in todo:
                self._pairs.put(keys[i], out[i])
        return out, degraded
