"""StreamQuery for a caller that reads slower than the answer is written: the pipeline never waits
for it, what it has not read is bounded, and a caller that stops reading is given up."""

from __future__ import annotations

import asyncio
import gc
import weakref
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api.servicer import STREAM_HELD_EVENTS, RetrievalServicer
from retrieval_server.domain import StageMetric


class _Aborted(Exception):
    pass


class _Context:
    """What StreamQuery uses of a servicer context; each write waits until ``reading`` is set."""

    def __init__(self) -> None:
        self.sent: list[pb.StreamQueryResponse] = []
        self.reading = asyncio.Event()
        self.status: tuple[grpc.StatusCode, str] | None = None
        #: called as each write starts
        self.on_write: Any = lambda message: None

    async def send_initial_metadata(self, metadata: Any) -> None:
        pass

    async def write(self, message: pb.StreamQueryResponse) -> None:
        self.on_write(message)
        await self.reading.wait()
        self.sent.append(message)

    async def abort(self, code: grpc.StatusCode, details: str, trailing_metadata: Any = ()) -> None:
        self.status = (code, details)
        raise _Aborted


def _servicer(pipeline: Any, stall_s: float = 60.0) -> RetrievalServicer:
    servicer = object.__new__(RetrievalServicer)  # only what StreamQuery reads
    servicer._app = SimpleNamespace(pipeline=pipeline)  # type: ignore[assignment]
    servicer._s = SimpleNamespace(stream_stall_s=stall_s)  # type: ignore[assignment]
    servicer._query_options = lambda request, context, at="": None  # type: ignore[method-assign, assignment]
    servicer._respond = lambda options, result, context: pb.QueryResponse(query=result.query)  # type: ignore[method-assign, assignment, arg-type]
    return servicer


async def test_a_reader_that_reads_nothing_until_the_answer_is_written_gets_it_whole_in_fewer_pieces() -> None:
    """An unbounded queue held every piece as its own message: 66 MB for a reader stalled while
    the model streamed."""
    pieces = [f"piece {i}, " for i in range(5_000)]
    written = asyncio.Event()

    class Pipeline:
        async def query(self, options: Any, events: Any) -> Any:
            events(StageMetric("retrieve", 1.0, 3))
            for i, piece in enumerate(pieces):
                if i % 100 == 0:
                    await asyncio.sleep(0)  # the model's stream yields to the loop: the reader could read
                events(piece)
            events(StageMetric("generate", 1.0, 1))
            written.set()
            return SimpleNamespace(query="the result")

    context = _Context()
    call = asyncio.ensure_future(_servicer(Pipeline()).StreamQuery(pb.StreamQueryRequest(), context))  # type: ignore[arg-type]
    await written.wait()  # the whole answer written, nothing read
    context.reading.set()
    await call
    events = context.sent
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "stage" and kinds[-2:] == ["stage", "response"] and events[-1].response.query == "the result"
    deltas = [e.answer_delta for e in events if e.WhichOneof("event") == "answer_delta"]
    assert 0 < len(deltas) <= STREAM_HELD_EVENTS and "".join(deltas) == "".join(pieces)


@pytest.mark.parametrize("stages", [1, 0])
async def test_a_reader_that_never_reads_is_given_up_after_the_stall_bound_holding_nothing(stages: int) -> None:
    """A stalled reader held its call, and the finished answer (about 1 MiB for a top-100 one),
    until its connection closed: 30 minutes and an hour of grace. Stalled on a stage, or on the
    response itself, the stream ends RESOURCE_EXHAUSTED after the bound, the answer let go; the
    response's write holds only the response."""
    answered = asyncio.Event()
    results: list[weakref.ref[Any]] = []

    class Result:
        query = "the result"

    class Pipeline:
        async def query(self, options: Any, events: Any) -> Any:
            for _ in range(stages):
                events(StageMetric("retrieve", 1.0, 3))
            result = Result()
            results.append(weakref.ref(result))
            answered.set()
            return result

    context = _Context()
    held_at_response: list[bool] = []

    def on_write(message: pb.StreamQueryResponse) -> None:
        if message.HasField("response"):
            gc.collect()
            held_at_response.append(results[0]() is not None)

    context.on_write = on_write
    with pytest.raises(_Aborted):
        await _servicer(Pipeline(), stall_s=0.01).StreamQuery(pb.StreamQueryRequest(), context)  # type: ignore[arg-type]
    assert answered.is_set() and context.sent == []
    assert context.status is not None and context.status[0] is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "RETRIEVAL_STREAM_STALL_S" in context.status[1] and "0.01 s" in context.status[1]
    assert held_at_response == ([] if stages else [False])
    gc.collect()
    assert results[0]() is None
