"""Requests that are not valid protobuf get INVALID_ARGUMENT with a plain message.

grpc answers a deserializer's exception with UNKNOWN and a Python class name. This layer
gives every method (ours, health, reflection) a deserializer that hands the failure to the method
as a value instead, and answers it with INVALID_ARGUMENT before the servicer runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from retrieval_server.api.handlers import rewrap


@dataclass(frozen=True, slots=True)
class _Undecodable:
    message_type: str


def _safe(deserializer: Callable[[bytes], Any], message_type: str) -> Callable[[bytes], Any]:
    def deserialize(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except Exception:
            return _Undecodable(message_type)

    return deserialize


async def _reject_undecodable(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, _Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {request.message_type} protobuf message")


def reject_undecodable(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A layer of :class:`~retrieval_server.api.edge.Edge`: ``handler`` with a deserializer that
    never raises, answering an undecodable request with INVALID_ARGUMENT."""
    deserializer = handler.request_deserializer
    if deserializer is None:
        return handler
    name = getattr(deserializer, "__qualname__", "request").split(".")[0]
    return rewrap(handler, deserializer=_safe(deserializer, name), check_message=_reject_undecodable)
