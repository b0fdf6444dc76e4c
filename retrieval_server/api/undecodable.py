"""Requests that are not valid protobuf get INVALID_ARGUMENT with a plain message.

grpc answers a deserializer's exception with UNKNOWN and a Python class name. This interceptor
gives every method (ours, health, reflection) a deserializer that hands the failure to the method
as a value instead, and a behaviour that answers it with INVALID_ARGUMENT before the servicer runs.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc


@dataclass(frozen=True, slots=True)
class _Undecodable:
    message_type: str


def _safe(deserializer: Callable[[bytes], Any] | None, message_type: str) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except Exception:
            return _Undecodable(message_type)

    return deserialize


async def _reject(context: grpc.aio.ServicerContext, bad: _Undecodable) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {bad.message_type} protobuf message")


def _unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, _Undecodable):
            await _reject(context, request)
        return await behavior(request, context)

    return handle


def _unary_stream(behavior: Callable[..., Any]) -> Callable[..., Any]:
    # A streaming behaviour is either an async generator or a coroutine that writes with
    # context.write (grpc.health's Watch): the wrapper must be of the same kind.
    if not inspect.isasyncgenfunction(behavior):
        return _unary(behavior)

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        if isinstance(request, _Undecodable):
            await _reject(context, request)
        async for item in behavior(request, context):
            yield item

    return handle


def _checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    async def gen() -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Undecodable):
                await _reject(context, request)
            yield request

    return gen()


def _stream_unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def handle(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        return await behavior(_checked(requests, context), context)

    return handle


def _stream_stream(behavior: Callable[..., Any]) -> Callable[..., Any]:
    if not inspect.isasyncgenfunction(behavior):
        return _stream_unary(behavior)

    async def handle(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for item in behavior(_checked(requests, context), context):
            yield item

    return handle


class RejectUndecodable(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        name = getattr(handler.request_deserializer, "__qualname__", "request").split(".")[0]
        deserializer = _safe(handler.request_deserializer, name)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(_unary(handler.unary_unary), deserializer, handler.response_serializer)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(_unary_stream(handler.unary_stream), deserializer, handler.response_serializer)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(_stream_unary(handler.stream_unary), deserializer, handler.response_serializer)
        return grpc.stream_stream_rpc_method_handler(_stream_stream(handler.stream_stream), deserializer, handler.response_serializer)
