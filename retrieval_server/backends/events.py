"""RetrievalCompleted events to RabbitMQ (aio-pika), never on a request's path.

:meth:`RabbitMqPublisher.publish` only appends to a bounded buffer and returns; a background task
sends what is buffered as persistent messages and waits for the broker's publisher confirms
before forgetting them. A broker that is down or slow fills the buffer; then new events are
dropped (``retrieval_events_dropped_total{reason="buffer_full"}``, and a log line when dropping
starts and when it stops), requests are unaffected. The connection is aio-pika's robust one:
it reconnects and restores the channel and exchange by itself; events that failed to publish
stay at the head of the buffer and are sent again (delivery is at least once, by event id).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque

import aio_pika
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp
from yarl import URL

from retrieval.v1 import events_pb2
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.domain import Strategy
from retrieval_server.observability.analytics import RetrievalCompleted
from retrieval_server.observability.metrics import ServiceMetrics

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1.0"
MESSAGE_TYPE = events_pb2.RetrievalCompleted.DESCRIPTOR.full_name
#: Events sent concurrently; their confirms arrive together.
BATCH = 64
_STRATEGIES = {
    Strategy.SEMANTIC: pb.STRATEGY_SEMANTIC,
    Strategy.KEYWORD: pb.STRATEGY_KEYWORD,
    Strategy.HYBRID: pb.STRATEGY_HYBRID,
    Strategy.ADAPTIVE: pb.STRATEGY_ADAPTIVE,
    Strategy.GRAPH: pb.STRATEGY_GRAPH,
}
_METHODS = {"query": events_pb2.RETRIEVAL_METHOD_QUERY, "search": events_pb2.RETRIEVAL_METHOD_SEARCH}


def to_message(event: RetrievalCompleted) -> events_pb2.RetrievalCompleted:
    timestamp = Timestamp()
    timestamp.FromDatetime(event.timestamp)
    return events_pb2.RetrievalCompleted(
        event_type="RetrievalCompleted",
        event_id=event.event_id,
        timestamp=timestamp,
        source="retrieval-service",
        version=SCHEMA_VERSION,
        method=_METHODS[event.method],
        query=event.query,
        query_sha256=event.query_sha256,
        user_id=event.user_id,
        strategy=_STRATEGIES[event.strategy],
        top_k=event.top_k,
        result_count=event.result_count,
        latency_ms=event.latency_ms,
        cache_hit=event.cache_hit,
        degraded=list(event.degraded),
        trace_id=event.trace_id,
    )


def to_amqp(event: RetrievalCompleted) -> aio_pika.Message:
    # Every field, its default included: a consumer reads "cacheHit": false rather than a missing key.
    body = json_format.MessageToJson(to_message(event), indent=None, always_print_fields_with_no_presence=True).encode()
    return aio_pika.Message(
        body,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=event.event_id,
        timestamp=event.timestamp,
        type=MESSAGE_TYPE,
        app_id="retrieval-service",
        headers={"schema_version": SCHEMA_VERSION},
    )


def _weight(event: RetrievalCompleted) -> int:
    """About the bytes an event holds: its texts as Python stores them, and a few hundred for the
    rest. Not their length: a text with one character beyond the BMP stores 4 bytes for each of
    its characters, and a buffer of such queries held 4 times its budget."""
    return 256 + sys.getsizeof(event.query) + sys.getsizeof(event.user_id) + sum(sys.getsizeof(d) for d in event.degraded)


class RabbitMqPublisher:
    def __init__(
        self, url: str, exchange: str, routing_key: str, metrics: ServiceMetrics, *, buffer: int = 10_000,
        buffer_bytes: int = 64 * 2**20, publish_timeout_s: float = 5.0, retry_backoff_s: float = 0.5,
    ) -> None:
        self._url = url
        self._where = f"{URL(url).host}:{URL(url).port}"
        self._exchange_name = exchange
        self._routing_key = routing_key
        self._m = metrics
        self._capacity = buffer
        #: what the events held may weigh (see _weight): 10,000 events of a 64 KiB query text
        #: (RETRIEVAL_EVENTS_QUERY=text) held 630 MiB while the broker was down
        self._capacity_bytes = buffer_bytes
        self._bytes = 0
        self._timeout = publish_timeout_s
        self._backoff = retry_backoff_s
        self._buffer: deque[RetrievalCompleted] = deque()
        self._in_flight = 0
        self._ready = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._dropped_since_log = 0
        self._task: asyncio.Task[None] | None = None
        self._connection: aio_pika.abc.AbstractRobustConnection | None = None
        self.connected = asyncio.Event()

    @property
    def pending(self) -> int:
        """Events held: buffered plus being published."""
        return len(self._buffer) + self._in_flight

    def publish(self, event: RetrievalCompleted) -> None:
        """Buffer the event for the background sender; never waits. Full buffer: drop it, counted."""
        weight = _weight(event)
        if self.pending >= self._capacity or self._bytes + weight > self._capacity_bytes:
            self._m.events_dropped.labels("buffer_full").inc()
            if self._dropped_since_log == 0:
                if self.pending >= self._capacity:
                    limit = f"{self._capacity} events, RETRIEVAL_EVENTS_BUFFER"
                else:
                    limit = f"{self._capacity_bytes / 2**20:g} MiB of events, RETRIEVAL_EVENTS_BUFFER_MB"
                log.warning("analytics buffer full (%s): dropping RetrievalCompleted events until %s catches up",
                            limit, self._where)
            self._dropped_since_log += 1
            return
        self._buffer.append(event)
        self._bytes += weight
        self._m.events_buffered.set(self.pending)
        self._drained.clear()
        self._ready.set()

    async def start(self) -> None:
        """Start the background sender; the broker need not be up (it is retried)."""
        self._task = asyncio.create_task(self._run(), name="rabbitmq-publisher")

    async def _connect(self) -> aio_pika.abc.AbstractExchange:
        delay = self._backoff
        while True:
            # Held before connecting, not taken from connect_robust(): connect() starts the
            # connection's reconnect loop, which only the connection's close() ends, and an attempt
            # that times out or is cancelled (close() below, at shutdown) would return no connection
            # to close; its loop went on reconnecting, and the server never exited.
            self._connection = aio_pika.RobustConnection(URL(self._url))
            try:
                await self._connection.connect(timeout=self._timeout)
                channel = await self._connection.channel(publisher_confirms=True)
                exchange = await channel.declare_exchange(self._exchange_name, aio_pika.ExchangeType.TOPIC, durable=True)
                log.info("publishing RetrievalCompleted events", extra={"broker": self._where, "exchange": self._exchange_name})
                self.connected.set()
                return exchange
            except Exception as exc:
                await self._connection.close()
                self._connection = None
                log.warning("cannot reach RabbitMQ at %s (%s); retrying in %.1f s", self._where, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _run(self) -> None:
        exchange = await self._connect()
        delay = self._backoff
        while True:
            await self._ready.wait()
            if not self._buffer:
                self._ready.clear()
                self._drained.set()
                continue
            batch = [self._buffer.popleft() for _ in range(min(BATCH, len(self._buffer)))]
            self._in_flight = len(batch)
            results = await asyncio.gather(*(self._send(exchange, e) for e in batch), return_exceptions=True)
            failed = [e for e, r in zip(batch, results, strict=True) if isinstance(r, BaseException)]
            self._buffer.extendleft(reversed(failed))
            self._bytes -= sum(_weight(e) for e, r in zip(batch, results, strict=True) if not isinstance(r, BaseException))
            self._in_flight = 0
            self._m.events_buffered.set(self.pending)
            self._m.events_published.inc(len(batch) - len(failed))
            if failed:
                self._m.events_publish_errors.inc(len(failed))
                error = next(r for r in results if isinstance(r, BaseException))
                log.warning("publishing %d events to %s failed (%r); retrying in %.1f s", len(failed), self._where, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = self._backoff
            if self._dropped_since_log:
                log.warning("analytics publishing caught up after dropping %d events", self._dropped_since_log)
                self._dropped_since_log = 0

    async def _send(self, exchange: aio_pika.abc.AbstractExchange, event: RetrievalCompleted) -> None:
        await exchange.publish(to_amqp(event), self._routing_key, mandatory=False, timeout=self._timeout)

    async def close(self, flush_timeout_s: float) -> None:
        """Give buffered events up to ``flush_timeout_s`` to go out, then disconnect (also a
        connection the sender was still making)."""
        if self._task is not None:
            if self.connected.is_set():
                try:
                    await asyncio.wait_for(self._drained.wait(), flush_timeout_s)
                except TimeoutError:
                    pass
            if self.pending:
                log.warning("closing with %d RetrievalCompleted events unsent", self.pending)
                self._m.events_dropped.labels("shutdown").inc(self.pending)
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()
