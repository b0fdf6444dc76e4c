"""The service through a real grpc.aio server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import NoReturn
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc as pb_grpc
from retrieval_client import AsyncRetrievalClient, RetrievalClient
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, DocumentSource, ServiceError, StreamStalled
from retrieval_server.server import start_server
from tests.e2e.conftest import Live, e2e_settings
from tests.support.pdf import make_pdf

ADMIN = (("x-user-id", "ops"), ("x-user-role", "ADMIN"))

GLACIERS = (
    "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts. "
    "Over centuries the weight of the snow compresses it into dense ice that flows downhill under gravity."
)
VOLCANO = "Volcanoes erupt when molten rock rises through the crust. Lava flows can bury towns and reshape coastlines."
LONG_TEXT = " ".join(
    f"The committee reviewed item {i} of the annual report and approved the budget for regional libraries."
    for i in range(12)
)
#: a document stored before each refused call, which it must leave as it was
INTACT = "Lighthouses guide ships past the reef with a lamp that turns all night."


def _doc(doc_id: str, text: str, **kw: object) -> pb.DocumentInput:
    return pb.DocumentInput(document_id=doc_id, filename=f"{doc_id}.txt", content=text.encode(), **kw)  # type: ignore[arg-type]


@pytest_asyncio.fixture(scope="module")
async def corpus(live: Live) -> None:
    """The documents several tests query, stored once on the module's server. Each test that reads
    them requests this rather than counting on a test before it to have stored them, so that it
    passes run alone and in any order."""
    stored = await live.stub.IngestDocuments(
        pb.IngestDocumentsRequest(
            documents=[
                _doc("volcanoes", VOLCANO, title="Volcanoes"),
                _doc("volcanoes-copy", VOLCANO, title="Volcanoes (mirror)"),
                _doc("minutes", LONG_TEXT, title="Minutes"),
            ]
        ),
        metadata=ADMIN,
    )
    assert sorted(d.document_id for d in stored.documents) == ["minutes", "volcanoes", "volcanoes-copy"] and not stored.errors


async def _intact(live: Live) -> list[tuple[str, str, str]]:
    """The stored document "intact" as a query finds it (not from the cache): id, text and title."""
    found = await live.stub.Query(pb.QueryRequest(query="lighthouse reef lamp", use_cache=False, filters=pb.QueryFilters(document_ids=["intact"])))
    return [(c.document_id, c.content, c.metadata.title) for c in found.contexts]


async def _reflect(live: Live, **request: str) -> reflection_pb2.ServerReflectionResponse:
    stub = reflection_pb2_grpc.ServerReflectionStub(live.channel)
    responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(**request)]))
    return [r async for r in responses][0]


async def test_standard_health_service(live: Live) -> None:
    stub = health_pb2_grpc.HealthStub(live.channel)
    for service in ("", "retrieval.v1.RetrievalService"):
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize(
    "symbol",
    [
        "retrieval.v1.RetrievalService",
        "retrieval.v1.RetrievalService.Query",
        "retrieval.v1.RetrievalService.Search",
        "retrieval.v1.QueryRequest",
        "retrieval.v1.Context",
    ],
)
async def test_reflection_resolves_services_methods_and_messages(live: Live, symbol: str) -> None:
    """The lookups ghz makes for --call retrieval.v1.RetrievalService/Query without --proto."""
    resp = await _reflect(live, file_containing_symbol=symbol)
    assert resp.WhichOneof("message_response") == "file_descriptor_response", resp
    from google.protobuf import descriptor_pb2

    names = [descriptor_pb2.FileDescriptorProto.FromString(b).name for b in resp.file_descriptor_response.file_descriptor_proto]
    assert "retrieval/v1/retrieval.proto" in names


async def test_reflection_lists_services_and_rejects_unknown_symbols(live: Live) -> None:
    listed = await _reflect(live, list_services="")
    assert {s.name for s in listed.list_services_response.service} >= {
        "retrieval.v1.RetrievalService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    missing = await _reflect(live, file_containing_symbol="retrieval.v1.RetrievalService.Nope")
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


async def test_health_rpc_reports_components(live: Live) -> None:
    resp = await live.stub.Health(pb.HealthRequest())
    # A fresh default install does not look broken: what is not configured is said so, not DEGRADED.
    assert resp.status == pb.SERVING_STATUS_SERVING
    assert {c.name: c.status for c in resp.components} == {
        "vector_store": pb.SERVING_STATUS_SERVING,
        "disk": pb.SERVING_STATUS_SERVING,
        "metadata_store": pb.SERVING_STATUS_SERVING,
        "embedder": pb.SERVING_STATUS_SERVING,
        "cache": pb.SERVING_STATUS_SERVING,
        "reranker": pb.SERVING_STATUS_NOT_CONFIGURED,
        "llm": pb.SERVING_STATUS_NOT_CONFIGURED,
        "auth": pb.SERVING_STATUS_NOT_CONFIGURED,
    }
    assert "NOT authenticated" in {c.name: c.detail for c in resp.components}["auth"]
    assert "not configured" in {c.name: c.detail for c in resp.components}["reranker"]


async def test_health_answers_within_the_calls_deadline_when_a_store_does_not(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen store's ping was waited for 5 s whatever the caller's deadline: a caller allowing
    less got DEADLINE_EXCEEDED instead of the report, which says NOT_SERVING. The server stalls
    for 0.2 s when the probe's bound fires, as a loaded machine does: the 50 ms a query keeps to
    send its answer was too little for the report to get out (seen on a busy CI machine)."""
    pinged, thawed = asyncio.Event(), asyncio.Event()

    async def frozen() -> None:
        pinged.set()
        try:
            await thawed.wait()
        except asyncio.CancelledError:
            time.sleep(0.2)  # the whole event loop stalls, as on a busy machine
            raise

    monkeypatch.setattr(live.running.app.metadata, "ping", frozen)
    try:
        resp = await live.stub.Health(pb.HealthRequest(), timeout=4.0)
    finally:
        thawed.set()
    components = {c.name: c for c in resp.components}
    assert pinged.is_set() and resp.status == pb.SERVING_STATUS_NOT_SERVING
    assert components["metadata_store"].status == pb.SERVING_STATUS_NOT_SERVING
    assert components["metadata_store"].detail == "no answer within the call's deadline"
    assert components["vector_store"].status == pb.SERVING_STATUS_SERVING


async def test_empty_index_answers_with_no_contexts(tmp_path: Path) -> None:
    running = await start_server(e2e_settings(tmp_path))
    try:
        async with AsyncRetrievalClient(f"127.0.0.1:{running.port}") as client:
            resp = await client.query("anything at all")
            assert list(resp.contexts) == [] and resp.metrics.total_ms > 0
            assert list((await client.search("anything")).results) == []
    finally:
        await running.stop(1.0)


async def test_the_request_limit_does_not_cap_answers(tmp_path: Path) -> None:
    """RETRIEVAL_MAX_MESSAGE_MB bounds what a caller may send. An answer is bounded by
    RETRIEVAL_MAX_RESPONSE_BYTES, so capping it by the request limit too would turn a valid query
    into RESOURCE_EXHAUSTED after all its work once an operator lowers the request limit."""
    # The least request limit that loads (a 1 MiB document in 2 MiB), and answers of more than it.
    settings = load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=tmp_path, max_message_mb=2, max_document_bytes=1024 * 1024,
                             top_k_max=200)
    running = await start_server(settings)
    try:
        metadata = {f"key{i}": "v" * 1_000 for i in range(12)}  # 12 KB a document, carried by each context
        docs = [DocumentSource(document_id=f"d{i}", filename=f"d{i}.txt", content=f"Tidal note {i} on moon and sea.".encode(),
                               metadata=metadata, access=Access.PUBLIC) for i in range(200)]
        assert not (await running.app.ingest(docs)).errors
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}", options=[("grpc.max_receive_message_length", -1)]) as channel:
            stub = pb_grpc.RetrievalServiceStub(channel)
            resp = await stub.Query(pb.QueryRequest(query="tidal note moon sea", top_k=200, rerank=False))
            assert len(resp.contexts) == 200 and resp.ByteSize() > 2 * 1024 * 1024
            with pytest.raises(grpc.aio.AioRpcError) as err:  # the request limit still holds
                await stub.Query(pb.QueryRequest(query="x" * (2 * 1024 * 1024 + 1)))
            assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        await running.stop(1.0)


async def test_an_answer_over_the_response_limit_leaves_out_its_last_contexts(tmp_path: Path) -> None:
    """Documents within every limit of their own made 100 contexts of 4.9 MB, which a client
    reading gRPC's default 4 MiB refused whole: past RETRIEVAL_MAX_RESPONSE_BYTES the last
    contexts are left out, a GENERATION answer's too, and the answer says so, as the degradations
    metric does."""
    limit = 65_536
    running = await start_server(e2e_settings(tmp_path).model_copy(update={"max_response_bytes": limit}))
    try:
        metadata = {f"key{i}": "v" * 1_000 for i in range(12)}  # 12 KB a document, carried by each context
        docs = [DocumentSource(document_id=f"d{i}", filename=f"d{i}.txt", content=f"Tidal note {i} on moon and sea.".encode(),
                               metadata=metadata, access=Access.PUBLIC) for i in range(20)]
        assert not (await running.app.ingest(docs)).errors
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.RetrievalServiceStub(channel)
            for _ in range(3):  # computed, from the cache, and (were it remembered) served again: each says it was cut
                resp = await stub.Query(pb.QueryRequest(query="tidal note moon sea", top_k=20, rerank=False))
                assert 1 <= len(resp.contexts) < 20 and resp.ByteSize() <= limit and "response:contexts_capped" in resp.metrics.degraded
            streamed = [m async for m in stub.StreamQuery(pb.StreamQueryRequest(query=pb.QueryRequest(query="tidal note moon sea", top_k=20, rerank=False)))]
            assert streamed[-1].response.ByteSize() <= limit and "response:contexts_capped" in streamed[-1].response.metrics.degraded
            written = await stub.Query(pb.QueryRequest(query="tidal note moon sea", top_k=20, rerank=False, mode=pb.MODE_GENERATION))
            assert written.answer.text and 1 <= len(written.contexts) < 20 and written.ByteSize() <= limit
            assert "response:contexts_capped" in written.metrics.degraded
        capped = running.app.metrics.registry.get_sample_value("retrieval_degradations_total", {"kind": "response:contexts_capped"})
        assert capped == 5  # three Query calls, one stream, one GENERATION
    finally:
        await running.stop(1.0)


async def test_a_search_answer_lists_the_results_that_fit_and_counts_the_others(tmp_path: Path) -> None:
    """Search's answer had no bound: at SEARCH_TOP_K_MAX's largest, 1,000 results of documents
    within their own limits (an 8 KB url each) made about 9 MB, which a client reading gRPC's
    default 4 MiB refused whole. Its last results past RETRIEVAL_MAX_RESPONSE_BYTES are left out,
    and counted, as an ingest's documents are."""
    limit = 65_536
    running = await start_server(e2e_settings(tmp_path).model_copy(update={"max_response_bytes": limit, "search_top_k_max": 40}))
    try:
        docs = [DocumentSource(document_id=f"d{i}", filename=f"d{i}.txt", content=f"Tidal note {i} on moon and sea.".encode(),
                               url=f"https://tides.example/{i}/" + "u" * 4_000, access=Access.PUBLIC) for i in range(40)]
        assert not (await running.app.ingest(docs)).errors
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.RetrievalServiceStub(channel)
            resp = await stub.Search(pb.SearchRequest(query="tidal note moon sea", top_k=40))
            assert resp.ByteSize() <= limit and 1 <= len(resp.results) < 40
            assert len(resp.results) + resp.results_not_listed == 40
            whole = await stub.Search(pb.SearchRequest(query="tidal note moon sea", top_k=5))  # within the limit: all of it
            assert len(whole.results) == 5 and whole.results_not_listed == 0
            assert [r.document_id for r in whole.results] == [r.document_id for r in resp.results[:5]]
    finally:
        await running.stop(1.0)


async def test_an_ingest_answer_lists_the_stored_documents_that_fit_and_counts_the_others(tmp_path: Path) -> None:
    """A JSONL file of 21,000 rows answered 4.4 MB: a client reading gRPC's default 4 MiB refused
    it, every row stored."""
    limit = 65_536
    running = await start_server(e2e_settings(tmp_path).model_copy(update={"max_response_bytes": limit}))
    try:
        rows = "\n".join(json.dumps({"_id": f"row-{i:05d}-" + "x" * 100, "text": f"Row {i} of the ledger."}) for i in range(1_500))
        rows += "\n" + json.dumps({"_id": "", "text": "no id"})  # an error, listed first
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.RetrievalServiceStub(channel)
            resp = await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="rows.jsonl", content=rows.encode())]),
                                              metadata=ADMIN)
        assert resp.ByteSize() <= limit and len(resp.errors) == 1
        assert 100 < len(resp.documents) < 1_500 and len(resp.documents) + resp.documents_not_listed == 1_500
        assert [d.document_id for d in resp.documents] == [f"row-{i:05d}-" + "x" * 100 for i in range(len(resp.documents))]
        assert await running.app.metadata.count_documents() == 1_500
        # Errors take their part of it too, each cut to length: 100 rows whose ids are pasted text
        # (130 KB each, 4 KB here) answered 13.5 MB.
        def pasted(f: int) -> pb.DocumentInput:
            rows = [json.dumps({"_id": f"{f}-{i} " + "pasted text " * 350, "text": "x"}) for i in range(100)]
            return pb.DocumentInput(filename=f"pasted{f}.jsonl", content="\n".join([*rows, json.dumps({"_id": f"fine{f}", "text": "Fine."})]).encode())

        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.RetrievalServiceStub(channel)
            resp = await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[pasted(f) for f in range(3)]), metadata=ADMIN)
        assert resp.ByteSize() <= limit and len(resp.documents) + resp.documents_not_listed == 3
        assert all(len(e.source.encode()) <= 300 for e in resp.errors) and 100 < len(resp.errors) < 300
        assert resp.errors[-1].source == "" and resp.errors[-1].reason == f"{300 - (len(resp.errors) - 1)} more errors"
    finally:
        await running.stop(1.0)


async def test_ingest_query_search_reingest_delete(live: Live, corpus: None) -> None:
    # Ids the shared corpus does not hold: what the ingest reports is of documents new to the server, whichever ran first.
    ingest = await live.stub.IngestDocuments(
        pb.IngestDocumentsRequest(
            documents=[
                _doc("glaciers", GLACIERS, title="Glaciers", url="http://example/glaciers", metadata={"topic": "ice"}),
                pb.DocumentInput(filename="regs.pdf", content=make_pdf(["Cover page.", "Graduation requires 120 credits."], "Regulations")),
                pb.DocumentInput(filename="broken.pdf", content=b"%PDF-1.4 junk"),
            ]
        ),
        metadata=ADMIN,
    )
    assert sorted((d.document_id, d.replaced) for d in ingest.documents) == [("glaciers", False), ("regs", False)]
    assert [(e.source, bool(e.reason)) for e in ingest.errors] == [("broken.pdf", True)]

    resp = await live.stub.Query(pb.QueryRequest(query="how do rivers of ice form?", top_k=2))
    top = resp.contexts[0]
    assert (top.document_id, top.parent_chunk_id, top.metadata.title, top.metadata.url) == (
        "glaciers", "glaciers#p0", "Glaciers", "http://example/glaciers"
    )
    assert top.metadata.extra["topic"] == "ice" and top.tokens > 0 and top.child_chunks
    assert top.score == pytest.approx(top.child_chunks[0].score)
    assert len(resp.contexts) == 2
    stages = [s.stage for s in resp.metrics.stages]
    assert stages[:8] == ["build_access_filter", "check_cache", "analyze_query", "retrieve", "fuse", "rerank", "enrich", "check_sufficiency"]
    assert stages[-2:] == ["select", "update_cache"]
    assert resp.metrics.iterations >= 1 and not resp.cached
    assert "rerank:unavailable" in resp.metrics.degraded  # no cross-encoder configured in this test

    pdf = await live.stub.Query(pb.QueryRequest(query="how many credits to graduate", top_k=1))
    assert (pdf.contexts[0].document_id, pdf.contexts[0].metadata.page) == ("regs", 2)

    search = await live.stub.Search(pb.SearchRequest(query="molten rock eruptions", top_k=5))
    texts = [r.text for r in search.results]
    assert len(texts) == len(set(texts)), "duplicate texts must be removed"
    assert search.results[0].document_id in {"volcanoes", "volcanoes-copy"}
    assert search.results[0].title.startswith("Volcanoes")
    long = await live.stub.Search(pb.SearchRequest(query="committee approved the library budget", top_k=1))
    assert long.results[0].document_id == "minutes" and len(long.results[0].text) == 800

    v2 = pb.IngestDocumentsRequest(documents=[_doc("glaciers", "Glaciers retreat as the climate warms.", title="Glaciers v2")])
    again = await live.stub.IngestDocuments(v2, metadata=ADMIN)
    assert again.documents[0].replaced and not again.documents[0].unchanged
    # Sent as it is stored: left so, and said so (it was told from a rewrite nowhere on the wire).
    same = await live.stub.IngestDocuments(v2, metadata=ADMIN)
    assert same.documents[0].replaced and same.documents[0].unchanged
    resp = await live.stub.Query(pb.QueryRequest(query="glaciers", top_k=5))
    glacier_contexts = [c for c in resp.contexts if c.document_id == "glaciers"]
    assert len(glacier_contexts) == 1 and glacier_contexts[0].metadata.title == "Glaciers v2"

    deleted = await live.stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=["glaciers", "ghost"]), metadata=ADMIN)
    assert (list(deleted.deleted), list(deleted.not_found)) == (["glaciers"], ["ghost"])
    resp = await live.stub.Query(pb.QueryRequest(query="glaciers", top_k=5))
    assert "glaciers" not in {c.document_id for c in resp.contexts}


async def test_document_filter_and_private_access(live: Live, corpus: None) -> None:
    await live.stub.IngestDocuments(
        pb.IngestDocumentsRequest(documents=[_doc("diary", "My private diary about sailing boats.", access=pb.ACCESS_PRIVATE, owner_id="alice")]),
        metadata=ADMIN,
    )
    anon = await live.stub.Query(pb.QueryRequest(query="sailing boats diary", top_k=10))
    assert "diary" not in {c.document_id for c in anon.contexts}
    alice = await live.stub.Query(pb.QueryRequest(query="sailing boats diary", top_k=10), metadata=(("x-user-id", "alice"),))
    assert alice.contexts[0].document_id == "diary"
    only = await live.stub.Query(
        pb.QueryRequest(query="sailing boats diary", top_k=10, filters=pb.QueryFilters(document_ids=["volcanoes"]))
    )
    assert {c.document_id for c in only.contexts} == {"volcanoes"}


@pytest.mark.parametrize(
    ("rpc", "request_", "needle"),
    [
        ("Query", pb.QueryRequest(query="   "), "query must be at least 1 characters after trimming"),
        ("Query", pb.QueryRequest(query="é" * 32_769), "query must be at most 65536 bytes in UTF-8 after trimming (got 65538)"),
        ("Query", pb.QueryRequest(query="ok", top_k=101), "top_k must be between 1 and 100"),
        ("Query", pb.QueryRequest(query="ok", top_k=-3), "top_k must be between 1 and 100"),
        ("Query", pb.QueryRequest(query="ok", strategy=42), "strategy has unknown value 42 (one of STRATEGY_UNSPECIFIED=0, STRATEGY_SEMANTIC=1,"),
        ("Query", pb.QueryRequest(query="ok", filters=pb.QueryFilters(document_ids=["a", " "])), "filters.document_ids[1] must be 1 to 200 characters after trimming (got 0)"),
        ("Query", pb.QueryRequest(query="\u200b\u200c\u200d\ufeff \u2060"), "query must be at least 1 characters after trimming (got 0)"),
        ("DeleteDocuments", pb.DeleteDocumentsRequest(document_ids=["a\x07b"]), "document_ids[0] must not contain control characters"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="big.txt", content=b"x" * (2 * 1024 * 1024 + 1))]),
         "documents[0].content is 2097153 bytes; at most 2097152 are accepted (RETRIEVAL_MAX_DOCUMENT_BYTES)"),
        ("Search", pb.SearchRequest(query="ok", top_k=21), "top_k must be between 1 and 20"),
        ("Search", pb.SearchRequest(query=""), "query must be at least 1 characters"),
        # Control characters alone, untrimmed, tokenize to nothing: such a query was answered with arbitrary documents.
        ("Query", pb.QueryRequest(query="\x00"), "query must hold at least 1 visible character after trimming (got 1: "),
        ("Search", pb.SearchRequest(query="\x01\x02\x1f"), "query must hold at least 1 visible character after trimming (got 2: "),  # \x1f is white space
        ("IngestDocuments", pb.IngestDocumentsRequest(), "documents must not be empty"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE)]), "documents[0].owner_id is required"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt")]), "documents[0].content must not be empty"),
        # A blank owner is no owner: the document would be private and nobody's.
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id=" \u200b ")]),
         "documents[0].owner_id is required"),
        # What a document says about itself comes back with every context citing it: bounded.
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", title="t" * 1_025)]),
         "documents[0].title must be at most 1024 characters (got 1025)"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", url="u" * 8_193)]),
         "documents[0].url must be at most 8192 characters (got 8193)"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", source="s" * 1_025)]),
         "documents[0].source must be at most 1024 characters (got 1025)"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a" * 1_021 + ".txt", content=b"x")]),
         "documents[0].filename must be at most 1024 characters (got 1025)"),
        # Counted as stored: NFC makes U+0958 two code points.
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", source="\u0958" * 1_000)]),
         "documents[0].source must be at most 1024 characters (got 2000)"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"x", metadata={"note": "é" * 8_191})]),
         "documents[0].metadata must be at most 16384 bytes of UTF-8 in its keys and values (got 16386)"),
        ("IngestDocuments", pb.IngestDocumentsRequest(documents=[pb.DocumentInput(
            filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=[f"u{i}" for i in range(1_001)])]),
         "documents[0].granted_user_ids must hold at most 1000 users (got 1001)"),
        ("DeleteDocuments", pb.DeleteDocumentsRequest(), "document_ids must not be empty"),
    ],
)
async def test_invalid_arguments_name_field_and_limit(live: Live, rpc: str, request_: object, needle: str) -> None:
    await live.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[_doc("intact", INTACT, title="Reef Light")]), metadata=ADMIN)
    stored = await _intact(live)
    assert stored == [("intact", INTACT, "Reef Light")]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await getattr(live.stub, rpc)(request_, metadata=ADMIN)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in err.value.details()
    # The server keeps serving, and what was stored is intact.
    assert (await live.stub.Health(pb.HealthRequest())).status != pb.SERVING_STATUS_NOT_SERVING
    assert await _intact(live) == stored


async def test_many_invalid_fields_or_a_long_header_still_reach_the_caller_as_invalid_argument(live: Live) -> None:
    """The message and the BadRequest travel in trailers, which a gRPC C-core client refuses over
    8 KiB: a thousand empty documents, or a role header of 5,000 characters echoed whole, reached
    the caller as RESOURCE_EXHAUSTED ("Stream removed"), no field named."""
    empty = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename=f"d{i}.txt") for i in range(1_000)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.IngestDocuments(empty, metadata=ADMIN)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("documents[0].content must not be empty; documents[1].content")
    assert err.value.details().endswith("; and 997 more")
    status = rpc_status.from_call(err.value)
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    listed = [(v.field, v.description) for v in bad.field_violations]
    assert listed[0] == ("documents[0].content", "documents[0].content must not be empty")
    assert listed[-1][0] == "" and listed[-1][1] == f"{1_000 - len(listed) + 1} more invalid fields"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(pb.QueryRequest(query="ok"), metadata=(("x-user-role", "W" * 5_000),))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details().startswith("x-user-role must be one of")
    assert len(err.value.details()) < 200
    assert (await live.stub.Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING


async def test_a_caller_of_as_many_groups_as_allowed_is_served_and_one_more_is_named(live: Live, corpus: None) -> None:
    """gRPC's 8 KiB of metadata refused 400 ordinary group names at random, RESOURCE_EXHAUSTED
    naming nothing, long before the limit of 1,000 that names the header."""
    from retrieval_server.identifiers import MAX_GROUPS, MAX_USER_ID_CHARS

    longest = ",".join(f"{i:04d}" + "g" * (MAX_USER_ID_CHARS - 4) for i in range(MAX_GROUPS))
    resp = await live.stub.Query(pb.QueryRequest(query="molten rock", top_k=3), metadata=(("x-user-id", "alice"), ("x-user-groups", longest)))
    # The two copies of one text are one context: either may be it.
    assert {"volcanoes", "volcanoes-copy"} & {c.document_id for c in resp.contexts}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(pb.QueryRequest(query="molten rock"),
                              metadata=(("x-user-id", "alice"), ("x-user-groups", ",".join(f"g{i}" for i in range(MAX_GROUPS + 1)))))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "x-user-groups must name at most 1000 groups" in err.value.details()


async def test_an_identity_header_at_its_limit_is_read_and_one_byte_more_is_named(live: Live) -> None:
    """gRPC held a call's whole metadata to one header's limit, and reset a call with a header at
    it (RESOURCE_EXHAUSTED, naming nothing) before the check that names the header could run."""
    from retrieval_server.api.identity import MAX_IDENTITY_HEADER_BYTES
    from retrieval_server.identifiers import MAX_GROUPS, MAX_USER_ID_CHARS

    longest = ",".join(f"{i:04d}" + "g" * (MAX_USER_ID_CHARS - 4) for i in range(MAX_GROUPS))
    # Empty items are no group: the most groups a caller may name, padded to the limit.
    at_limit = longest + "," * (MAX_IDENTITY_HEADER_BYTES - len(longest))
    padded_user = "alice" + " " * (MAX_IDENTITY_HEADER_BYTES - len("alice"))
    padded_role = "USER" + " " * (MAX_IDENTITY_HEADER_BYTES - len("USER"))
    # All three at their limit at once: the transport's limit is above their sum.
    metadata = (("x-user-id", padded_user), ("x-user-role", padded_role), ("x-user-groups", at_limit))
    resp = await live.stub.Query(pb.QueryRequest(query="molten rock", top_k=3), metadata=metadata)
    assert resp.metrics.total_ms > 0
    for header, value in metadata:
        sent = tuple((k, v + "," if k == header else v) for k, v in metadata)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await live.stub.Query(pb.QueryRequest(query="molten rock"), metadata=sent)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (header, err.value.details())
        assert err.value.details() == f"{header} must be at most {MAX_IDENTITY_HEADER_BYTES} bytes (got {MAX_IDENTITY_HEADER_BYTES + 1})"
        status = rpc_status.from_call(err.value)
        bad = error_details_pb2.BadRequest()
        assert status is not None and status.details[0].Unpack(bad)
        assert [v.field for v in bad.field_violations] == [header]


async def test_admin_rpcs_need_an_admin_role(live: Live, corpus: None) -> None:
    # Without credentials the caller is not authenticated; with a user id but no role, not allowed.
    for md, code in (((), grpc.StatusCode.UNAUTHENTICATED), ((("x-user-id", "alice"),), grpc.StatusCode.PERMISSION_DENIED)):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await live.stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=["volcanoes"]), metadata=md)
        assert err.value.code() == code
    resp = await live.stub.Query(pb.QueryRequest(query="molten rock", top_k=3, filters=pb.QueryFilters(document_ids=["volcanoes"])))
    assert {c.document_id for c in resp.contexts} == {"volcanoes"}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(pb.QueryRequest(query="ok"), metadata=(("x-user-role", "wizard"),))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "x-user-role" in err.value.details()


async def test_sync_client_and_concurrent_calls(live: Live, corpus: None) -> None:
    def sync_calls() -> tuple[int, int]:
        with RetrievalClient(live.target) as client:
            return len(client.query("volcano lava", top_k=2).contexts), len(client.search("volcano lava", top_k=2).results)

    assert await asyncio.to_thread(sync_calls) == (2, 2)
    async with AsyncRetrievalClient(live.target) as client:
        answers = await asyncio.gather(*(client.query(f"lava flows {i}", top_k=3) for i in range(16)))
    assert all(a.contexts for a in answers)


async def test_fusion_choice_and_suggestions_cross_the_wire(live: Live, corpus: None) -> None:
    weighted = await live.stub.Query(pb.QueryRequest(query="molten rock lava", top_k=2, strategy=pb.STRATEGY_HYBRID, fusion=pb.FUSION_WEIGHTED))
    assert weighted.contexts[0].document_id in {"volcanoes", "volcanoes-copy"}
    assert weighted.metrics.strategy_used == pb.STRATEGY_HYBRID
    empty = await live.stub.Query(
        pb.QueryRequest(query="volcanoes", top_k=2, strategy=pb.STRATEGY_KEYWORD, filters=pb.QueryFilters(document_ids=["nothing-here"]))
    )
    assert list(empty.contexts) == [] and "remove the document filter" in empty.suggestions
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(pb.QueryRequest(query="ok", fusion=9))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "fusion" in err.value.details()


@pytest.mark.parametrize(
    ("method", "message"),
    [("/retrieval.v1.RetrievalService/Query", "QueryRequest"), ("/grpc.health.v1.Health/Check", "HealthCheckRequest")],
)
async def test_undecodable_requests_are_invalid_argument(live: Live, method: str, message: str) -> None:
    """Bytes that are not the method's message: INVALID_ARGUMENT with a plain message, and the server goes on."""
    call = live.channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    for garbage in (b"\xff\xff\xff\xff", b"\x0a\x05ab", bytes(range(256))):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(garbage)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == f"the request is not a valid {message} protobuf message"
    assert (await live.stub.Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING


async def test_requests_too_heavy_to_parse_are_refused_before_parsing(live: Live) -> None:
    """Parsing takes 16 to 80 times the wire size for messages of many small entries, and runs
    before authentication: a Query over MAX_REQUEST_BYTES, or an ingest of more documents than a
    request may hold (an unknown group before them included), is refused on its size or its count
    on the wire, and the server goes on."""
    from retrieval_server.api.undecodable import MAX_REQUEST_BYTES

    empty_ids = pb.QueryRequest(query="ok", filters=pb.QueryFilters(document_ids=[""] * (MAX_REQUEST_BYTES // 2 + 1)))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(empty_ids)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"the request is {empty_ids.ByteSize()} bytes; this method reads at most {MAX_REQUEST_BYTES}"
    limit = live.running.app.settings.max_documents_per_request
    many = pb.IngestDocumentsRequest(documents=[pb.DocumentInput() for _ in range(limit + 1)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.IngestDocuments(many)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"documents may list at most {limit} files (RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST)"
    ingest = live.channel.unary_unary("/retrieval.v1.RetrievalService/IngestDocuments", request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await ingest(b"\x9b\x06\x9c\x06" + many.SerializeToString())  # an unknown group, which the parser takes
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "the request is not a valid IngestDocumentsRequest protobuf message"
    crowded = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(document_id="d", content=b"x", granted_user_ids=[""] * 200_000)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.IngestDocuments(crowded)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("the documents may hold at most 100016 fields in all, each granted user and metadata entry counting one")
    # With its google.rpc.BadRequest naming the field, as every INVALID_ARGUMENT (it came without).
    status = rpc_status.from_call(err.value)
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad) and [(v.field, v.description) for v in bad.field_violations] == [("documents", err.value.details())]
    assert (await live.stub.Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING


def test_the_wire_count_agrees_with_the_parser_and_takes_as_many_steps() -> None:
    from hypothesis import given, settings, strategies as st

    from retrieval_server.api.undecodable import weigh_ingest

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.text(max_size=30), max_size=12), st.integers(1, 12))
    def agree(ids: list[str], limit: int) -> None:
        request = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(document_id=i, content=i.encode(), metadata={i: i}) for i in ids])
        assert (weigh_ingest(request.SerializeToString(), limit) is None) is (len(ids) <= limit)

    agree()
    invalid = "the request is not a valid IngestDocumentsRequest protobuf message"
    documents = pb.IngestDocumentsRequest(documents=[pb.DocumentInput(document_id=str(i)) for i in range(5)]).SerializeToString()
    # What the parser would take and read on past (an unknown group first, or within a document),
    # or take its time over (a varint of a megabyte, a megabyte of unknown fields), is not the message.
    assert weigh_ingest(b"\x9b\x06\x9c\x06" + documents, 1_000) == invalid
    assert weigh_ingest(documents + b"\x0a\x04\x9b\x06\x9c\x06", 1_000) == invalid
    assert weigh_ingest(b"\x08" + b"\xff" * 1_000_000, 1_000) == invalid
    assert weigh_ingest(b"\x10\x00" * 4_000_000, 1_000).startswith("documents may list at most 1000 files")  # in 1,001 steps
    assert weigh_ingest(b"\x0a\x05ab", 1_000) == invalid  # a length past the end
    assert weigh_ingest(documents + b"\x0a\x02\x52\x05", 1_000) == invalid  # within a document too


def test_the_fields_within_the_documents_of_an_ingest_are_counted_before_parsing() -> None:
    """Grantees and metadata entries are parsed before they are counted, at 17 times their wire
    size for empty ones: the documents of one request hold FIELDS_PER_DOCUMENT fields each and
    SHARED_FIELDS more among them, counted on the wire in as many steps."""
    from retrieval_server.api.undecodable import FIELDS_PER_DOCUMENT, SHARED_FIELDS, weigh_ingest

    def request(grantees: int, entries: int, documents: int = 1) -> bytes:
        # Eight fields set besides, each once, as a client sends them.
        doc = pb.DocumentInput(document_id="d", filename="d.txt", content=b"x", title="t", url="u", source="s", access=pb.ACCESS_PRIVATE, owner_id="o")
        first = pb.DocumentInput(granted_user_ids=[""] * grantees, metadata={str(i): "" for i in range(entries)})
        first.MergeFrom(doc)
        return pb.IngestDocumentsRequest(documents=[first] + [doc] * (documents - 1)).SerializeToString()

    shared = SHARED_FIELDS + FIELDS_PER_DOCUMENT - 8  # what one document may hold beyond its eight
    assert weigh_ingest(request(shared // 2, shared - shared // 2), 1_000) is None
    refused = weigh_ingest(request(shared // 2, shared - shared // 2 + 1), 1_000)
    assert refused is not None and refused.startswith(f"the documents may hold at most {SHARED_FIELDS + FIELDS_PER_DOCUMENT} fields in all")
    # Each further document brings its own share.
    assert weigh_ingest(request(shared + FIELDS_PER_DOCUMENT - 8, 0, documents=2), 1_000) is None
    assert weigh_ingest(request(shared + FIELDS_PER_DOCUMENT - 7, 0, documents=2), 1_000) is not None


def test_the_request_size_follows_the_settings_that_make_requests_larger() -> None:
    """A query of the longest text the settings allow, with a filter of the most and longest ids,
    fits in half: raising QUERY_MAX_BYTES or MAX_DOCUMENTS_PER_REQUEST raises it."""
    from retrieval_server.api.undecodable import MAX_REQUEST_BYTES, request_bytes

    assert request_bytes(65_536, 1_000) == MAX_REQUEST_BYTES
    biggest = pb.QueryRequest(query="字" * (4_194_304 // 3), filters=pb.QueryFilters(document_ids=["字" * 200] * 5_000))
    assert 2 * biggest.ByteSize() <= request_bytes(4_194_304, 5_000) * 1.01


async def test_stream_query_violations_name_fields_by_their_path_in_the_request(live: Live) -> None:
    """StreamQueryRequest wraps the QueryRequest in its field `query`: BadRequest's field paths start
    there, as every other RPC's name the field from the top of its request."""
    request = pb.StreamQueryRequest(
        query=pb.QueryRequest(query=" ", top_k=500, strategy=42, mode=9, fusion=7, filters=pb.QueryFilters(document_ids=["ok", " "]))
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in live.stub.StreamQuery(request):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(err.value)
    assert status is not None
    [packed] = status.details
    bad = error_details_pb2.BadRequest()
    assert packed.Unpack(bad)
    assert [v.field for v in bad.field_violations] == [
        "query.query", "query.top_k", "query.strategy", "query.mode", "query.fusion", "query.filters.document_ids[1]"
    ]
    assert "query.top_k must be between 1 and 100 (got 500" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in live.stub.StreamQuery(pb.StreamQueryRequest(query=pb.QueryRequest(query="\x7f"))):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("query.query must hold at least 1 visible character after trimming")


@pytest.mark.parametrize(
    ("metadata", "header"),
    [
        ((("x-user-id", "ops"), ("x-user-role", "USER"), ("x-user-role", "ADMIN")), "x-user-role"),
        ((("x-user-id", "alice"), ("x-user-id", "ops"), ("x-user-role", "ADMIN")), "x-user-id"),
    ],
)
async def test_an_identity_header_sent_twice_is_refused(live: Live, metadata: tuple[tuple[str, str], ...], header: str) -> None:
    """Two values for who is calling: neither is believed (the last one used to be, whoever sent it)."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=["no-such-document"]), metadata=metadata)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"{header} must be sent at most once"


async def test_a_compressed_request_is_refused_before_it_is_inflated(live: Live) -> None:
    """gRPC inflated a compressed request whole, on the event loop and before the size check and
    authentication: 64 KB of gzip from a caller without credentials made 63 MiB. Only identity is
    accepted, and the server answers the next call."""
    # Long enough that gzip makes it smaller: a message it would not shrink is sent as it is.
    compressible = pb.QueryRequest(query="lighthouse reef lamp " * 1_000)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await live.stub.Query(compressible, compression=grpc.Compression.Gzip)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert err.value.details() == "Compression algorithm 'gzip' is disabled."
    assert (await live.stub.Query(pb.QueryRequest(query="molten rock"))).query == "molten rock"


async def test_one_connection_carries_at_most_max_streams_per_connection_calls_at_once(live: Live) -> None:
    """gRPC allowed any number of calls at once on a connection: 1,000 Query streams stalled on one
    held 1 GB. The limit is advertised (gRPC's clients wait for a stream to end before opening one
    past it), and a stream opened past it all the same is refused, the ones before it served."""
    from retrieval_server.server import MAX_STREAMS_PER_CONNECTION
    from tests.support.http2 import HEADERS, REFUSED_STREAM, RST_STREAM, SETTINGS_MAX_CONCURRENT_STREAMS, Http2Caller

    def crowd() -> tuple[int | None, set[int], tuple[int, bytes]]:
        caller = Http2Caller(live.running.port)
        try:
            watches = {caller.call("/grpc.health.v1.Health/Watch", b"") for _ in range(MAX_STREAMS_PER_CONNECTION)}
            one_more = caller.call("/grpc.health.v1.Health/Watch", b"")
            answered, last = set(), None
            while last is None or answered != watches:
                kind, _, stream, payload = caller.read_frame()
                if stream == one_more and last is None:
                    last = (kind, payload)
                elif stream in watches and kind == HEADERS:
                    answered.add(stream)
            return caller.settings.get(SETTINGS_MAX_CONCURRENT_STREAMS), answered, last
        finally:
            caller.close()

    advertised, answered, last = await asyncio.to_thread(crowd)
    assert advertised == MAX_STREAMS_PER_CONNECTION
    assert last == (RST_STREAM, REFUSED_STREAM.to_bytes(4, "big"))
    assert (await live.stub.Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING


@pytest.mark.parametrize("method", ["Check", "Watch"])
async def test_a_health_service_name_longer_than_any_served_is_refused(live: Live, method: str) -> None:
    """A Watch holds its request as long as it lasts, an unknown service's too: 150 of 1.9 MB
    names held 900 MB for a caller without credentials."""
    from retrieval_server.server import MAX_HEALTH_SERVICE_CHARS

    stub = health_pb2_grpc.HealthStub(live.channel)
    served = health_pb2.HealthCheckRequest(service="retrieval.v1.RetrievalService")
    assert len(served.service) == MAX_HEALTH_SERVICE_CHARS
    too_long = health_pb2.HealthCheckRequest(service="s" * (MAX_HEALTH_SERVICE_CHARS + 1))
    if method == "Check":
        assert (await stub.Check(served)).status == health_pb2.HealthCheckResponse.SERVING
        call = stub.Check(too_long)
    else:
        watch = stub.Watch(served)
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        call = stub.Watch(too_long).read()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"service must be at most {MAX_HEALTH_SERVICE_CHARS} characters (got {MAX_HEALTH_SERVICE_CHARS + 1}): no service here has a longer name"


async def test_calls_past_max_concurrent_calls_are_refused_resource_exhausted(tmp_path: Path) -> None:
    """Only each connection's calls were bounded: any number of connections held 100 each, and 4
    of stalled StreamQuery calls held 432 MiB. Past RETRIEVAL_MAX_CONCURRENT_CALLS on every
    connection together, a call is refused at once, before it runs."""
    err = await _a_call_past_two_watches(tmp_path, max_concurrent_calls=2)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.details() == "Concurrent RPC limit exceeded!"


async def _a_call_past_two_watches(tmp_path: Path, **limits: int) -> grpc.aio.AioRpcError:
    """How a Query is refused while two Health Watch calls are in progress, one on each of two
    connections, on a server with ``limits``."""
    running = await start_server(e2e_settings(tmp_path).model_copy(update=limits))
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{running.port}", options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(2)]
    try:
        watches = [health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest()) for channel in channels]
        for watch in watches:  # both in progress
            assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await pb_grpc.RetrievalServiceStub(channels[0]).Query(pb.QueryRequest(query="molten rock"))
        for watch in watches:
            watch.cancel()
        return err.value
    finally:
        for channel in channels:
            await channel.close()
        await running.stop(1.0)


async def test_a_burst_past_one_connections_stream_cap_is_served_or_refused_unavailable_never_otherwise(live: Live) -> None:
    """A fresh channel opens streams before it has read the server's SETTINGS_MAX_CONCURRENT_STREAMS:
    of 150 Query calls at once through a plain stub, some were reset REFUSED_STREAM (UNAVAILABLE,
    the call never ran). Nothing else befalls them, and the Python client, which tries an
    UNAVAILABLE again, gets every answer."""
    from retrieval_server.server import MAX_STREAMS_PER_CONNECTION

    calls = MAX_STREAMS_PER_CONNECTION + 50
    request = pb.QueryRequest(query="molten rock", top_k=2)
    channel = grpc.aio.insecure_channel(live.target, options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        stub = pb_grpc.RetrievalServiceStub(channel)
        outcomes = await asyncio.gather(*(stub.Query(request) for _ in range(calls)), return_exceptions=True)
    finally:
        await channel.close()
    for outcome in outcomes:
        if isinstance(outcome, grpc.aio.AioRpcError):
            assert outcome.code() == grpc.StatusCode.UNAVAILABLE and "RST_STREAM with error code 7" in (outcome.details() or ""), outcome
        else:
            assert isinstance(outcome, pb.QueryResponse) and outcome.query == "molten rock"
    async with AsyncRetrievalClient(live.target) as client:
        answers = await asyncio.gather(*(client.query("molten rock", top_k=2) for _ in range(calls)))
    assert [a.query for a in answers] == ["molten rock"] * calls


def _raw(channel: grpc.aio.Channel, method: str, streaming_response: bool = False):  # type: ignore[no-untyped-def]
    """``method`` called as a stream of requests: what a caller may send a unary method on the wire
    (gRPC's clients never send it no message, or two)."""
    make = channel.stream_stream if streaming_response else channel.stream_unary
    return make(method, request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda raw: raw)


@contextlib.asynccontextmanager
async def _slots_of_two(data_dir: Path, request_read_s: float) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to a server of RETRIEVAL_MAX_CONCURRENT_CALLS 2 and ``request_read_s``, which
    still answers a call once the block is done: the block's calls left room for it."""
    running = await start_server(e2e_settings(data_dir).model_copy(update={"max_concurrent_calls": 2, "request_read_s": request_read_s}))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}", options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        yield channel
        assert (await pb_grpc.RetrievalServiceStub(channel).Health(pb.HealthRequest())).status == pb.SERVING_STATUS_SERVING
    finally:
        await channel.close()
        await running.stop(1.0)


async def test_unary_calls_that_send_no_message_are_refused_and_free_their_slot(tmp_path: Path) -> None:
    """A unary call whose stream ended, or stayed open, with no message was never answered and held
    a slot: 1,000 of them (headers alone, no credentials) refused every other caller until their
    connections closed. Now one that ended is refused at once, one still open once
    RETRIEVAL_REQUEST_READ_S has passed, and more of them than RETRIEVAL_MAX_CONCURRENT_CALLS leave
    room for the next call."""
    # A call that ended is refused when its end arrives: under a time limit it cannot reach, so
    # that an end a busy machine delivers late is not taken for a message that never came.
    async with _slots_of_two(tmp_path / "ended", request_read_s=30) as channel:
        # A deadline, so that a call left unanswered fails the test instead of hanging it.
        for method in ("/retrieval.v1.RetrievalService/Health", "/retrieval.v1.RetrievalService/Query", "/grpc.health.v1.Health/Check"):
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await _raw(channel, method)(iter(()), timeout=60)
                assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "the request holds no message")
        watch = _raw(channel, "/grpc.health.v1.Health/Watch", streaming_response=True)(iter(()), timeout=60)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await watch.read()
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "the request holds no message")

    # One still open is ended by the time limit alone, whenever it passes: a tiny one.
    never = asyncio.Event()

    async def nothing() -> AsyncIterator[pb.HealthRequest]:
        await never.wait()
        yield pb.HealthRequest()

    try:
        async with _slots_of_two(tmp_path / "open", request_read_s=0.01) as channel:
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await _raw(channel, "/retrieval.v1.RetrievalService/Health")(nothing(), timeout=60)
                assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert err.value.details() == "the request message did not arrive within 0.01 s (RETRIEVAL_REQUEST_READ_S)"
    finally:
        never.set()


async def test_a_second_message_of_a_unary_call_is_ignored_as_grpc_does(live: Live) -> None:
    answer = await _raw(live.channel, "/retrieval.v1.RetrievalService/Health")(iter([pb.HealthRequest(), pb.HealthRequest()]))
    assert pb.HealthResponse.FromString(answer).status == pb.SERVING_STATUS_SERVING


async def test_calls_past_max_calls_per_peer_are_refused_naming_the_setting(tmp_path: Path) -> None:
    """One address could take every one of RETRIEVAL_MAX_CONCURRENT_CALLS's slots, from as many
    connections as it liked. Past RETRIEVAL_MAX_CALLS_PER_PEER of its calls at once, one more is
    refused; loopback is one address, so the share of another is the counter's unit test."""
    err = await _a_call_past_two_watches(tmp_path, max_calls_per_peer=2)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.details() == "more than 2 calls at once from one address (RETRIEVAL_MAX_CALLS_PER_PEER): wait for one to end"


async def test_header_values_not_utf8_are_counted_not_logged_line_by_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """grpc logs each header value that is not UTF-8 twice, with a traceback: 3 calls of 30,000
    such values (90 KB sent) made 180,000 log lines and held every caller's calls 11 s."""
    from retrieval_server.observability.logging import GRPC_CYTHON_LOGGER, filter_undecodable_headers
    from tests.support.http2 import END_STREAM, HEADERS, Http2Caller

    filter_undecodable_headers()  # as configure() does
    running = await start_server(e2e_settings(tmp_path))
    values = 1_000

    def call() -> None:
        caller = Http2Caller(running.port)
        try:
            stream = caller.call("/retrieval.v1.RetrievalService/Health", b"", [(b"x-junk", b"\xff\xfe")] * values)
            while True:  # until its trailers
                kind, flags, on, _ = caller.read_frame()
                if on == stream and kind == HEADERS and flags & END_STREAM:
                    return
        finally:
            caller.close()

    try:
        with caplog.at_level(logging.WARNING):
            await asyncio.to_thread(call)
        counted = running.app.metrics.registry.get_sample_value("retrieval_undecodable_header_values_total")
        assert counted is not None and counted >= values
        assert [r for r in caplog.records if r.name == GRPC_CYTHON_LOGGER] == []
        summaries = [r for r in caplog.records if "not UTF-8" in r.getMessage()]
        assert len(summaries) <= 1  # at most one a minute: another test of the process may have written this minute's
    finally:
        await running.stop(1.0)


async def test_a_stream_whose_reader_stalled_then_left_ends_with_no_error_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A StreamQuery reader that stops reading, then closes its connection once the server has
    given the stream up: the status waited behind the message never read, its send failed when
    the reader left, and gRPC logged that at ERROR with a 40-line traceback, one a stream. It is
    the request's own failure (DEBUG), and still counted as the stall it was."""
    from retrieval_server.api import servicer
    from tests.support.http2 import SETTINGS_INITIAL_WINDOW_SIZE, Http2Caller

    given_up, ended = asyncio.Event(), asyncio.Event()
    abort = servicer.abort

    async def watched(context: grpc.aio.ServicerContext, exc: ServiceError) -> NoReturn:
        if isinstance(exc, StreamStalled):
            given_up.set()
        try:
            await abort(context, exc)
        finally:
            ended.set()

    monkeypatch.setattr(servicer, "abort", watched)
    running = await start_server(e2e_settings(tmp_path).model_copy(update={"stream_stall_s": 0.1}))
    caplog.clear()  # the start's own lines
    try:
        with caplog.at_level(logging.INFO), caplog.at_level(logging.DEBUG, logger="retrieval_server.api.errors"):
            caller = await asyncio.to_thread(Http2Caller, running.port, {SETTINGS_INITIAL_WINDOW_SIZE: 0})  # it reads nothing
            try:
                request = pb.StreamQueryRequest(query=pb.QueryRequest(query="molten rock", use_cache=False))
                caller.call("/retrieval.v1.RetrievalService/StreamQuery", request.SerializeToString())
                await given_up.wait()
            finally:
                caller.close()
            await ended.wait()
        stalled = running.app.metrics.registry.get_sample_value("grpc_server_handled_total", {
            "grpc_type": "server_stream", "grpc_service": "retrieval.v1.RetrievalService", "grpc_method": "StreamQuery", "grpc_code": "ResourceExhausted"})
    finally:
        await running.stop(1.0)
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r.levelno for r in caplog.records if r.name == "retrieval_server.api.errors"] == [logging.DEBUG]
    assert stalled == 1


#: BEL, ESC [31m (red), an OSC 52 sequence (which writes the clipboard), CSI (C1) and a line break
_ESCAPING = "Ti\x07tle\x1b[31m \x1b]52;c;aGk=\x07\x9bend\n"


@pytest.mark.parametrize("field", ["title", "url", "source", "metadata key", "metadata value"])
async def test_a_callers_fields_served_in_every_hit_have_spaces_for_their_control_characters(live: Live, field: str) -> None:
    """A file's title and a JSONL row's metadata were cleaned, the same text sent over gRPC stored
    as sent: an admin's OSC 52 in a title reached every reader's terminal."""
    doc_id = f"escaping-{field.replace(' ', '-')}"
    sent = {"title": {"title": _ESCAPING}, "url": {"url": f"https://e.example/{_ESCAPING}"}, "source": {"source": _ESCAPING},
            "metadata key": {"metadata": {_ESCAPING: "v"}}, "metadata value": {"metadata": {"note": _ESCAPING}}}[field]
    await live.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[_doc(doc_id, "Fjords are valleys the sea drowned.", **sent)]),
                                    metadata=ADMIN)
    found = await live.stub.Query(pb.QueryRequest(query="fjords drowned valleys", filters=pb.QueryFilters(document_ids=[doc_id])))
    served = found.contexts[0].metadata
    got = {"title": served.title, "url": served.url, "source": served.source, "metadata key": "".join(served.extra),
           "metadata value": served.extra["note"] if "note" in served.extra else ""}[field]
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in got), repr(got)
    assert "[31m" in got and "52;c;aGk=" in got
