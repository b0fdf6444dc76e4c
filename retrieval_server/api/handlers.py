"""Rewrapping grpc method handlers, for the edge's layers that act before a call's behaviour runs.

grpc.aio drives a streaming response only from an async generator function, and a behaviour may
instead be a coroutine writing with ``context.write`` (grpc.health's Watch): a wrapper must keep
the kind of what it wraps.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from retrieval_server.domain import ServiceError

BeforeCall = Callable[[grpc.aio.ServicerContext], Awaitable[None]]
CheckMessage = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]
#: told by a layer of each call it refuses: its full method name, its context and the error
Refused = Callable[[str, grpc.aio.ServicerContext, ServiceError], None]
#: told of each call its deadline or its caller's cancel ended: its full method name, its context
#: and its peer (read as the call came: grpc.aio names none once the deadline has passed)
CutShort = Callable[[str, grpc.aio.ServicerContext, str], None]
#: a method's behaviour wrapped, of the same kind (an async generator function stays one)
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


def rewrap(
    handler: grpc.RpcMethodHandler,
    *,
    deserializer: Callable[[bytes], Any] | None = None,
    before_call: BeforeCall | None = None,
    check_message: CheckMessage | None = None,
) -> grpc.RpcMethodHandler:
    """``handler`` with another request deserializer; its behaviour first awaits ``before_call``
    and ``check_message`` on every request message (either may abort the call)."""
    # What is not given is not awaited: a coroutine that does nothing still costs its creation.
    before, check = before_call, check_message

    def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        if check is None:
            return requests

        async def gen() -> AsyncIterator[Any]:
            async for request in requests:
                await check(request, context)
                yield request

        return gen()

    def unary_request(behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):
            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if before is not None:
                    await before(context)
                if check is not None:
                    await check(request, context)
                async for item in behavior(request, context):
                    yield item

            return stream

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if before is not None:
                await before(context)
            if check is not None:
                await check(request, context)
            return await behavior(request, context)

        return call

    def stream_request(behavior: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behavior):
            async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if before is not None:
                    await before(context)
                async for item in behavior(checked(requests, context), context):
                    yield item

            return stream

        async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            if before is not None:
                await before(context)
            return await behavior(checked(requests, context), context)

        return call

    return wrapped(handler, unary_request, stream_request, deserializer=deserializer)


def wrapped(
    handler: grpc.RpcMethodHandler,
    unary_request: Wrap,
    stream_request: Wrap,
    *,
    deserializer: Callable[[bytes], Any] | None = None,
    unary_as_stream: bool = False,
) -> grpc.RpcMethodHandler:
    """``handler`` with its behaviour wrapped by ``unary_request`` (a method of one request
    message) or ``stream_request`` (of a stream of them), its response streamed as before.
    ``unary_as_stream``: a unary-request method served as a stream-request one (the same on the
    wire), whose wrapper reads the message itself."""
    deserialize = deserializer or handler.request_deserializer
    serialize = handler.response_serializer
    if handler.unary_unary:
        unary = grpc.stream_unary_rpc_method_handler if unary_as_stream else grpc.unary_unary_rpc_method_handler
        return unary(unary_request(handler.unary_unary), deserialize, serialize)
    if handler.unary_stream:
        streamed = grpc.stream_stream_rpc_method_handler if unary_as_stream else grpc.unary_stream_rpc_method_handler
        return streamed(unary_request(handler.unary_stream), deserialize, serialize)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(stream_request(handler.stream_unary), deserialize, serialize)
    return grpc.stream_stream_rpc_method_handler(stream_request(handler.stream_stream), deserialize, serialize)
