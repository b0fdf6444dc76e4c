"""Health reports an optional dependency that keeps failing (its circuit breaker open) as FAILING,
which makes the service DEGRADED, without calling the dependency itself: TEI and an
OpenAI-compatible LLM, each a local server speaking its protocol that answers 503."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from retrieval_server.app import Application
from retrieval_server.backends.cache import GuardedCache, MemoryCache
from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.config import load_settings
from retrieval_server.domain import ComponentState, DocumentSource, QueryOptions, Strategy, Unavailable
from scoring_core.model_builder import BertShape, build_cross_encoder
from tests.support.http_servers import json_server
from tests.support.ports import refused_port


def _unavailable(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return 503, {"error": "overloaded"}


def _states(report: Any) -> dict[str, ComponentState]:
    return {c.name: c.state for c in report.components}


async def test_a_tripped_breaker_is_a_failing_component_and_a_degraded_service(tmp_path: Path) -> None:
    with json_server(_unavailable) as tei, json_server(_unavailable) as llm:
        app = Application(load_settings(
            data_dir=tmp_path, cache_backend="none", tei_url=tei.url, llm_provider="openai", openai_base_url=llm.url + "/v1",
            openai_model="test-model", openai_api_key="k", llm_max_retries=0, breaker_failures=1, breaker_cooldown_s=3600,
        ))
        await app.open()
        try:
            before = await app.health()
            assert _states(before)["reranker"] is ComponentState.OK and _states(before)["llm"] is ComponentState.OK
            # Health answers callers without credentials: TEI's URL (a host, perhaps a password) is not shown.
            assert all(tei.url not in c.detail and "127.0.0.1" not in c.detail for c in before.components if c.name == "reranker")
            assert before.serving and not before.degraded

            # The ingest's graph extraction asks the LLM (and falls back to the classical rules)...
            assert not (await app.ingest([DocumentSource("tides.txt", b"The moon's gravity raises the tides twice a day.")])).errors
            assert len(llm.requests) >= 1 and _states(await app.health())["reranker"] is ComponentState.OK
            # ...and a query asks TEI (and keeps the fused order).
            result = await app.pipeline.query(QueryOptions("what raises the tides", 3, strategy=Strategy.HYBRID))
            assert "rerank:failed" in result.metrics.degraded and result.contexts and len(tei.requests) >= 1

            after = await app.health()
            states = {c.name: c for c in after.components}
            assert states["reranker"].state is ComponentState.FAILING and "circuit open" in states["reranker"].detail
            assert "127.0.0.1" not in states["reranker"].detail
            assert states["llm"].state is ComponentState.FAILING and "openai" in states["llm"].detail
            assert after.serving and after.degraded
            # Health itself never calls them: asking again sends nothing.
            sent = len(tei.requests) + len(llm.requests)
            await app.health()
            assert len(tei.requests) + len(llm.requests) == sent
        finally:
            await app.close()


async def test_an_llm_answering_200_without_a_completion_is_failing(tmp_path: Path) -> None:
    """Every call fails when the provider answers 200 with JSON that is no completion (a gateway's
    error object, a wrong base URL): Health says so, as it does for a 503. The answer counted as a
    success, since its text was read only after the breaker had judged the call."""
    with json_server(lambda path, body: (200, {"error": {"message": "upstream overloaded"}})) as llm:
        app = Application(load_settings(
            data_dir=tmp_path, cache_backend="none", llm_provider="openai", openai_base_url=llm.url + "/v1",
            openai_model="test-model", openai_api_key="k", llm_max_retries=0, breaker_failures=1, breaker_cooldown_s=3600,
        ))
        await app.open()
        try:
            assert _states(await app.health())["llm"] is ComponentState.OK
            # The ingest's graph extraction asks the LLM, and falls back to the classical rules.
            assert not (await app.ingest([DocumentSource("tides.txt", b"The moon's gravity raises the tides twice a day.")])).errors
            assert len(llm.requests) >= 1
            after = await app.health()
            assert _states(after)["llm"] is ComponentState.FAILING and after.degraded
        finally:
            await app.close()


async def test_an_llm_refusing_connections_to_callers_with_short_deadlines_is_failing(tmp_path: Path) -> None:
    """Analysis gets half a request's time left, less than the LLM's backoff: each failed attempt
    was thrown away with the cancellation that cut its backoff, so the breaker never opened, every
    query waited for half its deadline, and Health said SERVING."""
    with refused_port() as port:
        app = Application(load_settings(
            data_dir=tmp_path, cache_backend="none", llm_provider="openai", openai_base_url=f"http://127.0.0.1:{port}/v1",
            openai_model="test-model", openai_api_key="k", llm_max_retries=2, llm_backoff_s=60, breaker_failures=3,
            breaker_cooldown_s=3600,
        ))
        await app.open()
        try:
            assert _states(await app.health())["llm"] is ComponentState.OK
            result = await app.pipeline.query(QueryOptions("what raises the tides", 3, deadline=time.monotonic() + 30))
            assert not any(d.endswith("timeout (deadline)") for d in result.metrics.degraded), result.metrics.degraded
            after = await app.health()
            assert _states(after)["llm"] is ComponentState.FAILING and after.degraded
        finally:
            await app.close()


async def test_the_stores_are_pinged_at_once(tmp_path: Path, monkeypatch: Any) -> None:
    """Each ping of a hung store takes its whole timeout: one after another, a readiness probe
    would wait for their sum. Here each store's ping answers only once the other's has started."""
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await app.open()
    try:
        started = {"vector": asyncio.Event(), "metadata": asyncio.Event()}

        def after_the_other(mine: str, other: str) -> Any:
            async def ping() -> None:
                started[mine].set()
                await started[other].wait()  # never, if the pings ran one after another: then FAILING at the timeout

            return ping

        monkeypatch.setattr(app.vectors, "ping", after_the_other("vector", "metadata"))
        monkeypatch.setattr(app.metadata, "ping", after_the_other("metadata", "vector"))
        report = await app.health()
    finally:
        await app.close()
    states = _states(report)
    assert states["vector_store"] is ComponentState.OK and states["metadata_store"] is ComponentState.OK


async def test_the_caches_own_timeout_within_the_callers_deadline_is_the_caches_failure(tmp_path: Path, caplog: Any) -> None:
    """The cache's ping has a timeout of its own (CACHE_TIMEOUT_S), well within a caller's 2 s:
    its TimeoutError was taken for the caller's deadline running out, reported so, and not logged."""
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await app.open()

    class Frozen(MemoryCache):
        async def ping(self) -> None:
            await asyncio.Event().wait()  # a Redis that accepted the connection and went silent

    app.cache = GuardedCache(Frozen(app.embedder.dim), CircuitBreaker(name="cache"), timeout_s=0.01)
    try:
        with caplog.at_level(logging.WARNING, logger="retrieval_server.app"):
            report = await app.health(2.0)
    finally:
        app.cache = None
        await app.close()
    cache = {c.name: c for c in report.components}["cache"]
    assert cache.state is ComponentState.FAILING and cache.detail == "TimeoutError (the server's log says more)", cache.detail
    assert [r.getMessage() for r in caplog.records] == ["health: cache is failing: TimeoutError"]


async def test_a_failing_store_is_named_without_what_its_driver_says(tmp_path: Path, monkeypatch: Any, caplog: Any) -> None:
    """Health answers callers without credentials: a driver's message (hosts, users) is logged,
    once while it stays the same, and the caller reads its kind."""
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await app.open()
    try:
        async def refused() -> None:
            raise ConnectionError("(1045, \"Access denied for user 'retrieval'@'10.1.2.3'\")")

        monkeypatch.setattr(app.metadata, "ping", refused)
        with caplog.at_level("WARNING", logger="retrieval_server.app"):
            reports = [await app.health() for _ in range(3)]
    finally:
        await app.close()
    for report in reports:
        metadata = {c.name: c for c in report.components}["metadata_store"]
        assert metadata.state is ComponentState.FAILING and metadata.detail == "ConnectionError (the server's log says more)"
    assert [r.getMessage() for r in caplog.records if "10.1.2.3" in r.getMessage()] == [
        "health: metadata_store is failing: (1045, \"Access denied for user 'retrieval'@'10.1.2.3'\")"
    ]


async def test_the_disk_component_names_no_path_and_the_log_does(tmp_path: Path, caplog: Any) -> None:
    """Health answers callers without credentials: the data directory's path (a user's home, a
    mount's name) was in its detail, below the floor or not."""
    from retrieval_server.backends.disk import DiskSpace

    app = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await app.open()
    try:
        [disk] = [c for c in (await app.health()).components if c.name == "disk"]
        assert disk.state is ComponentState.OK and str(tmp_path) not in disk.detail
        assert re.fullmatch(rf"\d+ MiB free \(floor {app.settings.min_free_disk_mb} MiB\)", disk.detail), disk.detail
        app.disk = DiskSpace.of(app.disk.paths, 1 << 40)  # a floor no volume is above
        with caplog.at_level(logging.WARNING, logger="retrieval_server.app"):
            for _ in range(2):
                [disk] = [c for c in (await app.health()).components if c.name == "disk"]
                assert disk.state is ComponentState.FAILING and str(tmp_path) not in disk.detail
                assert re.fullmatch(rf"ingestion refused: \d+ MiB free \(floor {1 << 40} MiB\)", disk.detail), disk.detail
        [logged] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("health: disk is failing")]  # once
        assert str(tmp_path) in logged
    finally:
        await app.close()


@pytest.mark.parametrize("local", [False, True], ids=["tei", "tei_with_local_fallback"])
async def test_a_dependency_down_logs_its_breaker_opening_once_not_each_request(tmp_path: Path, caplog: Any, local: bool) -> None:
    """An open breaker is a designed state, which Health and each response's degraded tags report:
    TEI down for 20 s under three callers logged 5,513 lines and 287 tracebacks, one or more per
    request, its breaker's refusals among them; with the local model to fall back on, a WARNING
    and a traceback per request."""
    caplog.set_level(logging.DEBUG)
    model_dir = None
    if local:
        model_dir = tmp_path / "reranker"
        model_dir.mkdir()
        build_cross_encoder(model_dir / "model.onnx", BertShape(hidden=32, layers=2, heads=2, intermediate=64), seed=3, init_std=0.3)
    with refused_port() as port:
        app = Application(load_settings(
            data_dir=tmp_path, cache_backend="none", tei_url=f"http://127.0.0.1:{port}", reranker_model_dir=model_dir,
            rerank_threshold=0.0, breaker_failures=2, breaker_cooldown_s=3600,
        ))
        await app.open()
        try:
            assert not (await app.ingest([DocumentSource("tides.txt", b"The moon's gravity raises the tides twice a day.")])).errors
            caplog.clear()
            for _ in range(6):
                result = await app.pipeline.query(QueryOptions("what raises the tides", 3, strategy=Strategy.HYBRID))
                assert ("rerank:tei_failed_used_local" if local else "rerank:failed") in result.metrics.degraded
        finally:
            await app.close()
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and loud[0].startswith("reranker (tei): circuit open after 2 consecutive failures"), loud
    refusals = [r for r in caplog.records if "circuit open" in r.getMessage() and r.levelno < logging.WARNING]
    assert refusals and not any(r.exc_info for r in refusals)


async def test_a_store_legs_failure_is_logged_once_per_leg_and_kind_with_a_traceback_only_when_unexpected(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """MariaDB down for 90 s under three callers logged 32,235 lines and 2,006 tracebacks: each
    request's metadata leg, each of its retries with a traceback, though the store's message says
    all there is to say."""
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none", store_retries=1, store_backoff_s=0))
    await app.open()
    try:
        assert not (await app.ingest([DocumentSource("tides.txt", b"The moon's gravity raises the tides twice a day.")])).errors
        for failure in (Unavailable("MySQL is unreachable at db:3306: (2003, \"Can't connect\")"), RuntimeError("a bug")):
            async def fails(*args: Any, failure: Exception = failure, **kwargs: Any) -> Any:
                raise failure

            monkeypatch.setattr(app.metadata, "search_documents", fails)
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                for _ in range(4):
                    result = await app.pipeline.query(QueryOptions("what raises the tides", 3, strategy=Strategy.HYBRID))
                    assert "metadata:store_error" in result.metrics.degraded
            loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(loud) == 1 and "metadata" in loud[0].getMessage(), [r.getMessage() for r in loud]
            if isinstance(failure, Unavailable):
                assert loud[0].levelno == logging.WARNING and not loud[0].exc_info and "db:3306" in loud[0].getMessage()
            else:
                assert loud[0].levelno == logging.ERROR and loud[0].exc_info and loud[0].exc_info[1] is failure
    finally:
        await app.close()


async def test_a_local_reranker_failing_every_call_is_logged_once_per_kind_with_its_traceback(tmp_path: Path, caplog: Any) -> None:
    """The local model has no breaker to log its failing: a broken export (NaN weights here, fp16
    overflow in the field) failed every request's reranking and logged nothing above DEBUG, Health
    saying OK, as each of TEI's failures, which its breaker speaks for, is logged."""
    model_dir = tmp_path / "reranker"
    model_dir.mkdir()
    build_cross_encoder(model_dir / "model.onnx", BertShape(hidden=32, layers=2, heads=2, intermediate=64), seed=3, init_std=float("nan"))
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none", reranker_model_dir=model_dir, rerank_threshold=0.0))
    await app.open()
    try:
        assert not (await app.ingest([DocumentSource("tides.txt", b"The moon's gravity raises the tides twice a day.")])).errors
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            for _ in range(4):
                result = await app.pipeline.query(QueryOptions("what raises the tides", 3, strategy=Strategy.HYBRID, use_cache=False))
                assert "rerank:failed" in result.metrics.degraded
    finally:
        await app.close()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and loud[0].levelno == logging.ERROR and "reranking failed" in loud[0].getMessage(), [r.getMessage() for r in loud]
    assert loud[0].exc_info and "not a finite number" in str(loud[0].exc_info[1])
