"""A document replacement held between writing its points and committing its rows.

The indexer writes a new version's points before its rows commit: a query can find the new points
while the rows still hold the old version. Tests of that window hold the commit and release it at
the moment they examine."""

from __future__ import annotations

import asyncio
from typing import Any

from retrieval_server.backends.metadata_store import MetadataStore


class HeldCommit:
    """``replace_document`` of ``store``, set in its place, commits only once :meth:`release` is awaited."""

    def __init__(self, store: MetadataStore) -> None:
        self._replace = store.replace_document
        self.points_written, self.released, self._committed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def replace_document(self, *args: Any, **kwargs: Any) -> Any:
        self.points_written.set()
        await self.released.wait()
        try:
            return await self._replace(*args, **kwargs)
        finally:
            self._committed.set()

    async def release(self) -> None:
        """Let the replacement commit, and return once it has."""
        self.released.set()
        await self._committed.wait()
