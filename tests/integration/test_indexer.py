"""Ingestion against the embedded stores: replace, delete, broken files, pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, DocumentSource, Identity, QueryOptions, Role
from tests.support.pdf import make_pdf


@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path, parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8))
    await application.open()
    yield application
    await application.close()


def _txt(doc_id: str, text: str, **kw: object) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode(), **kw)  # type: ignore[arg-type]


LONG = " ".join(f"Paragraph sentence {i} describes the history of glaciers and ice sheets." for i in range(30))


async def _state(app: Application, doc_id: str) -> tuple[int, int]:
    ids = [f"{doc_id}#p{i}" for i in range(200)]
    return await app.vectors.count(doc_id), len(await app.metadata.get_parents(ids))


async def test_reingest_replaces_without_duplicates_or_orphans(app: Application) -> None:
    first = await app.ingest([_txt("glaciers", LONG)])
    assert not first.errors and first.documents[0].replaced is False
    n_children, n_parents = first.documents[0].child_chunks, first.documents[0].parent_chunks
    assert await _state(app, "glaciers") == (n_children, n_parents)

    same = await app.ingest([_txt("glaciers", LONG)])
    assert same.documents[0].replaced is True
    assert await _state(app, "glaciers") == (n_children, n_parents)

    shorter = await app.ingest([_txt("glaciers", "Glaciers are slow rivers of ice. They carve valleys.")])
    assert shorter.documents[0].replaced is True
    assert await _state(app, "glaciers") == (shorter.documents[0].child_chunks, shorter.documents[0].parent_chunks)
    result = await app.pipeline.query(QueryOptions("rivers of ice", 5))
    assert [c.parent.parent_chunk_id for c in result.contexts] == ["glaciers#p0"]
    assert "slow rivers" in result.contexts[0].parent.content


async def test_delete_removes_vectors_and_rows(app: Application) -> None:
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock.")])
    deleted, missing = await app.indexer.delete(["a", "zzz"])
    assert (deleted, missing) == (["a"], ["zzz"])
    assert await _state(app, "a") == (0, 0)
    assert await app.metadata.get_document("b") is not None


async def test_broken_file_is_reported_and_the_batch_goes_on(app: Application) -> None:
    report = await app.ingest(
        [
            DocumentSource(filename="bad.pdf", content=b"%PDF-1.4 nonsense"),
            _txt("good", "Volcanoes erupt molten rock."),
            DocumentSource(filename="weird.xyz", content=b"?"),
        ]
    )
    assert [d.document_id for d in report.documents] == ["good"]
    assert {e.source for e in report.errors} == {"bad.pdf", "weird.xyz"}
    assert all(e.reason for e in report.errors)


async def test_pdf_pages_reach_the_contexts(app: Application) -> None:
    pdf = make_pdf(["Introduction to the regulations.", "Graduation requires one hundred and twenty credits."], title="Regs")
    await app.ingest([DocumentSource(filename="regs.pdf", content=pdf, url="http://example/regs.pdf")])
    result = await app.pipeline.query(QueryOptions("how many credits to graduate", 1))
    ctx = result.contexts[0]
    assert (ctx.parent.page, ctx.document.title, ctx.document.url) == (2, "Regs", "http://example/regs.pdf")


async def test_private_documents_reach_only_their_readers(app: Application) -> None:
    await app.ingest(
        [
            _txt("secret", "The launch code is kept in the red binder.", access=Access.PRIVATE, owner_id="alice", granted_user_ids=("carol",)),
            _txt("public", "The cafeteria opens at eight."),
        ]
    )
    for identity, sees in [
        (Identity(), False),
        (Identity("bob", Role.USER), False),
        (Identity("bob", Role.ADMIN), False),
        (Identity("alice", Role.USER), True),
        (Identity("carol", Role.USER), True),
        (Identity("root", Role.SUPER_ADMIN), True),
    ]:
        result = await app.pipeline.query(QueryOptions("launch code binder", 5, identity=identity))
        assert ("secret" in {c.document.document_id for c in result.contexts}) is sees, identity
        found = await app.pipeline.search("launch code binder", 5, identity)
        assert ("secret" in {r.document_id for r in found}) is sees, identity
