"""An OTLP trace receiver: the collector's gRPC TraceService, from the published opentelemetry-proto stubs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2


@dataclass
class Received:
    """Every span exported to the receiver, with its resource's attributes."""

    spans: list[tuple[dict[str, str], trace_pb2.Span]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, predicate, timeout_s: float = 60.0) -> list[tuple[dict[str, str], trace_pb2.Span]]:  # type: ignore[no-untyped-def]
        with self.arrived:
            if not self.arrived.wait_for(lambda: predicate(self.spans), timeout=timeout_s):
                raise AssertionError(f"the spans never arrived; got {[s.name for _, s in self.spans]}")
            return list(self.spans)


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self._received = received

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        with self._received.arrived:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self._received.spans += [(resource, span) for span in scope_spans.spans]
            self._received.arrived.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """Yields (endpoint URL for OTEL_EXPORTER_OTLP_ENDPOINT, what was received)."""
    received = Received()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(None)
