"""Exact repeats answered with the bytes already sent (api/served_answers.py), through a real server:
served only while nothing was committed to the metadata store, by this process or another, and
never across callers who may read different documents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest_asyncio

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.server import RunningServer, start_server
from tests.e2e.conftest import e2e_settings

# SUPER_ADMIN: the tests replace private documents of others, which an ADMIN may not.
OPERATOR = (("x-user-id", "ops"), ("x-user-role", "SUPER_ADMIN"))
CAROL = (("x-user-id", "carol"), ("x-user-role", "USER"))
DAVE = (("x-user-id", "dave"), ("x-user-role", "USER"))
GRAPH_HIT = ["build_access_filter", "check_cache"]
SERVED = ["check_cache"]


def _doc(doc_id: str, text: str, **kw: object) -> pb.DocumentInput:
    return pb.DocumentInput(document_id=doc_id, filename=f"{doc_id}.txt", content=text.encode(), **kw)  # type: ignore[arg-type]


class Server:
    def __init__(self, running: RunningServer, data_dir: Path) -> None:
        self.running, self.data_dir = running, data_dir
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        self.stub = retrieval_pb2_grpc.RetrievalServiceStub(self.channel)

    async def ask(self, query: str, who: tuple[tuple[str, str], ...] = (), **kw: object) -> pb.QueryResponse:
        request = pb.QueryRequest(query=query, top_k=3, strategy=pb.STRATEGY_KEYWORD, **kw)  # type: ignore[arg-type]
        return await self.stub.Query(request, metadata=who)

    async def ingest(self, *docs: pb.DocumentInput) -> None:
        response = await self.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=docs), metadata=OPERATOR)
        assert not response.errors, response.errors  # a write refused would leave the test asking about the old one


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    running = await start_server(e2e_settings(tmp_path))
    s = Server(running, tmp_path)
    await s.ingest(
        _doc("glaciers", "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts."),
        _doc("volcano", "Volcanoes erupt when molten rock rises through the crust and lava flows reshape coastlines."),
    )
    yield s
    await s.channel.close()
    await running.stop(1.0)


def _stages(r: pb.QueryResponse) -> list[str]:
    return [s.stage for s in r.metrics.stages]


def _docs(r: pb.QueryResponse) -> set[str]:
    return {c.document_id for c in r.contexts}


async def _served(s: Server, query: str, who: tuple[tuple[str, str], ...] = ()) -> pb.QueryResponse:
    """Ask until the answer is served before the workflow: a miss, a verified hit, then served."""
    first, hit, served = [await s.ask(query, who) for _ in range(3)]
    assert not first.cached and hit.cached and _stages(hit) == GRAPH_HIT
    assert served.cached and _stages(served) == SERVED
    return served


async def test_an_exact_repeat_is_the_same_answer_with_its_own_metrics(server: Server) -> None:
    served = await _served(server, "slow rivers of ice")
    hit = await server.stub.Query(pb.QueryRequest(query="slow rivers of ice", top_k=3, strategy=pb.STRATEGY_KEYWORD, use_cache=True))
    assert _stages(hit) == SERVED  # use_cache set explicitly to its default: the same request
    assert served.query == "slow rivers of ice" and _docs(served) == {"glaciers"}
    assert list(served.contexts) == list(hit.contexts) and served.suggestions == hit.suggestions
    m = served.metrics
    assert m.cache_hit and m.strategy_used == pb.STRATEGY_KEYWORD and m.iterations == 0
    # What the pass that found the contexts reported, as the hit it repeats did: this server has
    # no reranker and no LLM.
    assert m.sufficiency_score > 0 and set(m.degraded) == {"rerank:unavailable", "analysis:hyde:skipped: needs an LLM"}
    assert m.total_ms > 0 and m.stages[0].duration_ms == m.total_ms and m.stages[0].count == len(served.contexts)
    # Another query text, or the cache turned off: the workflow answers.
    assert _stages(await server.ask("Slow rivers of ice")) == GRAPH_HIT
    assert _stages(await server.ask("slow rivers of ice", use_cache=False))[-1] == "update_cache"


async def test_options_that_change_the_answer_are_part_of_the_key(server: Server) -> None:
    await _served(server, "molten rock")
    other = await server.stub.Query(pb.QueryRequest(query="molten rock", top_k=4, strategy=pb.STRATEGY_KEYWORD))
    assert not other.cached and _stages(other) != SERVED


async def test_a_delete_by_another_process_is_never_served(server: Server) -> None:
    await _served(server, "molten rock")
    # Another server process on the same index: its own connection to the store commits the delete.
    other = SqliteMetadataStore(server.data_dir / "metadata.sqlite3")
    await other.open()
    try:
        assert await other.delete_document("volcano")
    finally:
        await other.close()
    after = await server.ask("molten rock")
    assert "volcano" not in _docs(after) and _stages(after) != SERVED


async def test_a_revoked_grant_is_never_served(server: Server) -> None:
    private = dict(access=pb.ACCESS_PRIVATE, owner_id="alice")
    await server.ingest(_doc("alice-plan", "The quarterly harvest plan for the orchard.", granted_user_ids=["carol"], **private))
    assert _docs(await _served(server, "quarterly harvest plan", CAROL)) == {"alice-plan"}
    await server.ingest(_doc("alice-plan", "The quarterly harvest plan for the orchard.", **private))
    after = await server.ask("quarterly harvest plan", CAROL)
    assert "alice-plan" not in _docs(after) and _stages(after) != SERVED


async def test_a_callers_served_answer_never_reaches_another_caller(server: Server) -> None:
    private = dict(access=pb.ACCESS_PRIVATE, owner_id="carol")
    await server.ingest(_doc("carol-notes", "Notes on the glacier survey budget.", **private))
    assert "carol-notes" in _docs(await _served(server, "glacier survey budget", CAROL))
    for who in (DAVE, ()):
        answer = await server.ask("glacier survey budget", who)
        assert "carol-notes" not in _docs(answer) and _stages(answer) != SERVED
