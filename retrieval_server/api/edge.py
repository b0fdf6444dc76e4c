"""The layers every call goes through (metrics, undecodable requests, authentication), applied to
each method's handler once instead of by grpc.aio server interceptors on every call.

grpc.aio runs its interceptors as a chain of coroutines on every call, each awaiting the next
before the handler is even known, and each of ours then only looked up the wrapper it had built
for that method the first time. :class:`Edge` is the server's one generic handler: it finds a
method's handler among the services registered through it, wraps it in the layers (outermost
first) the first time the method is called, and answers grpc's look-up from that table after.
The calls are the same; the per-call chain is gone. An interceptor that must stay one (the
OpenTelemetry server span, when tracing is on) still runs, outside these layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

#: what a layer makes of a method's handler (given the method's full name), once per method
Layer = Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]


class Edge(grpc.GenericRpcHandler):
    """Stands in for the server where services register (``add_generic_rpc_handlers``,
    ``add_registered_method_handlers``: what generated ``add_*_to_server`` functions call), then is
    added to the server as its only handler (:meth:`serve_on`). Registered handlers would take
    precedence over every generic one, so none is registered with the server itself."""

    def __init__(self, layers: Sequence[Layer]) -> None:
        self._layers = tuple(layers)
        self._handlers: list[grpc.GenericRpcHandler] = []
        self._registered: dict[str, grpc.RpcMethodHandler] = {}
        #: only methods the server has: the table stays bounded whatever callers ask for
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._handlers.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self._registered.update({f"/{service}/{name}": handler for name, handler in handlers.items()})

    def serve_on(self, server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers((self,))

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = self._registered.get(method) or next(
            (h for h in (g.service(handler_call_details) for g in self._handlers) if h is not None), None
        )
        if handler is None:
            return None
        for layer in reversed(self._layers):
            handler = layer(method, handler)
        self._wrapped[method] = handler
        return handler
