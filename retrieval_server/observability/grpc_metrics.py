"""The grpc-ecosystem server metrics for a grpc.aio server, as a layer of the server's edge.

Names, labels and semantics follow go-grpc-prometheus / go-grpc-middleware's prometheus provider,
so dashboards and alerts written for other gRPC services work unchanged:

* ``grpc_server_started_total{grpc_type,grpc_service,grpc_method}``
* ``grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}``; ``grpc_code`` is
  Go's spelling of the status code (``OK``, ``Canceled``, ``InvalidArgument``, ``DeadlineExceeded``...)
* ``grpc_server_msg_received_total`` and ``grpc_server_msg_sent_total`` (unary calls count one
  message each way; a response is counted only when the call succeeded)
* ``grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}``, a histogram

py-grpc-prometheus is written for the synchronous server; py-async-grpc-prometheus awaits
response-streaming handlers (which are async generators or write through the context), counts no
start for streaming requests and misses cancellations (``CancelledError`` is not an
``Exception``), so this module does it for every handler shape grpc.aio accepts.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric


_TYPES = {(False, False): "unary", (True, False): "client_stream", (False, True): "server_stream", (True, True): "bidi_stream"}


def go_code(code: grpc.StatusCode) -> str:
    """Go's name of a status code: the label value grpc-ecosystem dashboards match on."""
    if code is grpc.StatusCode.OK:
        return "OK"
    if code is grpc.StatusCode.CANCELLED:
        return "Canceled"
    return "".join(part.capitalize() for part in code.name.split("_"))


_RECEIVED_HELP = "Total number of RPC stream messages received on the server."
_SENT_HELP = "Total number of gRPC stream messages sent by the server."


def message_counts(families: Iterable[Metric]) -> list[Metric]:
    """``grpc_server_msg_received_total`` and ``grpc_server_msg_sent_total`` of every call, from
    ``families`` (this process's, or the sum over workers).

    A unary call receives its one message as it starts and sends one when it ends OK, so its
    counts are read from ``grpc_server_started_total`` and ``grpc_server_handled_total{grpc_code="OK"}``
    instead of counted a second time on every call; streaming calls' messages are counted as they pass."""
    by_name = {family.name: family for family in families}
    received = Metric("grpc_server_msg_received", _RECEIVED_HELP, "counter")
    sent = Metric("grpc_server_msg_sent", _SENT_HELP, "counter")
    for target in (received, sent):
        if target.name in by_name:
            target.samples += [s for s in by_name[target.name].samples if s.labels.get("grpc_type") != "unary"]
    for target, source, code in ((received, "grpc_server_started", None), (sent, "grpc_server_handled", "OK")):
        for sample in by_name[source].samples if source in by_name else ():
            if sample.labels.get("grpc_type") != "unary" or sample.labels.get("grpc_code", code) != code:
                continue
            labels = {k: v for k, v in sample.labels.items() if k != "grpc_code"}
            target.samples.append(sample._replace(name=target.name + sample.name[len(source):], labels=labels))
    return [received, sent]


class GrpcServerMetrics:
    """The grpc_server_* series; ``service``'s calls are also reported under its own names
    (:func:`service_view`)."""

    def __init__(self, registry: CollectorRegistry, buckets: Iterable[float], service: str) -> None:
        names = ["grpc_type", "grpc_service", "grpc_method"]
        self.started = Counter("grpc_server_started", "Total number of RPCs started on the server.", names, registry=registry)
        self.handled = Counter(
            "grpc_server_handled", "Total number of RPCs completed on the server, regardless of success or failure.",
            [*names, "grpc_code"], registry=registry,
        )
        # Streaming calls' messages; registered through scraped(), which adds the unary calls'.
        self.received = Counter("grpc_server_msg_received", _RECEIVED_HELP, names, registry=None)
        self.sent = Counter("grpc_server_msg_sent", _SENT_HELP, names, registry=None)
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            names, buckets=tuple(buckets), registry=registry,
        )
        registry.register(_Scraped(self, service))

    def preregister(self, services: Iterable[ServiceDescriptor]) -> None:
        """Create every method's series at zero, as go-grpc-prometheus does, so rates exist from the first scrape."""
        for service in services:
            for method in service.methods:
                labels = (_TYPES[method.client_streaming, method.server_streaming], service.full_name, method.name)
                for metric in (self.started, self.handling) if labels[0] == "unary" else (self.started, self.received, self.sent, self.handling):
                    metric.labels(*labels)
                for code in grpc.StatusCode:
                    self.handled.labels(*labels, go_code(code))


def cancelled_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """The code of a call whose handler grpc.aio cancelled: it does both when the caller cancels
    and when the call's deadline passes. The audit line uses it too, so that it says what the
    caller and the metrics see."""
    remaining = context.time_remaining()
    return grpc.StatusCode.DEADLINE_EXCEEDED if remaining is not None and remaining <= 0 else grpc.StatusCode.CANCELLED


def _final_code(context: grpc.aio.ServicerContext, error: BaseException | None) -> grpc.StatusCode:
    code = context.code()
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):
        # An abort the caller left before getting (api.errors.abort) ends as a cancel, with its code:
        # a StreamQuery given up on a stalled reader is the stall it was, whatever the reader did next.
        return code if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK else cancelled_code(context)
    if isinstance(code, grpc.StatusCode) and (error is None or code is not grpc.StatusCode.OK):
        return code
    # An exception that is not an abort reaches the caller as UNKNOWN.
    return grpc.StatusCode.OK if error is None else grpc.StatusCode.UNKNOWN


#: Go's spelling of each status code -> the proto's (``InvalidArgument`` -> ``INVALID_ARGUMENT``)
_PROTO_CODE = {go_code(code): code.name for code in grpc.StatusCode}


def service_view(families: Iterable[Metric], service: str) -> list[Metric]:
    """One service's calls under its own names, made at scrape time from ``families`` (the
    grpc_server_* families, from this process or summed over workers):

    * ``retrieval_requests_total{method,code}`` from ``grpc_server_handled_total``, the code
      spelled as in the proto (``INVALID_ARGUMENT``);
    * ``retrieval_request_duration_seconds{method}`` from ``grpc_server_handling_seconds``.

    They are the same calls, so they are counted once: a second counter and histogram on every
    call cost a tenth of an answer served from the cache."""
    requests = Metric("retrieval_requests", "RPCs by method and status code", "counter")
    latency = Metric("retrieval_request_duration_seconds", "RPC latency", "histogram")
    targets = {"grpc_server_handled": requests, "grpc_server_handling_seconds": latency}
    for family in families:
        target = targets.get(family.name)
        if target is None:
            continue
        for sample in family.samples:
            if sample.labels.get("grpc_service") != service:
                continue
            labels = {"method": sample.labels["grpc_method"]}
            if "grpc_code" in sample.labels:
                labels["code"] = _PROTO_CODE[sample.labels["grpc_code"]]
            if "le" in sample.labels:
                labels["le"] = sample.labels["le"]
            target.samples.append(sample._replace(name=target.name + sample.name[len(family.name):], labels=labels))
    return [requests, latency]


def scraped(families: Sequence[Metric], service: str) -> list[Metric]:
    """The families made at scrape time from ``families`` (this process's, or the sum over
    workers): :func:`message_counts` and :func:`service_view`."""
    return message_counts(families) + service_view(families, service)


class _Scraped:
    """A collector: :func:`scraped` of one process's series, at each scrape."""

    def __init__(self, metrics: GrpcServerMetrics, service: str) -> None:
        self._metrics, self._service = metrics, service

    def describe(self) -> list[Metric]:
        # The names, so that a scrape asking for some (``?name[]=``) finds these too.
        return scraped([], self._service)

    def collect(self) -> list[Metric]:
        m = self._metrics
        return scraped([family for metric in (m.started, m.handled, m.received, m.sent, m.handling) for family in metric.collect()],
                       self._service)


class _Series:
    """One method's series, looked up once: a label lookup costs more than the increment."""

    __slots__ = ("started", "received", "sent", "handling", "_handled", "_labels", "_by_code")

    def __init__(self, metrics: GrpcServerMetrics, labels: tuple[str, str, str]) -> None:
        self.started = metrics.started.labels(*labels)
        self.received = metrics.received.labels(*labels)
        self.sent = metrics.sent.labels(*labels)
        self.handling = metrics.handling.labels(*labels)
        self._handled = metrics.handled
        self._labels = labels
        self._by_code: dict[grpc.StatusCode, Any] = {}

    def handled(self, code: grpc.StatusCode) -> Any:
        series = self._by_code.get(code)
        if series is None:
            series = self._by_code[code] = self._handled.labels(*self._labels, go_code(code))
        return series


class _Call:
    """One RPC's bookkeeping: started on creation, handled once by :meth:`done`."""

    __slots__ = ("_series", "_start")

    def __init__(self, series: _Series) -> None:
        series.started.inc()
        self._series = series
        self._start = time.perf_counter()

    def received(self) -> None:
        self._series.received.inc()

    def sent(self) -> None:
        self._series.sent.inc()

    def done(self, context: grpc.aio.ServicerContext, error: BaseException | None) -> grpc.StatusCode:
        code = _final_code(context, error)
        self._series.handled(code).inc()
        self._series.handling.observe(time.perf_counter() - self._start)
        return code


class _CountingContext:
    """The servicer context, counting messages a handler reads or writes through it."""

    def __init__(self, context: grpc.aio.ServicerContext, call: _Call) -> None:
        self._context, self._call = context, call

    async def read(self) -> Any:
        message = await self._context.read()
        if message is not grpc.aio.EOF:
            self._call.received()
        return message

    async def write(self, message: Any) -> None:
        await self._context.write(message)
        self._call.sent()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


async def _counted(requests: AsyncIterator[Any], call: _Call) -> AsyncIterator[Any]:
    async for request in requests:
        call.received()
        yield request


class GrpcMetricsLayer:
    """Counts every call on the server, whichever service it is for: a layer of :class:`~retrieval_server.api.edge.Edge`."""

    def __init__(self, metrics: GrpcServerMetrics) -> None:
        self._m = metrics

    def __call__(self, full_method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, _, method = full_method.lstrip("/").rpartition("/")
        streams = (handler.request_streaming, handler.response_streaming)
        labels = (_TYPES[streams], service, method)
        behavior = {
            (False, False): handler.unary_unary,
            (True, False): handler.stream_unary,
            (False, True): handler.unary_stream,
            (True, True): handler.stream_stream,
        }[streams]
        if inspect.isasyncgenfunction(behavior):
            wrapped: Callable[..., Any] = self._streaming(behavior, labels, handler.request_streaming)
        elif inspect.iscoroutinefunction(behavior):
            wrapped = self._awaited(behavior, labels, handler.request_streaming, handler.response_streaming)
        else:
            return handler  # a synchronous handler on the migration thread pool: none on this server
        factory = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[streams]
        return factory(wrapped, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)

    def _awaited(
        self, behavior: Callable[..., Awaitable[Any]], labels: tuple[str, str, str], request_streaming: bool, response_streaming: bool
    ) -> Callable[..., Awaitable[Any]]:
        series = _Series(self._m, labels)
        if not request_streaming and not response_streaming:
            return self._unary(behavior, series)

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            call = _Call(series)
            if request_streaming:
                request = _counted(request, call)
            else:
                call.received()
            error: BaseException | None = None
            try:
                # Streams may also read or write through the context.
                response = await behavior(request, _CountingContext(context, call) if request_streaming or response_streaming else context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                code = call.done(context, error)
            if not response_streaming and code is grpc.StatusCode.OK:
                call.sent()
            return response

        return handle

    @staticmethod
    def _unary(behavior: Callable[..., Awaitable[Any]], series: _Series) -> Callable[..., Awaitable[Any]]:
        """A unary call's messages are not counted: :func:`message_counts` reads them from
        its started and handled series."""
        started, handling = series.started, series.handling

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started.inc()
            start = time.perf_counter()
            error: BaseException | None = None
            try:
                return await behavior(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                series.handled(_final_code(context, error)).inc()
                handling.observe(time.perf_counter() - start)

        return handle

    def _streaming(
        self, behavior: Callable[..., AsyncIterator[Any]], labels: tuple[str, str, str], request_streaming: bool
    ) -> Callable[..., AsyncIterator[Any]]:
        series = _Series(self._m, labels)

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            call = _Call(series)
            if request_streaming:
                request = _counted(request, call)
            else:
                call.received()
            error: BaseException | None = None
            try:
                async for response in behavior(request, _CountingContext(context, call)):
                    yield response
                    call.sent()
            except BaseException as exc:
                error = exc
                raise
            finally:
                call.done(context, error)

        return handle
