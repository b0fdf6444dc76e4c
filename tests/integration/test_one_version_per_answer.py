"""An answer holds each document at one version, and the cache serves none that holds an older one.

Parent ids are not versioned (``policy#p1``), and a replacement writes its points before its rows
commit: a query's hits can hold the old version's parents and the new one's. Enrich reads parents
in batches when some are skipped, so a commit between two batches could give one answer both
versions, and the cache kept it while its last context was of the stored version.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.backends.cache import CachedAnswer
from retrieval_server.config import load_settings
from retrieval_server.domain import AccessFilter, DocumentSource, QueryOptions, Strategy, version_of
from retrieval_server.workflow import nodes
from retrieval_server.workflow.nodes import cache_config
from tests.support.held_commit import HeldCommit

FILL = " ".join(f"Paragraph filler sentence number {i} talks about harbours, ledgers and quiet winter roads." for i in range(30))
V1 = "OLDTEXT zebra zebra zebra umbrella. The old policy said zebra umbrella twice."
# Three parents: the first without the query's word, the other two with it once.
V2 = f"NEWTEXT intro. {FILL}\n\nNEWTEXT second part mentions zebra once. {FILL}\n\nNEWTEXT third part mentions zebra once. {FILL}"
ASK = QueryOptions("zebra", 2, strategy=Strategy.KEYWORD, rerank=False)


def _policy(text: str) -> DocumentSource:
    return DocumentSource(filename="policy.txt", content=text.encode(), document_id="policy")


@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path))
    await application.open()
    yield application
    await application.close()


async def test_a_replacement_committed_between_enrichs_reads_leaves_one_version_in_the_answer(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not (await app.ingest([_policy(V1)])).errors
    held = HeldCommit(app.metadata)
    read = app.metadata.get_parents_and_documents
    batches: list[list[str]] = []

    async def then_the_commit(parent_ids: Sequence[str]) -> Any:
        out = await read(parent_ids)
        batches.append(list(parent_ids))
        if not held.released.is_set():  # the replacement commits between enrich's first batch and the next
            await held.release()
            # Stored after the ingest's invalidation, as when it could not reach another process's cache.
            await replacing
        return out

    monkeypatch.setattr(app.metadata, "replace_document", held.replace_document)
    monkeypatch.setattr(app.metadata, "get_parents_and_documents", then_the_commit)
    replacing = asyncio.create_task(app.ingest([_policy(V2)]))
    await held.points_written.wait()
    first = await app.pipeline.query(ASK)
    assert not (await replacing).errors
    assert len(batches) >= 2  # the race this is about: a parent skipped in the first batch, the next read after the commit
    assert len({c.document.content_hash for c in first.contexts}) <= 1
    monkeypatch.setattr(app.metadata, "get_parents_and_documents", read)
    again = await app.pipeline.query(ASK)
    assert again.contexts and not any("OLDTEXT" in c.parent.content for c in again.contexts)


async def test_a_cached_answer_holding_a_replaced_version_is_not_served(app: Application) -> None:
    assert not (await app.ingest([_policy(V1)])).errors
    old = (await app.pipeline.query(ASK)).contexts[0]
    assert not (await app.ingest([_policy(V2)])).errors
    current = await app.pipeline.query(ASK)
    assert not current.cached and current.contexts
    # Both versions, the stored one last: the check read one document per id, the last context's.
    mixed = CachedAnswer((old, *current.contexts), Strategy.KEYWORD)
    await app.pipeline.deps.cache.store(ASK.query, None, cache_config(ASK), AccessFilter.for_identity(ASK.identity).partition, mixed)  # type: ignore[union-attr]
    again = await app.pipeline.query(ASK)
    assert not any("OLDTEXT" in c.parent.content for c in again.contexts) and not again.cached


@pytest.mark.parametrize("strategy", [Strategy.SEMANTIC, Strategy.HYBRID, Strategy.KEYWORD])
async def test_a_replacement_in_flight_leaves_the_committed_version_in_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: Strategy
) -> None:
    """While a replacement's points are written and its rows not committed, each chunk has a point
    of each version. Fusion kept one per chunk id, the first, which could be the new version's (its
    unchanged paragraph scores the same): enrich dropped it, and the stored version was missing
    from SEMANTIC and HYBRID answers."""
    app = Application(load_settings(data_dir=tmp_path, parent_chunk_tokens=24, child_chunk_tokens=24, child_overlap_tokens=0))
    await app.open()
    try:
        await _in_flight(app, monkeypatch, strategy)
    finally:
        await app.close()


async def _in_flight(app: Application, monkeypatch: pytest.MonkeyPatch, strategy: Strategy) -> None:
    keeper = "Lighthouse keepers trim the lamp wick every night before the ships pass the rocks."
    assert not (await app.ingest([_policy(f"{keeper}\n\nThe harbour ledger lists grain and timber."),
                                  DocumentSource(filename="o.txt", content=b"Bakers knead dough at dawn.", document_id="other")])).errors
    stored = (await app.metadata.document_versions(["policy"]))["policy"]
    held = HeldCommit(app.metadata)
    monkeypatch.setattr(app.metadata, "replace_document", held.replace_document)
    replacing = asyncio.create_task(app.ingest([_policy(f"{keeper}\n\nThe harbour ledger now lists coal and copper.")]))
    await held.points_written.wait()
    during = await app.pipeline.query(QueryOptions("lighthouse lamp wick at night", 3, strategy=strategy, use_cache=False, rerank=False))
    await held.release()
    assert not (await replacing).errors
    assert during.contexts[0].document.document_id == "policy" and during.contexts[0].document.content_hash == stored
    assert [m.stage for m in during.metrics.stages].count("retrieve") == 1  # found at once, not by searching again


@pytest.mark.parametrize("stored_first", [True, False])
async def test_a_document_its_metadata_alone_matched_stays_in_the_answer_while_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored_first: bool
) -> None:
    """The metadata leg reads a document no other leg found by its first chunk's id, which while a
    replacement is written has a point of each version, in whatever order the store keeps them.
    It kept one, the last: the uncommitted one, enrich dropped it, and the document was missing
    (searching again found the same)."""
    # A pool of top_k hits, which the dense legs fill with lighthouses; the metadata leg leads.
    app = Application(load_settings(data_dir=tmp_path, cache_backend="none", child_candidates_per_context=1, metadata_weight=5.0))
    await app.open()
    try:
        lighthouses = [
            DocumentSource(filename=f"l{i}.txt", content=f"Lighthouse {i} keepers trim the lamp wick before ships pass rock {i}.".encode(), document_id=f"l{i}")
            for i in range(30)
        ]
        nimbus = {"team": "Nimbus"}  # in no text: only the metadata leg finds the policy
        assert not (await app.ingest([*lighthouses, DocumentSource(filename="policy.txt", content=b"The harbour ledger lists grain.", document_id="policy", metadata=nimbus)])).errors
        ask = QueryOptions("Nimbus", 3, strategy=Strategy.HYBRID, use_cache=False, rerank=False)
        assert (await app.pipeline.query(ask)).contexts[0].document.document_id == "policy"
        stored = (await app.metadata.document_versions(["policy"]))["policy"]
        read, asked = app.vectors.get_chunks, []

        async def in_order(chunk_ids: Sequence[str]) -> Any:
            asked.extend(chunk_ids)
            return sorted(await read(chunk_ids), key=lambda h: (h.version == version_of(stored)) is not stored_first)

        monkeypatch.setattr(app.vectors, "get_chunks", in_order)
        held = HeldCommit(app.metadata)
        monkeypatch.setattr(app.metadata, "replace_document", held.replace_document)
        replacing = asyncio.create_task(app.ingest([DocumentSource(filename="policy.txt", content=b"The harbour ledger now lists coal.", document_id="policy", metadata=nimbus)]))
        await held.points_written.wait()
        try:
            both = await read(["policy#p0c0"])
            during = await app.pipeline.query(ask)
            # Found by another leg at both versions, scored alike: the metadata leg's score goes to both.
            found = await nodes._metadata_leg([("policy", 1.0)], app.pipeline.deps, {"dense:0": sorted(both, key=lambda h: h.version == version_of(stored))})
        finally:
            await held.release()
        assert not (await replacing).errors
    finally:
        await app.close()
    assert len(both) == 2  # the window this is about: a point of each version
    assert sorted(h.version for h in found) == sorted(h.version for h in both)
    assert "policy#p0c0" in asked
    assert during.contexts[0].document.document_id == "policy" and during.contexts[0].document.content_hash == stored
