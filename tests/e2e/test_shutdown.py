"""A graceful stop whose grace period ends while an ingest is writing."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.app import Application, metadata_store_for
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource
from retrieval_server.server import start_server


class _Stored(logging.Handler):
    """Sets ``event`` when the indexer logs its first stored document, and keeps every error."""

    def __init__(self, event: asyncio.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "document stored":
            self.event.set()
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage())


async def test_the_stores_close_only_after_the_document_being_written_is_finished(tmp_path: Path) -> None:
    # One child per document and 16 children per batch: the first "document stored" is followed,
    # in the same task and before it yields, by the next document's write; the stop comes then.
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path, upsert_batch_size=16)
    running = await start_server(settings)
    stored = asyncio.Event()
    handler = _Stored(stored)
    indexer_log = logging.getLogger("retrieval_server.ingest.indexer")
    level = indexer_log.level
    indexer_log.addHandler(handler)
    indexer_log.setLevel(logging.DEBUG)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            docs = [pb.DocumentInput(document_id=f"doc{i}", filename=f"doc{i}.txt", content=f"Document {i} is about topic {i}.".encode())
                    for i in range(64)]
            call = stub.IngestDocuments(pb.IngestDocumentsRequest(documents=docs), metadata=[("x-user-role", "ADMIN")])
            await stored.wait()
            await running.stop(0)  # no grace: the call is cancelled mid-write
            with pytest.raises(grpc.aio.AioRpcError):
                await call
    finally:
        indexer_log.removeHandler(handler)
        indexer_log.setLevel(level)

    assert handler.errors == []  # no write ran into a closed store
    metadata = metadata_store_for(settings.model_copy(update={"read_only": True}))
    await metadata.open()
    try:
        # Every document begun was finished: nothing is left for the next start to reconcile.
        assert await metadata.pending_writes() == []
        assert await metadata.count_documents() >= 2
    finally:
        await metadata.close()


async def test_a_write_s_cache_invalidation_is_part_of_the_write_close_waits_for(tmp_path: Path) -> None:
    """A replacing ingest drops cached answers after its write; close() waits for that too, rather
    than closing the cache (and the stores the optimization uses) under it."""
    application = Application(load_settings(data_dir=tmp_path, metrics_enabled=False))
    await application.open()
    source = DocumentSource(filename="a.txt", content=b"Reciprocal rank fusion combines ranked lists.", document_id="a")
    await application.ingest([source])
    assert application.cache is not None
    invalidate = application.cache.invalidate_documents
    in_write: list[bool] = []

    async def watched(document_ids: list[str]) -> None:
        in_write.append(bool(application._writes))  # what close() waits for
        await invalidate(document_ids)

    application.cache.invalidate_documents = watched  # type: ignore[method-assign]
    try:
        report = await application.ingest([replace(source, content=b"Rank fusion, second version.")])
    finally:
        await application.close()
    assert [d.document_id for d in report.documents if d.replaced] == ["a"]
    assert in_write == [True], "the cache was invalidated outside the write close() waits for"
