"""An ingest refused whole for the disk floor counts its documents in retrieval_ingest_errors_total,
as one refused a batch at a time does: RESOURCE_EXHAUSTED is not in the error-ratio alert's codes
(callers cause it too), so once a volume was below the floor every ingest was refused, and no alert
(RetrievalIngestErrors included) fired."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_server.app import Application
from retrieval_server.backends.disk import DiskSpace
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, ResourceExhausted


async def test_an_ingest_refused_below_the_disk_floor_counts_its_documents_as_errors(tmp_path: Path) -> None:
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await app.open()
    try:
        errors = lambda: app.metrics.registry.get_sample_value("retrieval_ingest_errors_total")  # noqa: E731
        assert errors() == 0
        app.disk = DiskSpace.of(app.disk.paths, 1 << 40)  # a floor no volume is above
        sources = [DocumentSource(filename=f"{name}.txt", document_id=name, content=f"The {name} schedule.".encode()) for name in ("a", "b")]
        with pytest.raises(ResourceExhausted, match="below the floor RETRIEVAL_MIN_FREE_DISK_MB"):
            await app.ingest(sources)
        assert errors() == 2
        assert await app.metadata.get_documents(["a", "b"]) == {}
    finally:
        await app.close()
