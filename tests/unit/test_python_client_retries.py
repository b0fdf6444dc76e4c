"""The Python client's retries after UNAVAILABLE, against a server that fails the first call of each
method on each connection as the real one does while a backend it needs is down."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from retrieval.v1 import retrieval_pb2_grpc as pb_grpc
from retrieval_client import DEFAULT_RETRIES, AsyncRetrievalClient, RetrievalClient, pb
from retrieval_client.client import _Attempts


class Flaky(pb_grpc.RetrievalServiceServicer):
    """Fails the first call of each method on each connection (all of them when ``always``) with
    UNAVAILABLE, ErrorInfo ``reason`` and a RetryInfo of ``delay_s`` (none when 0), as
    retrieval_server/api/errors.py does; a StreamQuery that got through sends one message and
    fails after it. ``arrived`` holds each attempt's method and time.monotonic() when it came."""

    def __init__(self, delay_s: float, *, always: bool = False, reason: str = "BACKEND_UNAVAILABLE") -> None:
        self.delay_s = delay_s
        self.always = always
        self.reason = reason
        self.arrived: list[tuple[str, float]] = []
        self._seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def attempts(self, method: str) -> list[float]:
        return [at for name, at in self.arrived if name == method]

    def _attempt(self, method: str, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.arrived.append((method, time.monotonic()))
            self._seen[method, context.peer()] += 1
            first = self._seen[method, context.peer()] == 1
        if first or self.always:
            self._unavailable(context)

    def _unavailable(self, context: grpc.ServicerContext) -> None:
        details = [any_pb2.Any(), any_pb2.Any()]
        details[0].Pack(error_details_pb2.ErrorInfo(reason=self.reason, domain="retrieval.v1"))
        if self.delay_s:
            seconds, fraction = divmod(self.delay_s, 1)
            details[1].Pack(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(seconds), nanos=int(fraction * 1e9))))
        status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="metadata store unavailable", details=details[: 2 if self.delay_s else 1])
        context.abort_with_status(rpc_status.to_status(status))

    def Query(self, request: pb.QueryRequest, context: grpc.ServicerContext) -> pb.QueryResponse:
        self._attempt("Query", context)
        return pb.QueryResponse(query=request.query)

    def Search(self, request: pb.SearchRequest, context: grpc.ServicerContext) -> pb.SearchResponse:
        self._attempt("Search", context)
        return pb.SearchResponse(query=request.query)

    def Health(self, request: pb.HealthRequest, context: grpc.ServicerContext) -> pb.HealthResponse:
        self._attempt("Health", context)
        return pb.HealthResponse(status=pb.SERVING_STATUS_SERVING)

    def IngestDocuments(self, request: pb.IngestDocumentsRequest, context: grpc.ServicerContext) -> pb.IngestDocumentsResponse:
        self._attempt("IngestDocuments", context)
        return pb.IngestDocumentsResponse()

    def DeleteDocuments(self, request: pb.DeleteDocumentsRequest, context: grpc.ServicerContext) -> pb.DeleteDocumentsResponse:
        self._attempt("DeleteDocuments", context)
        return pb.DeleteDocumentsResponse()

    def StreamQuery(self, request: pb.StreamQueryRequest, context: grpc.ServicerContext) -> Iterator[pb.StreamQueryResponse]:
        self._attempt("StreamQuery", context)
        yield pb.StreamQueryResponse(answer_delta="Reciprocal rank fusion")
        self._unavailable(context)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[Flaky, str]]]:
    servers: list[grpc.Server] = []

    def start(delay_s: float, *, always: bool = False, reason: str = "BACKEND_UNAVAILABLE") -> tuple[Flaky, str]:
        flaky = Flaky(delay_s, always=always, reason=reason)
        server = grpc.server(futures.ThreadPoolExecutor(4))
        pb_grpc.add_RetrievalServiceServicer_to_server(flaky, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return flaky, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


def test_a_query_search_and_health_are_tried_again_after_the_servers_retry_delay(serve: Callable[..., tuple[Flaky, str]]) -> None:
    """They failed at the first UNAVAILABLE, which the server sends with a RetryInfo saying when to try again."""
    flaky, target = serve(0.5)
    with RetrievalClient(target) as client:
        assert client.query("fusion").query == "fusion"
        assert client.search("fusion").query == "fusion"
        assert client.health().status == pb.SERVING_STATUS_SERVING
    for method in ("Query", "Search", "Health"):
        first, second = flaky.attempts(method)
        assert second - first >= 0.5, method  # the server's delay, longer than the first backoff (0.2 s)


async def test_the_async_client_tries_again_too(serve: Callable[..., tuple[Flaky, str]]) -> None:
    flaky, target = serve(0.5)
    async with AsyncRetrievalClient(target) as client:
        assert (await client.query("fusion")).query == "fusion"
        assert (await client.health()).status == pb.SERVING_STATUS_SERVING
    for method in ("Query", "Health"):
        first, second = flaky.attempts(method)
        assert second - first >= 0.5, method


def test_an_ingest_or_a_delete_is_never_tried_again(serve: Callable[..., tuple[Flaky, str]]) -> None:
    """A retried delete reports what its first attempt deleted as not found, a retried ingest what it stored as replaced."""
    flaky, target = serve(0.5)
    with RetrievalClient(target) as client:
        for call in (lambda: client.ingest([pb.DocumentInput(document_id="d", filename="d.txt", content=b"d")]), lambda: client.delete(["d"])):
            with pytest.raises(grpc.RpcError) as failed:
                call()
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert [method for method, _ in flaky.arrived] == ["IngestDocuments", "DeleteDocuments"]


async def test_the_async_client_never_tries_an_ingest_or_a_delete_again(serve: Callable[..., tuple[Flaky, str]]) -> None:
    flaky, target = serve(0.5)
    async with AsyncRetrievalClient(target) as client:
        with pytest.raises(grpc.RpcError):
            await client.ingest([pb.DocumentInput(document_id="d", filename="d.txt", content=b"d")])
        with pytest.raises(grpc.RpcError):
            await client.delete(["d"])
    assert [method for method, _ in flaky.arrived] == ["IngestDocuments", "DeleteDocuments"]


def test_a_deadline_shorter_than_the_retry_delay_ends_with_the_unavailable_without_waiting(
    serve: Callable[..., tuple[Flaky, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next attempt could not start before the deadline: the call ends at once with the
    server's UNAVAILABLE, which says more than a DEADLINE_EXCEEDED would."""
    flaky, target = serve(3600)
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    with RetrievalClient(target, timeout=30) as client, pytest.raises(grpc.RpcError) as failed:
        client.query("fusion")
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert (len(flaky.attempts("Query")), slept) == (1, [])


def test_retries_stop_after_the_count_given_or_none(serve: Callable[..., tuple[Flaky, str]]) -> None:
    flaky, target = serve(0, always=True)
    with RetrievalClient(target) as client, pytest.raises(grpc.RpcError) as failed:
        client.search("fusion")
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE and len(flaky.attempts("Search")) == DEFAULT_RETRIES + 1 == 4
    with RetrievalClient(target, retries=0) as client, pytest.raises(grpc.RpcError):
        client.health()
    assert len(flaky.attempts("Health")) == 1
    for retries in (-1, 1.5, True):
        with pytest.raises(ValueError, match=rf"^retries must be an integer from 0 \(no retry\) up \(got {retries!r}\)$"):
            RetrievalClient(target, retries=retries)  # type: ignore[arg-type]


def test_a_stream_is_tried_again_until_its_first_message(serve: Callable[..., tuple[Flaky, str]]) -> None:
    """After the first message the caller has read part of an answer another attempt would give again."""
    flaky, target = serve(0.5)
    received: list[pb.StreamQueryResponse] = []
    with RetrievalClient(target) as client, pytest.raises(grpc.RpcError) as failed:
        for message in client.stream_query("fusion"):
            received.append(message)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert [m.answer_delta for m in received] == ["Reciprocal rank fusion"]
    first, second = flaky.attempts("StreamQuery")
    assert second - first >= 0.5


async def test_the_async_client_tries_a_stream_again_until_its_first_message(serve: Callable[..., tuple[Flaky, str]]) -> None:
    flaky, target = serve(0.5)
    received: list[pb.StreamQueryResponse] = []
    async with AsyncRetrievalClient(target) as client:
        with pytest.raises(grpc.RpcError) as failed:
            async for message in client.stream_query("fusion"):
                received.append(message)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert [m.answer_delta for m in received] == ["Reciprocal rank fusion"]
    assert len(flaky.attempts("StreamQuery")) == 2


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def trailing_metadata(self) -> tuple[()]:
        return ()


def test_each_attempt_has_what_is_left_of_the_calls_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    timeouts: list[float | None] = []

    def search(request: pb.SearchRequest, *, metadata: object, timeout: float | None) -> pb.SearchResponse:
        timeouts.append(timeout)
        if len(timeouts) == 1:
            raise _Unavailable()
        return pb.SearchResponse()

    slept: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(s) or sleep(s))
    with RetrievalClient("127.0.0.1:1", timeout=10) as client:
        client._stub = type("Stub", (), {"Search": staticmethod(search)})()
        client.search("fusion")
    assert timeouts[0] == 10 and len(timeouts) == 2 and timeouts[1] is not None and 0 < timeouts[1] <= 10 - slept[0]
    assert 0.1 <= slept[0] <= 0.2  # the first backoff, jittered to half to all of it


class Writing(pb_grpc.RetrievalServiceServicer):
    """A StreamQuery that sends one message, then writes on (a long answer) until its call ends;
    ``ended`` holds, by query, an event set when the call of that query ended."""

    def __init__(self) -> None:
        self.ended: dict[str, threading.Event] = {}

    def StreamQuery(self, request: pb.StreamQueryRequest, context: grpc.ServicerContext) -> Iterator[pb.StreamQueryResponse]:
        ended = self.ended.setdefault(request.query.query, threading.Event())
        context.add_callback(ended.set)
        yield pb.StreamQueryResponse(answer_delta="Reciprocal rank fusion")
        if request.query.query != "read":
            ended.wait()


@pytest.fixture
def writing() -> Iterator[tuple[Writing, str]]:
    servicer = Writing()
    server = grpc.server(futures.ThreadPoolExecutor(4))
    pb_grpc.add_RetrievalServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(None)


def _no_call_left_running(servicer: Writing) -> bool:
    """Whether each call the server saw has ended. A call after the closed ones has come and gone
    first: a call the client made when the stream was made arrived before it. The wait's bound is
    what the call is given to end in once the client cancels it."""
    assert "read" in servicer.ended
    return all(ended.wait(30) for ended in servicer.ended.values())


def test_closing_a_stream_cancels_its_call_read_or_not(writing: tuple[Writing, str]) -> None:
    """Closed before its first read, a stream never ran its generator's finally: its call, made
    with the stream, went on writing on the server."""
    servicer, target = writing
    with RetrievalClient(target) as client:
        # Held, as a caller may hold it: dropped, its call was cancelled when collected.
        closed = client.stream_query("closed before reading")
        closed.close()
        stream = client.stream_query("closed after one message")
        assert next(stream).answer_delta == "Reciprocal rank fusion"
        stream.close()
        assert [m.answer_delta for m in client.stream_query("read")] == ["Reciprocal rank fusion"]
        assert _no_call_left_running(servicer)
        del closed


async def test_closing_an_async_stream_cancels_its_call_read_or_not(writing: tuple[Writing, str]) -> None:
    servicer, target = writing
    async with AsyncRetrievalClient(target) as client:
        closed = client.stream_query("closed before reading")
        await closed.aclose()  # type: ignore[attr-defined]
        stream = client.stream_query("closed after one message")
        assert (await anext(stream)).answer_delta == "Reciprocal rank fusion"
        await stream.aclose()  # type: ignore[attr-defined]
        assert [m.answer_delta async for m in client.stream_query("read")] == ["Reciprocal rank fusion"]
        assert await asyncio.to_thread(_no_call_left_running, servicer)
        del closed


class _UnavailableWith(grpc.RpcError):
    """An UNAVAILABLE as the server sends it: ErrorInfo ``reason``, and a RetryInfo of ``delay_s`` unless None."""

    def __init__(self, reason: str, delay_s: float | None) -> None:
        details = [any_pb2.Any()]
        details[0].Pack(error_details_pb2.ErrorInfo(reason=reason, domain="retrieval.v1"))
        if delay_s is not None:
            details.append(any_pb2.Any())
            details[1].Pack(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(delay_s))))
        self._trailers = rpc_status.to_status(status_pb2.Status(code=code_pb2.UNAVAILABLE, message="down", details=details)).trailing_metadata

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._trailers  # type: ignore[no-any-return]


def test_the_servers_retry_delay_is_jittered_never_shortened() -> None:
    """Every UNAVAILABLE of the server asks for 1 s, longer than the first backoffs: each wait was
    exactly 1 s, and clients that failed together came back together, in lockstep."""
    error = _UnavailableWith("BACKEND_UNAVAILABLE", 1)
    first_waits = [_Attempts(DEFAULT_RETRIES, None).wait(error) for _ in range(20)]
    attempts = _Attempts(DEFAULT_RETRIES, None)
    one_calls_waits = [attempts.wait(error) for _ in range(DEFAULT_RETRIES)]
    for wait in first_waits + one_calls_waits:
        assert wait is not None and 1 <= wait <= 1.5
    assert len(set(first_waits)) > 1 and len(set(one_calls_waits)) > 1


async def test_a_backend_that_timed_out_is_not_asked_again(serve: Callable[..., tuple[Flaky, str]]) -> None:
    """The server let a frozen backend's whole timeout pass: each attempt waited as long again, 4
    times MYSQL_TIMEOUT_S to the UNAVAILABLE. It says so with BACKEND_TIMEOUT and no RetryInfo."""
    flaky, target = serve(0, always=True, reason="BACKEND_TIMEOUT")
    with RetrievalClient(target) as client:
        for call in (lambda: client.query("fusion"), lambda: client.search("fusion"), lambda: client.health(), lambda: next(client.stream_query("fusion"))):
            with pytest.raises(grpc.RpcError) as failed:
                call()
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    async with AsyncRetrievalClient(target) as aclient:
        with pytest.raises(grpc.RpcError):
            await aclient.query("fusion")
    assert Counter(method for method, _ in flaky.arrived) == {"Query": 2, "Search": 1, "Health": 1, "StreamQuery": 1}
