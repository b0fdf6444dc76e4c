"""StreamQuery for a caller that reads slower than the answer is written: the pipeline never waits
for it, and what it has not read is bounded."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api.servicer import STREAM_HELD_EVENTS, RetrievalServicer
from retrieval_server.domain import StageMetric


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
            return "the result"

    servicer = object.__new__(RetrievalServicer)  # only what StreamQuery reads
    servicer._app = SimpleNamespace(pipeline=Pipeline())  # type: ignore[assignment]
    servicer._query_options = lambda request, context, at="": None  # type: ignore[method-assign, assignment]
    servicer._respond = lambda options, result, context: pb.QueryResponse(query=result)  # type: ignore[method-assign, assignment, arg-type]
    stream = servicer.StreamQuery(pb.StreamQueryRequest(), None)  # type: ignore[arg-type]
    first = await anext(stream)
    await written.wait()  # the whole answer written, nothing more read
    events = [first] + [e async for e in stream]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "stage" and kinds[-2:] == ["stage", "response"] and events[-1].response.query == "the result"
    deltas = [e.answer_delta for e in events if e.WhichOneof("event") == "answer_delta"]
    assert 0 < len(deltas) <= STREAM_HELD_EVENTS and "".join(deltas) == "".join(pieces)
