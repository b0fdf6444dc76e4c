"""StreamQuery over a real grpc.aio server whose answers come from a local OpenAI-compatible server
streaming Server-Sent Events; `retrieval-server ask` (single question and interactive),
`retrieval-server graph export` and the client commands' imports against it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import networkx as nx
import pytest
import pytest_asyncio

from bench.graph.corpus import make_wiki
from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server import cli
from retrieval_server.server import start_server
from tests.e2e.conftest import e2e_settings
from tests.support.http_servers import LocalServer, Sse, json_server

WIKI = make_wiki(7)
ANSWER = "AuthSvc handles customer sign-in and sessions [1]. It keeps its data in a store [2]."


def _llm(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    assert path == "/v1/chat/completions"
    if not body.get("stream"):
        return 200, {"choices": [{"message": {"content": ANSWER}}]}
    words = ANSWER.split(" ")
    tokens = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": t}}]})) for t in tokens] + [(None, "[DONE]")])


@dataclass
class Served:
    target: str
    stub: retrieval_pb2_grpc.RetrievalServiceStub
    data_dir: Path
    llm: LocalServer


@pytest.fixture(scope="module")
def llm() -> Iterator[LocalServer]:
    with json_server(_llm) as server:
        yield server


@pytest_asyncio.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory, llm: LocalServer) -> AsyncIterator[Served]:
    data_dir = tmp_path_factory.mktemp("stream-data")
    settings = e2e_settings(data_dir).model_copy(
        update={"llm_answer_provider": "openai", "openai_base_url": llm.url + "/v1", "openai_model": "sse-model", "llm_max_retries": 0,
                # Limits a busy machine meets: the local model server and the tools always answer here.
                "llm_timeout_s": 60.0, "tool_timeout_s": 60.0}
    )
    running = await start_server(settings)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    docs = [pb.DocumentInput(document_id=d, filename=f"{d}.txt", content=t.encode()) for d, t in WIKI.documents.items()]
    resp = await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=docs), metadata=(("x-user-role", "ADMIN"),))
    assert not resp.errors
    yield Served(f"127.0.0.1:{running.port}", stub, data_dir, llm)
    await channel.close()
    await running.stop(1.0)


def _request(question: str, **kw: Any) -> pb.QueryRequest:
    return pb.QueryRequest(**{"query": question, "top_k": 3, "strategy": pb.STRATEGY_HYBRID, "mode": pb.MODE_GENERATION, "use_cache": False, **kw})


async def test_stream_sends_stages_then_tokens_then_the_query_response(served: Served) -> None:
    events = [e async for e in served.stub.StreamQuery(pb.StreamQueryRequest(query=_request("What does AuthSvc handle?")))]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "response" and kinds.count("response") == 1
    first_delta = kinds.index("answer_delta")
    assert kinds[:first_delta] and set(kinds[:first_delta]) == {"stage"}  # stages of retrieval come first
    deltas = [e.answer_delta for e in events if e.WhichOneof("event") == "answer_delta"]
    assert len(deltas) > 5 and "".join(deltas) == ANSWER  # token by token, as the model streamed them
    final = events[-1].response
    assert [e.stage.stage for e in events if e.WhichOneof("event") == "stage"] == [s.stage for s in final.metrics.stages]
    assert final.answer.model == "openai:sse-model" and not final.answer.extractive
    assert [s.citations for s in final.answer.sentences] == [[1], [2]]
    assert final.metrics.route.route == pb.ROUTE_RETRIEVE and final.metrics.graph.entities[0].name == "AuthSvc"
    unary = await served.stub.Query(_request("What does AuthSvc handle?"))
    assert [c.parent_chunk_id for c in unary.contexts] == [c.parent_chunk_id for c in final.contexts]
    assert unary.answer.text == final.answer.text and [s.stage for s in unary.metrics.stages] == [s.stage for s in final.metrics.stages]


async def test_stream_rejects_bad_arguments_with_a_status(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in served.stub.StreamQuery(pb.StreamQueryRequest(query=_request("q", top_k=100000))):
            pass
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "top_k" in (err.value.details() or "")
    graph_only = await served.stub.Query(pb.QueryRequest(query="Who maintains AuthSvc?", top_k=2, strategy=pb.STRATEGY_GRAPH))
    assert graph_only.metrics.strategy_used == pb.STRATEGY_GRAPH and graph_only.contexts[0].document_id == "authsvc"


async def test_ask_prints_the_answer_citations_and_trace(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich wraps at the terminal's width
    code = await asyncio.to_thread(cli.main, ["ask", "How many services depend on LedgerDB?", "--server", served.target, "--trace"])
    out = capsys.readouterr().out
    assert code == 0
    users = sorted(s for s, stores in WIKI.uses.items() if "LedgerDB" in stores)
    assert f"= {len(users)}" in out and "tool calculate" in out
    for line in ("execution trace", "route", "decision: tool by rules", "run_tools", "generate", "count_dependents"):
        assert line in out, line
    code = await asyncio.to_thread(cli.main, ["ask", "What does AuthSvc handle?", "--server", served.target, "--trace"])
    out = capsys.readouterr().out
    assert code == 0 and "AuthSvc handles customer sign-in and sessions [1]." in out
    assert "[1] " in out and "authsvc#p0" in out  # the citation's context
    assert "graph leg: entities in the query: AuthSvc" in out and "hop 0 ×1.00" in out and "hop 1 ×0.77" in out


async def test_ask_interactive_session(served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich wraps at the terminal's width
    lines = iter([":trace on", ":strategy graph", ":user alice", "Who maintains AuthSvc?", ":trace off", ":strategy nope", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    code = await asyncio.to_thread(cli.main, ["ask", "--server", served.target, "--history", str(tmp_path / "history")])
    out, err = capsys.readouterr()
    assert code == 0
    assert "trace on" in out and "strategy graph" in out and "asking as alice" in out
    assert "execution trace" in out and "lookup_facts" in out and WIKI.maintainer["AuthSvc"] in out
    assert "error: strategy must be one of semantic, keyword, hybrid, adaptive, graph, in any case (got nope)" in err
    assert (tmp_path / "history").is_file()


#: What a command that only makes an RPC must not import: the service's settings, numerics, model
#: runtime, engines and optional integrations (each costs tenths of a second at start-up), and its
#: domain (about 20 ms of dataclasses).
HEAVY = ("numpy", "numba", "llvmlite", "onnxruntime", "tokenizers", "pydantic", "pydantic_settings", "retrieval_server.config",
         "retrieval_server.domain", "retrieval_server.knowledge", "scoring_core", "networkx", "rich", "qdrant_client",
         "qdrant_edge", "opentelemetry", "httpx", "aiosqlite", "asyncmy", "redis", "aio_pika", "prometheus_client", "pypdf",
         "bs4", "lxml", "jwt", "rapidfuzz")


async def test_client_commands_import_only_the_client(served: Served) -> None:
    script = (
        "import json, sys\n"
        "from retrieval_server import cli\n"
        f"target = {served.target!r}\n"
        "codes = [cli.main([*c, '--server', target]) for c in (['health'], ['search', 'AuthSvc'], ['query', 'AuthSvc', '--strategy', 'hybrid'],"
        " ['delete', 'no-such-document', '--role', 'ADMIN'])]\n"
        "print(json.dumps({'codes': codes, 'modules': sorted(sys.modules)}))\n"
    )
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    *printed, last = proc.stdout.splitlines()
    result = json.loads(last)
    assert result["codes"] == [0, 0, 0, 0], proc.stderr
    text = "\n".join(printed)
    assert '"status": "SERVING_STATUS_SERVING"' in text and "authsvc" in text.lower() and "not found: no-such-document" in text
    loaded = {m for m in result["modules"] if m.split(".")[0] in HEAVY or m in HEAVY}
    assert not loaded, sorted(loaded)


async def test_graph_export_refuses_an_empty_user(served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An unset variable in a script (--user "") was read as no user: every user's private graph. Then
    it was refused with exit 1 and no "error:", unlike every other usage error."""
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(served.data_dir))
    out = tmp_path / "graph.graphml"
    with pytest.raises(SystemExit) as stopped:
        await asyncio.to_thread(cli.main, ["graph", "export", str(out), "--user", ""])
    assert stopped.value.code == 2 and "error: --user must be 1 to" in capsys.readouterr().err
    assert not out.exists()


async def test_graph_export_with_a_role_alone_is_an_anonymous_callers(served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--role USER without --user was ignored: the export ran as SUPER_ADMIN, every private entity in it."""
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(served.data_dir))
    private = pb.DocumentInput(document_id="vaultsvc", filename="vaultsvc.txt", access=pb.ACCESS_PRIVATE, owner_id="mallory",
                               content=b"VaultSvc handles secrets. VaultSvc uses LedgerDB for its data. VaultSvc is maintained by Zed Quill.")
    admin = (("x-user-role", "ADMIN"),)
    assert not (await served.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[private]), metadata=admin)).errors
    try:
        exported = {}
        for name, flags in (("all", []), ("owner", ["--user", "mallory"]), ("user", ["--role", "USER"]), ("admin", ["--role", "ADMIN"]),
                            ("super", ["--role", "SUPER_ADMIN"])):
            assert await asyncio.to_thread(cli.main, ["graph", "export", str(tmp_path / f"{name}.graphml"), *flags]) == 0
            exported[name] = nx.read_graphml(tmp_path / f"{name}.graphml")
        assert "vaultsvc" in exported["all"] and "vaultsvc" in exported["owner"] and "vaultsvc" in exported["super"]
        assert "vaultsvc" not in exported["user"] and "vaultsvc" not in exported["admin"]
        assert "authsvc" in exported["user"]  # the public documents' entities
    finally:
        await served.stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=["vaultsvc"]), metadata=admin)


async def test_graph_export_writes_graphml(served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(served.data_dir))
    out = tmp_path / "graph.graphml"
    assert await asyncio.to_thread(cli.main, ["graph", "export", str(out)]) == 0
    g = nx.read_graphml(out)
    assert g.nodes["authsvc"]["entity_type"] == "SERVICE" and g.nodes["authsvc"]["name"] == "AuthSvc"
    project = next(iter(WIKI.depends))
    assert ("".join(project.lower()), WIKI.depends[project][0].lower()) in {(s, t) for s, t, d in g.edges(data=True) if d["relation"] == "DEPENDS_ON"}
