"""The load scenarios: which RPC, which request, built from a dataset's queries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from retrieval.v1 import retrieval_pb2 as pb

SERVICE = "retrieval.v1.RetrievalService"
TOP_K = 5
#: fused candidates the cross-encoder scores in the rerank scenario
RERANK_CANDIDATES = 20


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    method: str
    build: Callable[[str], Message]
    #: every query is sent once before measuring (fills the semantic cache)
    warm_cache: bool = False
    description: str = ""
    service: str = SERVICE
    #: the answer's message type (the RetrievalService method's when None)
    response_type: type[Message] | None = None

    @property
    def call(self) -> str:
        return f"{self.service}.{self.method}"

    def method_on(self, channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
        """The unary method on ``channel`` (any service: the transport floor's echo too)."""
        response = self.response_type or (pb.SearchResponse if self.method == "Search" else pb.QueryResponse)
        return channel.unary_unary(f"/{self.service}/{self.method}", request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=response.FromString)

    def ghz_data(self, queries: list[str]) -> list[dict[str, object]]:
        """Request messages in ghz's JSON form; ghz sends the items of an array round-robin."""
        return [MessageToDict(self.build(q), preserving_proto_field_name=True) for q in queries]


def _query(strategy: int, *, cache: bool, rerank: bool) -> Callable[[str], Message]:
    return lambda q: pb.QueryRequest(query=q, top_k=TOP_K, strategy=strategy, use_cache=cache, rerank=rerank)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("search", "Search", lambda q: pb.SearchRequest(query=q, top_k=TOP_K), description="Search, dense, top 5"),
        Scenario("query-cached", "Query", _query(pb.STRATEGY_HYBRID, cache=True, rerank=False), warm_cache=True,
                 description="Query HYBRID answered from the semantic cache"),
        Scenario("query-hybrid", "Query", _query(pb.STRATEGY_HYBRID, cache=False, rerank=False),
                 description="Query HYBRID, no cache, no rerank"),
        Scenario("query-hybrid-rerank", "Query", _query(pb.STRATEGY_HYBRID, cache=False, rerank=True),
                 description=f"Query HYBRID + ONNX cross-encoder over {RERANK_CANDIDATES} candidates"),
    )
}
