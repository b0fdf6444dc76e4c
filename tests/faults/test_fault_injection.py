"""Dependencies stopped, frozen and restarted under load: the service degrades, recovers, loses no write.

The server runs in production shape: MariaDB (a real server), the Redis cache (a real server), a
TEI reranker and an OpenAI-compatible LLM (local servers speaking their protocols). Each phase
changes one dependency (killed, restarted, frozen with SIGSTOP or a hung handler, thawed), then
drives a bounded closed-loop load: WORKERS callers each send REQUESTS queries in turn (every other
one bypasses the cache, so the reranker and the LLM are used in every phase), plus one ingest. Every answer is counted as ok, degraded (answered, with ``metrics.degraded`` saying what
was missing) or failed (by status code), and a report table is printed. Optional dependencies
(cache, reranker, LLM) never fail a request; MariaDB, which every answer needs, fails requests
only with UNAVAILABLE while it is away; after every restore the next load is clean again, with
no restart of the service; every ingest that was acknowledged is stored at the end.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.config import load_settings
from retrieval_server.server import RunningServer, start_server
from tests.support.http_servers import ControlledServer, tei_rerank, word_overlap
from tests.support.mariadb import MariaDb
from tests.support.redis_server import Redis

pytestmark = [pytest.mark.slow, pytest.mark.mariadb]
WORKERS, REQUESTS = 3, 4
ADMIN = (("x-user-role", "ADMIN"),)
QUESTIONS = ["how do glaciers carve valleys", "what makes bread rise", "why are there tides", "how do volcanoes erupt"]
CORPUS = {
    "glaciers": "Glaciers carve deep valleys as the ice grinds the rock beneath it over thousands of years.",
    "bread": "Bread rises because yeast ferments the sugars in the dough and releases carbon dioxide.",
    "tides": "Tides are caused by the gravitational pull of the moon and the sun on the oceans.",
    "volcanoes": "Volcanoes erupt when pressure from gas-rich magma forces it up through the crust.",
}


def llm_handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """An OpenAI-compatible model that answers each query-analysis prompt sensibly for any query."""
    prompt = body["messages"][1]["content"]
    query = re.split(r"(?:Query|Question): ", prompt)[-1].strip()
    if prompt.startswith("Rewrite"):
        answer = query
    elif prompt.startswith("Write a short passage"):
        answer = f"A short passage that answers: {query}."
    elif prompt.startswith("Write"):
        answer = f"{query}\nexplain {query}"
    else:
        answer = "NONE"
    return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}


@dataclass
class Stack:
    mariadb: MariaDb
    redis: Redis
    tei: ControlledServer
    llm: ControlledServer
    server: RunningServer
    stub: retrieval_pb2_grpc.RetrievalServiceStub
    acknowledged: dict[str, int] = field(default_factory=dict)


@pytest_asyncio.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("faults")
    mariadb, redis = MariaDb(root / "mariadb"), Redis(root / "redis")
    tei, llm = ControlledServer(tei_rerank(word_overlap)), ControlledServer(llm_handler)
    mariadb.start(setup=True)
    redis.start()
    tei.start()
    llm.start()
    settings = load_settings(
        host="127.0.0.1", port=0, metrics_port=0, data_dir=root / "data",
        # Timeouts a healthy dependency meets even on a loaded machine; a frozen one costs each call that much.
        mysql_dsn=mariadb.dsn, mysql_timeout_s=5.0,
        cache_backend="redis", redis_url=redis.url, cache_timeout_s=5.0,
        tei_url=tei.record.url, tei_timeout_s=8.0, rerank_threshold=0.0,
        llm_provider="openai", openai_base_url=f"{llm.record.url}/v1", llm_timeout_s=8.0, llm_max_retries=0,
        analysis_timeout_s=10.0, analysis_total_timeout_s=12.0,
        # Every call to a dependency that is down is then a trial call: a restored dependency is
        # used again by the very next request, which is what the restore phases check.
        breaker_cooldown_s=0.0,
        sufficiency_threshold=0.0, store_retries=1,
    )
    server = await start_server(settings)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    docs = [pb.DocumentInput(document_id=k, filename=f"{k}.txt", content=v.encode()) for k, v in CORPUS.items()]
    resp = await stub.IngestDocuments(pb.IngestDocumentsRequest(documents=docs), metadata=ADMIN, timeout=300)
    assert not resp.errors
    s = Stack(mariadb, redis, tei, llm, server, stub, {d.document_id: d.child_chunks for d in resp.documents})
    try:
        yield s
    finally:
        await channel.close()
        await server.stop(5.0)
        for stop in (tei.stop, llm.stop, redis.stop, mariadb.stop):
            stop()


@dataclass
class Outcome:
    #: the first request after a restore (the breaker's half-open trial), when there is one
    first: str = ""
    ok: int = 0
    #: answered with something missing; ``tags`` counts what (metrics.degraded)
    degraded: int = 0
    tags: Counter[str] = field(default_factory=Counter)
    #: status code -> requests
    failed: Counter[str] = field(default_factory=Counter)
    ingest: str = ""


async def _first_caller(stack: Stack) -> str:
    """The first caller after a restore, alone: through the cache, then around it (so that the cache,
    the reranker and the LLM are each called). Its calls are the circuit breakers' half-open trials
    (concurrent callers are refused until a trial succeeds); the load after it sees the recovered service."""
    outcome = "ok"
    for use_cache in (True, False):
        try:
            r = await stack.stub.Query(pb.QueryRequest(query=QUESTIONS[0], top_k=2, strategy=pb.STRATEGY_HYBRID, use_cache=use_cache), timeout=300)
        except grpc.aio.AioRpcError as exc:
            return exc.code().name
        if r.metrics.degraded:
            outcome = "degraded"
    return outcome


async def _load(stack: Stack, phase: str, first: str = "", *, fresh: bool = False) -> Outcome:
    out = Outcome(first=first)

    async def caller(worker: int) -> None:
        for i in range(REQUESTS):
            question = QUESTIONS[(worker + i) % len(QUESTIONS)] + (f" during the {phase} phase" if fresh else "")
            try:
                request = pb.QueryRequest(query=question, top_k=2, strategy=pb.STRATEGY_HYBRID, use_cache=i % 2 == 0)
                r = await stack.stub.Query(request, timeout=300)
            except grpc.aio.AioRpcError as exc:
                out.failed[exc.code().name] += 1
                continue
            if r.metrics.degraded:
                out.degraded += 1
                out.tags.update(r.metrics.degraded)
            else:
                out.ok += 1

    async def ingest() -> None:
        doc_id = "phase-" + re.sub(r"\W+", "-", phase)
        doc = pb.DocumentInput(document_id=doc_id, filename=f"{doc_id}.txt", content=f"Notes written during the {phase} phase.".encode())
        try:
            resp = await stack.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[doc]), metadata=ADMIN, timeout=120)
        except grpc.aio.AioRpcError as exc:
            out.ingest = exc.code().name
            return
        for d in resp.documents:
            stack.acknowledged[d.document_id] = d.child_chunks
        out.ingest = "acknowledged" if resp.documents else f"refused: {resp.errors[0].reason[:40]}"

    await asyncio.gather(*(caller(w) for w in range(WORKERS)), ingest())
    return out


def _degraded_by(out: Outcome, prefixes: tuple[str, ...]) -> bool:
    return out.degraded > 0 and all(tag.startswith(prefixes) for tag in out.tags)


@dataclass(frozen=True)
class Phase:
    name: str
    act: Callable[[Stack], Any]
    #: "ok": nothing failed or degraded; "degraded": nothing failed, and what degraded is the
    #: dependency's ``tags``; "unavailable": what failed, failed with UNAVAILABLE
    expect: str
    tags: tuple[str, ...] = ()
    #: ask questions no earlier phase asked: the reranker scores a (question, chunk) pair once, so
    #: a repeated question's rerank needs no TEI call, and a TEI fault would show only by chance
    fresh: bool = False


PHASES = [
    Phase("baseline", lambda s: None, "ok"),
    Phase("redis killed", lambda s: s.redis.kill(), "degraded", ("cache:",)),
    Phase("redis restarted", lambda s: s.redis.start(), "ok"),
    Phase("redis frozen", lambda s: s.redis.freeze(), "degraded", ("cache:",)),
    Phase("redis thawed", lambda s: s.redis.thaw(), "ok"),
    Phase("tei stopped", lambda s: s.tei.stop(), "degraded", ("rerank:",), fresh=True),
    Phase("tei restarted", lambda s: s.tei.start(), "ok"),
    Phase("tei frozen", lambda s: s.tei.freeze(), "degraded", ("rerank:",), fresh=True),
    Phase("tei thawed", lambda s: s.tei.thaw(), "ok"),
    Phase("llm stopped", lambda s: s.llm.stop(), "degraded", ("analysis:",)),
    Phase("llm restarted", lambda s: s.llm.start(), "ok"),
    Phase("llm frozen", lambda s: s.llm.freeze(), "degraded", ("analysis:",)),
    Phase("llm thawed", lambda s: s.llm.thaw(), "ok"),
    Phase("mariadb stopped", lambda s: s.mariadb.stop(), "unavailable"),
    Phase("mariadb restarted", lambda s: s.mariadb.start(), "ok"),
    Phase("mariadb frozen", lambda s: s.mariadb.freeze(), "unavailable"),
    Phase("mariadb thawed", lambda s: s.mariadb.thaw(), "ok"),
]


async def test_dependencies_fail_degrade_and_recover_under_load(stack: Stack) -> None:
    report: list[tuple[Phase, Outcome]] = []
    try:
        for phase in PHASES:
            await asyncio.to_thread(phase.act, stack)
            first = await _first_caller(stack) if phase.expect == "ok" and report else ""
            report.append((phase, await _load(stack, phase.name, first, fresh=phase.fresh)))
    finally:
        print("\nphase              first        ok  degraded  failed  ingest        what degraded / failed")
        for phase, out in report:
            what = ", ".join(f"{k} x{v}" for k, v in (out.tags + out.failed).most_common())
            print(f"{phase.name:18} {out.first or '-':10} {out.ok:4} {out.degraded:9} {sum(out.failed.values()):7}  {out.ingest:12}  {what}")
    total = WORKERS * REQUESTS
    for phase, out in report:
        answered = out.ok + out.degraded
        if phase.expect == "ok":
            assert out.first in ("", "ok", "degraded"), (phase.name, out.first)  # recovered: answered, at worst degraded
            assert out.ok == total, (phase.name, out)
            assert out.ingest == "acknowledged", (phase.name, out.ingest)
        elif phase.expect == "degraded":
            assert answered == total and not out.failed, (phase.name, out)
            assert _degraded_by(out, phase.tags), (phase.name, out.tags)
            assert out.ingest == "acknowledged", (phase.name, out.ingest)  # writes do not need the optional ones
        else:
            assert set(out.failed) <= {"UNAVAILABLE"} and out.failed, (phase.name, out)
            assert out.ingest in ("UNAVAILABLE", "acknowledged") or out.ingest.startswith("refused"), (phase.name, out.ingest)
    # No acknowledged write was lost: every one is stored with all its chunks, without a restart.
    app = stack.server.app
    for doc_id, children in stack.acknowledged.items():
        assert await app.metadata.get_document(doc_id) is not None, doc_id
        doc = await app.metadata.get_document(doc_id)
        assert await app.vectors.count(doc_id, doc.version) == children, doc_id  # type: ignore[union-attr]
    assert await app.metadata.pending_writes() == []
