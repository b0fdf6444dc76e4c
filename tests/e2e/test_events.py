"""RetrievalCompleted events through a real RabbitMQ: delivery, a broker outage, a frozen broker;
and a broker address that accepts connections and never answers, at shutdown."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import aio_pika
import grpc
import pytest
import pytest_asyncio
from google.protobuf import json_format

from retrieval.v1 import events_pb2
from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.app import Application
from retrieval_server.backends.events import RabbitMqPublisher
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource
from retrieval_server.observability.analytics import Analytics, RetrievalCompleted
from retrieval_server.observability.metrics import ServiceMetrics
from retrieval_server.server import RunningServer, start_server
from bench.server_process import free_port, wait_healthy
from tests.support.paths import inherited_env
from tests.support.rabbitmq import RabbitMq, rabbitmq_server
from tests.support.subprocesses import reaped

CAPACITY = 8
QUEUE = "analytics-under-test"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMq]:
    with rabbitmq_server(tmp_path_factory.mktemp("rabbitmq")) as b:
        yield b


async def _bind_queue(url: str) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        exchange = await channel.declare_exchange("retrieval.events", aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue(QUEUE, durable=True)
        await queue.bind(exchange, "retrieval.completed")


async def _take(url: str, n: int, timeout_s: float = 120.0) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """The next ``n`` messages of the test queue (acknowledged)."""
    connection = await aio_pika.connect(url)
    out: list[aio_pika.abc.AbstractIncomingMessage] = []
    async with connection:
        queue = await (await connection.channel()).get_queue(QUEUE)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(out) < n:
            message = await queue.get(fail=False)
            if message is None:
                assert loop.time() < deadline, f"{len(out)} of {n} events arrived"
                await asyncio.sleep(0.1)
                continue
            await message.ack()
            out.append(message)
        assert await queue.get(fail=False) is None, "more events than expected"
    return out


def _event(message: aio_pika.abc.AbstractIncomingMessage) -> events_pb2.RetrievalCompleted:
    return json_format.Parse(message.body, events_pb2.RetrievalCompleted())


async def _until(predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.05)


async def _settled(live: Live) -> None:
    """Every event published so far is confirmed (and counted) or failed (and counted)."""
    await _until(lambda: live.publisher.pending == 0)


class Live:
    def __init__(self, running: RunningServer, channel: grpc.aio.Channel) -> None:
        self.running, self.channel = running, channel
        self.stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)

    @property
    def publisher(self) -> RabbitMqPublisher:
        assert self.running.app.events is not None
        return self.running.app.events

    def sample(self, name: str, **labels: str) -> float:
        return self.running.app.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest_asyncio.fixture(scope="module")
async def live(broker: RabbitMq, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    await _bind_queue(broker.url)
    # A publish left unanswered (a frozen broker) stays in flight for the whole test.
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path_factory.mktemp("events-data"),
                             events_url=broker.url, events_buffer=CAPACITY, events_publish_timeout_s=60)
    app = Application(settings)
    await app.open()
    await app.ingest([DocumentSource(filename="tides.txt", content=b"Tides are caused by the gravitational pull of the moon.")])
    running = await start_server(settings, app)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    live = Live(running, channel)
    await asyncio.wait_for(live.publisher.connected.wait(), 120)
    yield live
    await channel.close()
    await running.stop(1.0)


class Sink:
    def __init__(self) -> None:
        self.events: list[RetrievalCompleted] = []

    def publish(self, event: RetrievalCompleted) -> None:
        self.events.append(event)


async def test_the_query_hash_is_of_the_query_the_response_names(tmp_path: Path) -> None:
    """The text as the server used it (NFC, zero-width characters trimmed), not as the caller sent
    it: a consumer can match an event to the answer it has."""
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path)
    app = Application(settings)
    await app.open()
    sink = Sink()
    app.analytics = Analytics(sink, "hash")
    running = await start_server(settings, app)
    sent = "  cafe\u0301 au lait\u200b "
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            query = await stub.Query(pb.QueryRequest(query=sent, rerank=False))
            search = await stub.Search(pb.SearchRequest(query=sent))
    finally:
        await running.stop(1.0)
    assert query.query == search.query == "caf\u00e9 au lait"
    assert [e.query_sha256 for e in sink.events] == [hashlib.sha256("caf\u00e9 au lait".encode()).hexdigest()] * 2
    assert hashlib.sha256(sent.strip().encode()).hexdigest() != sink.events[0].query_sha256


async def test_each_answered_request_publishes_one_persistent_event(live: Live, broker: RabbitMq) -> None:
    query = await live.stub.Query(pb.QueryRequest(query="  what causes tides ", top_k=2, strategy=pb.STRATEGY_ADAPTIVE),
                                  metadata=[("x-user-id", "alice")])
    search = await live.stub.Search(pb.SearchRequest(query="moon gravity", top_k=3))
    with pytest.raises(grpc.aio.AioRpcError):
        await live.stub.Search(pb.SearchRequest(query=""))  # not answered: no event
    messages = await _take(broker.url, 2)
    q, s = (_event(m) for m in messages)
    assert q.event_type == "RetrievalCompleted" and q.version == "1.0" and q.source == "retrieval-service"
    assert str(uuid.UUID(q.event_id)) == q.event_id and q.event_id != s.event_id
    assert q.method == events_pb2.RETRIEVAL_METHOD_QUERY and s.method == events_pb2.RETRIEVAL_METHOD_SEARCH
    assert q.query == "" and q.query_sha256 == hashlib.sha256(b"what causes tides").hexdigest()  # hashed by default
    assert q.user_id == "alice" and s.user_id == ""
    assert q.strategy == query.metrics.strategy_used and q.strategy in (pb.STRATEGY_KEYWORD, pb.STRATEGY_HYBRID)
    assert q.top_k == 2 and q.result_count == len(query.contexts) >= 1
    assert s.top_k == 3 and s.result_count == len(search.results) and s.strategy == pb.STRATEGY_SEMANTIC
    assert q.latency_ms > 0 and not q.cache_hit and list(q.degraded) == list(query.metrics.degraded)
    assert q.timestamp.seconds > 0
    first = messages[0]
    assert first.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert first.content_type == "application/json" and first.type == "retrieval.v1.RetrievalCompleted"
    assert first.message_id == q.event_id and first.headers["schema_version"] == "1.0"
    assert json.loads(first.body)["eventType"] == "RetrievalCompleted"  # proto3 JSON: lowerCamelCase names
    # The broker routes a persistent message before it confirms it: the count follows the confirms.
    await _settled(live)
    assert live.sample("retrieval_events_published_total") >= 2


async def test_a_broker_outage_drops_what_does_not_fit_and_publishing_resumes(live: Live, broker: RabbitMq) -> None:
    await _settled(live)
    dropped_before = live.sample("retrieval_events_dropped_total", reason="buffer_full")
    published_before = live.sample("retrieval_events_published_total")
    await asyncio.to_thread(broker.stop)
    sent = 3 * CAPACITY
    for i in range(sent):
        # Every request is answered while the broker is gone.
        resp = await live.stub.Search(pb.SearchRequest(query=f"outage query {i}", top_k=1), timeout=60)
        assert resp.query == f"outage query {i}"
    # The buffer kept the first CAPACITY events, the rest were dropped and counted.
    assert live.publisher.pending == CAPACITY
    assert live.sample("retrieval_events_dropped_total", reason="buffer_full") - dropped_before == sent - CAPACITY
    assert live.sample("retrieval_events_buffered") == CAPACITY
    assert live.sample("retrieval_events_published_total") == published_before

    await asyncio.to_thread(broker.start)
    await _until(lambda: live.publisher.pending == 0)  # the robust connection is back and the buffer drained
    events = [_event(m) for m in await _take(broker.url, CAPACITY)]
    expected = {hashlib.sha256(f"outage query {i}".encode()).hexdigest() for i in range(CAPACITY)}
    assert {e.query_sha256 for e in events} == expected
    assert live.sample("retrieval_events_published_total") - published_before == CAPACITY
    assert live.sample("retrieval_events_publish_errors_total") > 0


async def test_a_frozen_broker_never_holds_up_a_request(live: Live, broker: RabbitMq) -> None:
    await live.stub.Search(pb.SearchRequest(query="before the freeze", top_k=1))
    await _take(broker.url, 1)
    await _settled(live)
    published_before = live.sample("retrieval_events_published_total")
    broker.freeze()  # connections stay open; nothing is answered, not even publisher confirms
    try:
        await live.stub.Search(pb.SearchRequest(query="frozen 0", top_k=1), timeout=60)
        await _until(lambda: live.publisher._in_flight > 0)  # that event's publish is waiting for a confirm
        for i in range(1, 2 * CAPACITY):
            await live.stub.Search(pb.SearchRequest(query=f"frozen {i}", top_k=1), timeout=60)
        # Every request above was answered while a publish to the broker hung unanswered.
        assert live.publisher._in_flight > 0
        assert live.publisher.pending == CAPACITY
        assert live.sample("retrieval_events_published_total") == published_before
    finally:
        broker.thaw()
    await _until(lambda: live.publisher.pending == 0)
    events = [_event(m) for m in await _take(broker.url, CAPACITY)]
    assert {e.query_sha256 for e in events} == {hashlib.sha256(f"frozen {i}".encode()).hexdigest() for i in range(CAPACITY)}


async def test_close_ends_a_connection_still_being_made() -> None:
    """A broker that accepts the connection and never answers: close() ends the attempt and the
    connection's reconnect loop with it. That loop used to be left running (connect_robust()
    returns no connection when cancelled), shrugging off cancellation every 5 s."""
    arrived = asyncio.Event()
    handlers: set[asyncio.Task[object]] = set()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        arrived.set()
        await reader.read()  # never answers; ends when the publisher hangs up

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    before = asyncio.all_tasks()
    publisher = RabbitMqPublisher(f"amqp://guest:guest@127.0.0.1:{port}/", "x", "y", ServiceMetrics(), publish_timeout_s=300)
    try:
        await publisher.start()
        await arrived.wait()  # the AMQP handshake has begun and waits for the broker's answer
        await asyncio.wait_for(publisher.close(1.0), 600)  # only a hang guard
        left = asyncio.all_tasks() - before - handlers - {asyncio.current_task()}
        assert left == set(), [repr(t)[:200] for t in left]
    finally:
        server.close()


def test_sigterm_stops_a_server_whose_broker_never_answers(tmp_path: Path) -> None:
    """RETRIEVAL_EVENTS_URL at a port that takes connections and never answers the AMQP handshake:
    serve still exits 0 on SIGTERM (it logged "stopped" and went on reconnecting)."""
    with socket.socket() as hole:  # the kernel completes the TCP handshake; nothing ever accepts or answers
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)
        port = free_port()
        env = inherited_env()
        # The connection attempt outlasts the test: SIGTERM always arrives while it is being made.
        env.update(RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PORT=str(port), RETRIEVAL_METRICS_PORT="0", RETRIEVAL_DATA_DIR=str(tmp_path / "data"),
                   RETRIEVAL_EVENTS_URL=f"amqp://guest:guest@127.0.0.1:{hole.getsockname()[1]}/", RETRIEVAL_EVENTS_PUBLISH_TIMEOUT_S="300")
        log = tmp_path / "server.log"
        with log.open("wb") as out:
            server = subprocess.Popen([sys.executable, "-m", "retrieval_server.cli", "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
        with reaped(server):
            # SERVING comes after the application opened, which started the sender's connection attempt.
            wait_healthy(f"127.0.0.1:{port}", server, 600, log)
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(timeout=600)  # only a hang guard
            except subprocess.TimeoutExpired:
                pytest.fail("still running after SIGTERM:\n" + log.read_text(errors="replace")[-3000:])
            assert code == 0, log.read_text(errors="replace")[-3000:]
