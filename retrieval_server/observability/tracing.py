"""OpenTelemetry traces: a span per RPC, per workflow stage and per backend call.

Off by default (``RETRIEVAL_TRACES_EXPORTER=none``): then nothing of the SDK is imported, no
interceptor is installed, backends are not wrapped and the graph runs without an observer, so
the request path is exactly what it is without tracing. On, the exporter is configured by the
standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``...),
and the caller's W3C ``traceparent`` metadata (``OTEL_PROPAGATORS``) makes our spans part of its
trace. The tracer provider belongs to the application; no global provider is set.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import wrapt

from retrieval_server import __version__
from retrieval_server.observability.metrics import SERVICE

if TYPE_CHECKING:
    import grpc
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from retrieval_server.domain import QueryMetrics, QueryOptions, Strategy

log = logging.getLogger(__name__)
T = TypeVar("T")
# Backend lifecycle calls are not work done for a request.
_UNTRACED = {"open", "close", "bind_loading"}
#: how long a stop waits for the last spans to be exported (part of a pod's grace period)
FLUSH_S = 2.0


class TracedState(Protocol):
    """What the stage spans read from the query state."""

    options: QueryOptions
    metrics: QueryMetrics
    strategy: Strategy
    iteration: int
    cache_hit: bool
    contexts: list[Any]


def _attributes(method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """What a backend call was asked and what it returned, as counts (never contents)."""
    out: dict[str, Any] = {}
    for value in (*args, *kwargs.values()):
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and "retrieval.limit" not in out:
            out["retrieval.limit"] = value
        elif isinstance(value, (list, tuple)) and "retrieval.items" not in out:
            out["retrieval.items"] = len(value)
    if "temperature" in kwargs:
        out["gen_ai.request.temperature"] = float(kwargs["temperature"])
    if method == "lookup":
        out["retrieval.cache.outcome"] = "miss" if result is None else "hit"
    elif isinstance(result, (list, tuple, dict)) or hasattr(result, "shape"):
        out["retrieval.results"] = len(result)
    return out


class _TracedBackend(wrapt.ObjectProxy):  # type: ignore[misc]
    """A backend whose coroutine methods each run in a client span; isinstance still sees the backend."""

    def __init__(self, wrapped: Any, tracer: Tracer, component: str, attributes: Mapping[str, Any]) -> None:
        super().__init__(wrapped)
        self._self_traced: dict[str, Callable[..., Any]] = {}
        for name, fn in inspect.getmembers(type(wrapped), inspect.iscoroutinefunction):
            if not name.startswith("_") and name not in _UNTRACED:
                self._self_traced[name] = self._traced(tracer, f"{component}.{name}", name, getattr(wrapped, name), attributes)

    @staticmethod
    def _traced(tracer: Tracer, span_name: str, method: str, fn: Callable[..., Any], static: Mapping[str, Any]) -> Callable[..., Any]:
        from opentelemetry.trace import SpanKind

        async def call(*args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span(span_name, kind=SpanKind.CLIENT, attributes=dict(static)) as span:
                result = await fn(*args, **kwargs)
                span.set_attributes(_attributes(method, args, kwargs, result))
                return result

        return call

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_self_"):
            raise AttributeError(name)
        traced = self._self_traced.get(name)
        return traced if traced is not None else getattr(self.__wrapped__, name)


class StageSpans:
    """The graph runner's observer: a span around the whole query and one per stage."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def run(self, state: TracedState) -> Iterator[None]:
        from opentelemetry import trace

        rpc = trace.get_current_span()
        with self._tracer.start_as_current_span("workflow.query") as span:
            span.set_attributes({"retrieval.strategy.requested": state.options.strategy.value, "retrieval.top_k": state.options.top_k})
            yield
            m = state.metrics
            summary = {
                "retrieval.strategy": m.strategy_used.value,
                "retrieval.contexts": len(state.contexts),
                "retrieval.cache_hit": state.cache_hit,
                "retrieval.iterations": m.iterations,
                "retrieval.sufficiency": m.sufficiency_score,
                "retrieval.decomposition_used": m.decomposition_used,
                "retrieval.degraded": list(m.degraded),
                "retrieval.stages": len(m.stages),
            }
            span.set_attributes(summary)
            rpc.set_attributes(summary)

    @contextmanager
    def stage(self, name: str, state: TracedState) -> Iterator[None]:
        with self._tracer.start_as_current_span(f"stage.{name}") as span:
            yield
            recorded = state.metrics.stages[-1]
            span.set_attributes({
                "retrieval.stage": name,
                "retrieval.count": recorded.count,
                "retrieval.strategy": state.strategy.value,
                "retrieval.iteration": state.iteration,
                "retrieval.cache_hit": state.cache_hit,
                "retrieval.degraded": list(state.metrics.degraded),
            })


class Tracing:
    """The application's tracer provider, or nothing when tracing is off."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer("retrieval_server", __version__) if provider is not None else None

    @classmethod
    def from_settings(cls, exporter: Literal["none", "otlp", "console"]) -> Tracing:
        if exporter == "none":
            return cls(None)
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

        resource = Resource.create({SERVICE_VERSION: __version__})  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: "retrieval-service"}))
        provider = TracerProvider(resource=resource)  # sampler from OTEL_TRACES_SAMPLER
        span_exporter: SpanExporter
        if exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            span_exporter = OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_*
        else:
            span_exporter = ConsoleSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(span_exporter))  # OTEL_BSP_*
        return cls(provider)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def server_interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """The RPC span, joined to the caller's trace from its ``traceparent`` metadata."""
        if self.provider is None:
            return []
        from opentelemetry.instrumentation.grpc import filters
        from opentelemetry.instrumentation.grpc._aio_server import OpenTelemetryAioServerInterceptor
        from opentelemetry.instrumentation.grpc.version import __version__ as instrumentation_version

        class RpcSpans(OpenTelemetryAioServerInterceptor):  # type: ignore[misc]
            """The stock interceptor iterates every response-streaming behaviour with ``async for``;
            a coroutine writing with ``context.write`` (StreamQuery, for its stall bound) then failed
            UNKNOWN. Such a behaviour is awaited as a unary one is: the same span and attributes,
            and grpc.aio takes a coroutine's writes as the stream."""

            def _intercept_aio_server_stream(self, behavior: Callable[..., Any], handler_call_details: grpc.HandlerCallDetails) -> Callable[..., Any]:
                if inspect.isasyncgenfunction(behavior):
                    return super()._intercept_aio_server_stream(behavior, handler_call_details)  # type: ignore[no-any-return]
                return self._intercept_aio_server_unary(behavior, handler_call_details)  # type: ignore[no-any-return]

        # The scope the stock interceptor's factory gives its spans.
        tracer = self.provider.get_tracer("opentelemetry.instrumentation.grpc", instrumentation_version, schema_url="https://opentelemetry.io/schemas/1.11.0")
        # Our service only: health probes and reflection would bury the traces that matter.
        return [RpcSpans(tracer, filter_=filters.service_name(SERVICE))]

    def wrap(self, backend: T, component: str, attributes: Mapping[str, Any] | None = None) -> T:
        """``backend`` with a span per call when tracing is on; ``backend`` itself otherwise."""
        if self._tracer is None or backend is None:
            return backend
        return _TracedBackend(backend, self._tracer, component, attributes or {})  # type: ignore[return-value]

    def stage_observer(self) -> StageSpans | None:
        return StageSpans(self._tracer) if self._tracer is not None else None

    def shutdown(self) -> None:
        """Export what is buffered, waiting at most :data:`FLUSH_S`, then stop: a collector that
        accepts connections but never answers held the stop for the exporter's whole timeout
        (10 s), past a pod's grace period. The export goes on in a daemon thread, which the
        process's exit ends."""
        if self.provider is None:
            return
        flush = threading.Thread(target=self.provider.shutdown, name="trace-flush", daemon=True)
        flush.start()
        flush.join(FLUSH_S)
        if flush.is_alive():
            log.warning("the last spans were not exported within %.0f s; stopping without them", FLUSH_S)


def current_trace_id() -> str:
    """The active span's trace id (32 hex digits), or '' outside a recorded trace."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""
