"""The RPC metrics and spans name our service by a constant, so that a command serving no RPC need
not import the generated code: it must stay the contract's name."""

from retrieval.v1 import retrieval_pb2
from retrieval_server.observability.metrics import SERVICE


def test_the_service_name_metrics_and_spans_use_is_the_contracts() -> None:
    assert SERVICE == retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name
