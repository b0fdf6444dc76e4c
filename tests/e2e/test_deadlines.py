"""A caller's gRPC deadline over a real server: a frozen reranker (TEI that accepts the request and
never answers) costs the caller the reranking, not the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.config import load_settings
from retrieval_server.server import start_server
from tests.support.http_servers import ControlledServer, tei_rerank, word_overlap

ADMIN = (("x-user-id", "ops"), ("x-user-role", "ADMIN"))


@pytest_asyncio.fixture
async def frozen_tei_stub(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[retrieval_pb2_grpc.RetrievalServiceStub, ControlledServer]]:
    tei = ControlledServer(tei_rerank(word_overlap))
    tei.start()
    settings = load_settings(
        host="127.0.0.1", port=0, metrics_port=0, data_dir=tmp_path_factory.mktemp("deadlines"), cache_backend="none",
        # TEI's own timeout far beyond the caller's deadline: only the deadline can end the call.
        tei_url=tei.record.url, tei_timeout_s=120.0, rerank_threshold=0.0,
    )
    server = await start_server(settings)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    doc = pb.DocumentInput(document_id="cooking", filename="cooking.txt", content=b"Simmer the tomato sauce slowly with basil and garlic for forty minutes.")
    assert not (await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[doc]), metadata=ADMIN, timeout=300)).errors
    try:
        yield stub, tei
    finally:
        tei.thaw()
        await channel.close()
        await server.stop(5.0)
        tei.stop()


async def test_a_frozen_reranker_costs_the_reranking_not_the_answer(frozen_tei_stub: tuple[retrieval_pb2_grpc.RetrievalServiceStub, ControlledServer]) -> None:
    stub, tei = frozen_tei_stub
    tei.freeze()
    request = pb.QueryRequest(query="how long to simmer tomato sauce", top_k=1, strategy=pb.STRATEGY_HYBRID, use_cache=False)
    # The default reserve: reranking gets half of what is left of the 6 s, enrich and the send the rest.
    r = await stub.Query(request, timeout=6)
    assert [c.document_id for c in r.contexts] == ["cooking"]
    assert "deadline:rerank_skipped" in r.metrics.degraded and "rerank:failed" not in r.metrics.degraded
    assert len(tei.record.requests) == 1  # it was asked, and did not answer
