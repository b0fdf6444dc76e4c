"""Work a request would repeat is done once: interceptor wrappers per method, a cached answer's messages."""

from __future__ import annotations

import dataclasses

import grpc

from retrieval_server.api import convert
from retrieval_server.api.handlers import PerMethod
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


def test_per_method_builds_once_for_the_same_handler() -> None:
    built: list[str] = []
    table: PerMethod[str] = PerMethod()
    handler = grpc.unary_unary_rpc_method_handler(lambda r, c: r)

    def build() -> str:
        built.append("x")
        return f"wrapped {len(built)}"

    assert table.get("/s/M", handler, build) == table.get("/s/M", handler, build) == "wrapped 1"
    other = grpc.unary_unary_rpc_method_handler(lambda r, c: r)
    assert table.get("/s/M", other, build) == "wrapped 2"  # a replaced handler is wrapped again
    assert table.get("/s/N", other, build) == "wrapped 3"
