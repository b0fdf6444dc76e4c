"""Holding a caller to its share of the server's calls, and a unary call to sending its request.

grpc.aio waits for a unary call's request message with no time limit, the call holding one of the
process's RETRIEVAL_MAX_CONCURRENT_CALLS slots all the while, and no layer runs before the message
has come: 1,000 streams of headers alone (ended, or left open, with no message; no credentials)
refused every other caller RESOURCE_EXHAUSTED until their connections closed, up to an hour and a
half later. So this outermost layer of :class:`~retrieval_server.api.edge.Edge` serves each
unary-request method as a stream-request one (the same on the wire) and reads its one message
itself, within RETRIEVAL_REQUEST_READ_S. As grpc's unary handler, it reads no second message: one
sent is ignored.

A caller may still fill the slots with calls that do send a message (Health Watch, a stalled
StreamQuery), from many connections: RETRIEVAL_MAX_CALLS_PER_PEER holds each address to its share.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from retrieval_server.api.edge import Layer
from retrieval_server.api.errors import abort
from retrieval_server.api.handlers import CutShort, Refused, wrapped
from retrieval_server.domain import InvalidArgument, RequestNotRead, ServiceError, TooManyCalls


#: what a call's behaviour is given as its request: a unary call's one message, or the stream
RequestOf = Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], Awaitable[Any]]


class CallsPerPeer:
    """Calls in flight by peer address, each address held to ``limit``. Only addresses with a call
    in flight are kept: as many as the calls, whoever connects."""

    __slots__ = ("limit", "_calls")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._calls: dict[str, int] = {}

    def enter(self, peer: str) -> bool:
        """Count a call of ``peer``'s; False, counting nothing, when it has ``limit`` in flight."""
        calls = self._calls.get(peer, 0)
        if calls >= self.limit:
            return False
        self._calls[peer] = calls + 1
        return True

    def leave(self, peer: str) -> None:
        calls = self._calls[peer] - 1
        if calls:
            self._calls[peer] = calls
        else:
            del self._calls[peer]

    def in_flight(self, peer: str) -> int:
        return self._calls.get(peer, 0)


def peer_address(peer: str) -> str:
    """The address of gRPC's peer string without the port (``ipv4:10.0.0.1:5000`` ->
    ``ipv4:10.0.0.1``, ``ipv6:[::1]:5000`` -> ``ipv6:[::1]``): a caller's connections share it."""
    return peer.rpartition(":")[0] or peer


class _ReadWithin:
    """A unary call's one request message, read within ``read_s``; :class:`RequestNotRead` past it,
    :class:`InvalidArgument` for a stream that ended without one.

    One timer cancels every call that has waited longer, instead of one scheduled and cancelled by
    each call (asyncio.timeout's, some 5 µs a call on a path held to 0.85 of a bare echo server's
    rate): a call whose message is already there pays a dict insert and delete. The timer runs
    only while calls wait."""

    __slots__ = ("_read_s", "_late", "_waiting", "_expired", "_timer")

    def __init__(self, read_s: float) -> None:
        self._read_s = read_s
        self._late = f"the request message did not arrive within {read_s:g} s (RETRIEVAL_REQUEST_READ_S)"
        #: each call waiting for its message (its task) and since when, oldest first
        self._waiting: dict[asyncio.Task[Any], float] = {}
        #: the calls the timer cancelled, until each has seen it
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def __call__(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        task = asyncio.current_task()
        assert task is not None  # grpc.aio runs each call in a task of its own
        self._waiting[task] = time.monotonic()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._read_s, self._sweep)
        try:
            request = await context.read()
        except asyncio.CancelledError:
            if task not in self._expired:
                raise
            self._expired.discard(task)
            if task.uncancel():  # cancelled for another reason as well (the call itself was)
                raise
            raise RequestNotRead(self._late) from None
        finally:
            self._waiting.pop(task, None)
        if request is grpc.aio.EOF:
            raise InvalidArgument("the request holds no message", field="request")
        return request

    def _sweep(self) -> None:
        self._timer = None
        now = time.monotonic()
        late = []
        for task, since in self._waiting.items():
            if now - since < self._read_s:
                self._timer = asyncio.get_running_loop().call_later(since + self._read_s - now, self._sweep)
                break
            late.append(task)
        for task in late:
            del self._waiting[task]
            self._expired.add(task)
            task.cancel()


async def _as_sent(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    return requests


def admit(read_s: float, peers: CallsPerPeer, on_refused: Refused | None = None, on_cut_short: CutShort | None = None) -> Layer:
    """A layer of :class:`~retrieval_server.api.edge.Edge`, the outermost: each call counted
    against its peer's limit before anything else, and a unary-request method's one message read
    within ``read_s`` (a stream that ends without one: INVALID_ARGUMENT; one still sending it:
    DEADLINE_EXCEEDED), so that neither holds a slot longer. ``on_refused`` is told of each call
    refused so (the audit log's lines for admin RPCs: they were refused before anyone was identified).
    ``on_cut_short`` is told of each unary-response call its deadline or its caller's cancel ended,
    wherever it was (its message awaited, its caller being verified, its work), with the peer as it
    was when the call came: grpc.aio names none once it has expired a call."""
    too_many = f"more than {peers.limit} calls at once from one address (RETRIEVAL_MAX_CALLS_PER_PEER): wait for one to end"
    read = _ReadWithin(read_s)

    def admitted(method: str, behavior: Callable[..., Any], request_of: RequestOf) -> Callable[..., Any]:
        async def refuse(context: grpc.aio.ServicerContext, exc: ServiceError) -> NoReturn:
            try:
                await abort(context, exc)
            except grpc.aio.AbortError:
                # Told once the refusal was sent. A stream its caller cancelled, or whose deadline
                # passed, reads as one that ended without a message, and the refusal then finds the
                # caller gone (abort's CancelledError): that call was cut short, not refused, and is
                # told so by call() below, as its caller and grpc.aio see it.
                if on_refused is not None:
                    on_refused(method, context, exc)
                raise

        async def request(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            try:
                return await request_of(requests, context)
            except ServiceError as exc:
                await refuse(context, exc)

        if inspect.isasyncgenfunction(behavior):
            async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                peer = peer_address(context.peer())
                if not peers.enter(peer):
                    await refuse(context, TooManyCalls(too_many))
                try:
                    async for item in behavior(await request(requests, context), context):
                        yield item
                finally:
                    peers.leave(peer)

            return stream

        async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            peer = context.peer()
            address = peer_address(peer)
            try:
                if not peers.enter(address):
                    await refuse(context, TooManyCalls(too_many))
                try:
                    return await behavior(await request(requests, context), context)
                finally:
                    peers.leave(address)
            except asyncio.CancelledError:
                # Here, outermost, a call cut before any layer within had told of it (its message
                # awaited, a JWKS fetch its token waited for) is still seen: the admin RPCs' audit
                # line, which only a refusal or the servicer wrote.
                if on_cut_short is not None:
                    on_cut_short(method, context, peer)
                raise

        return call

    def layer(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        return wrapped(handler, lambda behavior: admitted(method, behavior, read), lambda behavior: admitted(method, behavior, _as_sent),
                       unary_as_stream=True)

    return layer
