"""The (query, passages) the service's rerank stage scores, collected in this process.

The rerank row holds the stage to the raw cross-encoder "on the same pairs". The candidates the
stage scores are HYBRID's fused list, which no direct engine call gives: SciFact's first ten
queries have 115 tokens a pair among the fused candidates against 110 among the dense top 20, and
later queries longer pairs still. So the service itself is opened on the index (before any server
holds the vector folder), its reranker wrapped by one that keeps what it is asked, and each query
run once as the rerank cell asks it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from unittest import mock

from retrieval_server.backends.reranker import Reranker
from retrieval_server.domain import QueryOptions, Strategy

#: one query's rerank calls, each (query as the stage sent it, passages)
Calls = list[tuple[str, list[str]]]


class _Recording:
    """The service's reranker, keeping every (query, passages) it is asked to score."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self.name = inner.name
        # The stage caps its candidates by the inner reranker's measured rate: the same cap here.
        self.rate = getattr(inner, "rate", None)
        self.calls: Calls = []

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        return await self.inner.rerank(query, texts)


def collect(env: Mapping[str, str], queries: Sequence[str], top_k: int) -> list[Calls]:
    """Per query, the rerank calls of a HYBRID query with ``top_k`` and no cache, under the
    server's environment ``env`` (``RETRIEVAL_*``)."""
    from retrieval_server.app import Application
    from retrieval_server.config import load_settings

    with mock.patch.dict(os.environ, env):
        settings = load_settings()

    async def run() -> list[Calls]:
        app = Application(settings)
        await app.open()
        try:
            if app.reranker is None:
                return []
            recording = _Recording(app.reranker)
            app.reranker = recording  # before the pipeline, which takes it, is first built
            per_query: list[Calls] = []
            for q in queries:
                recording.calls = []
                await app.pipeline.query(QueryOptions(query=q, top_k=top_k, strategy=Strategy.HYBRID, use_cache=False, rerank=True))
                per_query.append(recording.calls)
            return per_query
        finally:
            await app.close()

    return asyncio.run(run())
