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
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from retrieval_server.api.edge import Layer
from retrieval_server.api.errors import abort
from retrieval_server.domain import InvalidArgument, RequestNotRead, TooManyCalls


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


def admit(read_s: float, peers: CallsPerPeer) -> Layer:
    """A layer of :class:`~retrieval_server.api.edge.Edge`, the outermost: each call counted
    against its peer's limit before anything else, and a unary-request method's one message read
    within ``read_s`` (a stream that ends without one: INVALID_ARGUMENT; one still sending it:
    DEADLINE_EXCEEDED), so that neither holds a slot longer."""
    too_many = f"more than {peers.limit} calls at once from one address (RETRIEVAL_MAX_CALLS_PER_PEER): wait for one to end"

    async def enter(context: grpc.aio.ServicerContext) -> str:
        peer = peer_address(context.peer())
        if not peers.enter(peer):
            await abort(context, TooManyCalls(too_many))
        return peer

    async def read(context: grpc.aio.ServicerContext) -> Any:
        try:
            async with asyncio.timeout(read_s):
                request = await context.read()
        except TimeoutError:
            await abort(context, RequestNotRead(f"the request message did not arrive within {read_s:g} s (RETRIEVAL_REQUEST_READ_S)"))
        if request is grpc.aio.EOF:
            await abort(context, InvalidArgument("the request holds no message", field="request"))
        return request

    def unary_request(behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):
            async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                peer = await enter(context)
                try:
                    async for item in behavior(await read(context), context):
                        yield item
                finally:
                    peers.leave(peer)

            return stream

        async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            peer = await enter(context)
            try:
                return await behavior(await read(context), context)
            finally:
                peers.leave(peer)

        return call

    def stream_request(behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):
            async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                peer = await enter(context)
                try:
                    async for item in behavior(requests, context):
                        yield item
                finally:
                    peers.leave(peer)

            return stream

        async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            peer = await enter(context)
            try:
                return await behavior(requests, context)
            finally:
                peers.leave(peer)

        return call

    def layer(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserialize, serialize = handler.request_deserializer, handler.response_serializer
        if handler.unary_unary:
            return grpc.stream_unary_rpc_method_handler(unary_request(handler.unary_unary), deserialize, serialize)
        if handler.unary_stream:
            return grpc.stream_stream_rpc_method_handler(unary_request(handler.unary_stream), deserialize, serialize)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(stream_request(handler.stream_unary), deserialize, serialize)
        return grpc.stream_stream_rpc_method_handler(stream_request(handler.stream_stream), deserialize, serialize)

    return layer
