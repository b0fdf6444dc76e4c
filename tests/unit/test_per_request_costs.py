"""Work a request would repeat is done once: the edge's wrappers per method, a cached answer's messages."""

from __future__ import annotations

import dataclasses

import grpc

from retrieval_server.api import convert
from retrieval_server.api.edge import Edge, Layer
from retrieval_server.domain import ChildEvidence, Document, ParentChunk, QueryMetrics, QueryResult, RetrievedContext


def _context(i: int) -> RetrievedContext:
    return RetrievedContext(
        ParentChunk(f"d{i}#p0", f"d{i}", 0, f"parent text {i}", 3), Document(f"d{i}", title=f"title {i}", metadata={"k": "v"}), 0.5,
        (ChildEvidence(f"d{i}#p0c0", f"child {i}", 0.4),),
    )


def test_a_context_served_again_reuses_its_message_and_the_response_is_the_same() -> None:
    out = convert.ContextsOut(size=2)
    a, b = _context(1), _context(2)
    first = out(a)
    assert out(a) is first
    assert first == convert.context_out(a)
    result = QueryResult("q", (a, b), QueryMetrics(), cached=True)
    assert convert.query_out(result, out) == convert.query_out(result)


def test_an_equal_but_different_context_and_an_evicted_one_are_converted_afresh() -> None:
    out = convert.ContextsOut(size=2)
    a = _context(1)
    first = out(a)
    assert out(dataclasses.replace(a, score=0.9)) is not first
    assert out(dataclasses.replace(a, score=0.75)).score == 0.75
    out(_context(2)), out(_context(3))
    assert out(a) is not first  # evicted: the two most recent are kept


def test_the_edge_wraps_each_method_once_registered_handlers_first_and_remembers_no_unknown_method() -> None:
    built: list[str] = []

    def layer(name: str) -> Layer:
        def wrap(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
            built.append(f"{name} {method}")
            return grpc.unary_unary_rpc_method_handler(lambda r, c: f"{name}({handler.unary_unary(r, c)})")

        return wrap

    class Details(grpc.HandlerCallDetails):
        def __init__(self, method: str) -> None:
            self.method, self.invocation_metadata = method, ()

    edge = Edge([layer("outer"), layer("inner")])
    generic = grpc.method_handlers_generic_handler("s", {"M": grpc.unary_unary_rpc_method_handler(lambda r, c: "generic M"),
                                                         "N": grpc.unary_unary_rpc_method_handler(lambda r, c: "generic N")})
    edge.add_generic_rpc_handlers((generic,))
    edge.add_registered_method_handlers("s", {"M": grpc.unary_unary_rpc_method_handler(lambda r, c: "registered M")})
    m = edge.service(Details("/s/M"))
    assert m is not None and m.unary_unary(None, None) == "outer(inner(registered M))"
    assert edge.service(Details("/s/M")) is m and built == ["inner /s/M", "outer /s/M"]
    n = edge.service(Details("/s/N"))
    assert n is not None and n.unary_unary(None, None) == "outer(inner(generic N))"
    for _ in range(2):
        assert edge.service(Details("/s/Unknown")) is None
    assert len(built) == 4 and len(edge._wrapped) == 2
