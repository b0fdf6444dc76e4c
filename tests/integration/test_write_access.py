"""A caller who is not SUPER_ADMIN replaces or deletes only stored documents it may read, checked
under the document's lock: a document made private by another writer after the caller's ingest
read it, and before its write, is not replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, Identity, Role
from tests.support.keeper import PUBLIC, SECRET, keeper

MALLORY = Identity("mallory", Role.ADMIN)
@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    yield application
    await application.close()


async def test_a_document_made_private_while_an_admin_replaces_it_is_kept(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not (await app.ingest([keeper(PUBLIC)])).errors
    embed, made_private = app.indexer._embed, False

    async def after_alice_made_it_private(*args: Any) -> np.ndarray:
        # Mallory's version is prepared (the public one read and allowed), not yet written.
        nonlocal made_private
        if not made_private:
            made_private = True
            assert not (await app.ingest([keeper(SECRET, access=Access.PRIVATE, owner_id="alice")])).errors
        return await embed(*args)

    monkeypatch.setattr(app.indexer, "_embed", after_alice_made_it_private)
    report = await app.ingest([keeper("Nothing to see here.")], writer=MALLORY)
    assert made_private and not report.documents
    assert [(e.source, e.reason) for e in report.errors] == [
        ("keeper.txt", "document_id 'keeper' is taken by a document the caller may not read: only SUPER_ADMIN may replace it")
    ]
    stored = await app.metadata.get_document("keeper")
    assert stored is not None and stored.owner_id == "alice" and stored.access is Access.PRIVATE
    assert await app.vectors.count("keeper") == await app.vectors.count("keeper", stored.version) > 0  # none of mallory's points
