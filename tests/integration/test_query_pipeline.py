"""Strategies and degradations of the query pipeline over the embedded stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, QueryOptions, Strategy
from retrieval_server.workflow.pipeline import QueryPipeline


@pytest_asyncio.fixture(scope="module")
async def app(tmp_path_factory) -> AsyncIterator[Application]:  # type: ignore[no-untyped-def]
    application = Application(load_settings(data_dir=tmp_path_factory.mktemp("pipeline")))
    await application.open()
    await application.ingest(
        [
            DocumentSource(filename="codes.txt", content=b"Error XK-4471 means the flux capacitor overheated."),
            DocumentSource(filename="weather.txt", content=b"Rain is expected across the northern valleys tomorrow."),
            DocumentSource(filename="cooking.txt", content=b"Simmer the tomato sauce slowly with basil and garlic."),
        ]
    )
    yield application
    await application.close()


class BrokenEmbedder:
    model_id = "broken"
    dim = 384

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("model crashed")


async def test_semantic_finds_meaning(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("will it be wet outside tomorrow", 1))
    assert r.contexts[0].document.document_id == "weather"
    assert r.metrics.strategy_used is Strategy.SEMANTIC and r.metrics.degraded == []


async def test_keyword_finds_the_exact_code(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("XK-4471", 3, strategy=Strategy.KEYWORD))
    assert [c.document.document_id for c in r.contexts] == ["codes"]
    assert r.metrics.strategy_used is Strategy.KEYWORD
    assert [s.stage for s in r.metrics.stages] == ["embed_query", "retrieve", "enrich", "select"]


async def test_unavailable_strategy_is_reported_not_hidden(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("tomato sauce", 1, strategy=Strategy.HYBRID))
    assert r.contexts[0].document.document_id == "cooking"
    assert r.metrics.strategy_used is Strategy.SEMANTIC
    assert r.metrics.degraded == ["strategy:hybrid_unavailable"]


async def test_embedding_failure_falls_back_to_keyword_search(app: Application) -> None:
    deps = replace(app.pipeline._deps, embedder=BrokenEmbedder())
    r = await QueryPipeline(deps).query(QueryOptions("basil garlic sauce", 2))
    assert r.contexts[0].document.document_id == "cooking"
    assert r.metrics.degraded == ["dense:embedding_failed"]
    assert r.metrics.strategy_used is Strategy.KEYWORD
