"""Ingestion against the embedded stores: replace, delete, broken files, pages."""

from __future__ import annotations

import asyncio
import json
import dataclasses
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.backends.executor import BACKGROUND_NICE, Priority
from retrieval_server.backends.llm import LlmError, LlmRefused
from retrieval_server.config import load_settings
from retrieval_server.domain import (
    Access, AccessFilter, DocumentSource, Identity, PointFilter, QueryOptions, ResourceExhausted, Role, Strategy,
)
from retrieval_server.ingest import indexer as indexer_module
from retrieval_server.ingest.graph_extraction import RULES_REVISION, ClassicalGraphExtractor, LlmGraphExtractor
from retrieval_server.ingest.indexer import sweep_abandoned_writes
from retrieval_server.knowledge import DocumentGraph
from retrieval_server.workflow import nodes
from retrieval_server.workflow.pipeline import QueryPipeline
from scoring_core.encoders import Interrupted
from tests.support.intercept import Intercepted
from tests.support.mariadb import MariaDb
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
    return await app.vectors.count(doc_id), len((await app.metadata.get_parents_and_documents(ids))[0])


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


async def test_the_documents_are_reported_in_request_order_whether_written_or_found_unchanged(app: Application) -> None:
    await app.ingest([_txt("glaciers", LONG)])
    # The new ones wait in a batch to be embedded while the unchanged one is already done.
    report = await app.ingest([_txt("owls", "Owls hunt at night."), _txt("glaciers", LONG), _txt("bats", "Bats navigate by echolocation.")])
    assert not report.errors
    assert [(d.document_id, d.replaced) for d in report.documents] == [("owls", False), ("glaciers", True), ("bats", False)]


async def test_a_change_of_url_or_source_alone_is_written_without_embedding(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """The url and source were in the document's version: the same file synced from another
    checkout (its source another path) was chunked and embedded again, and its points written anew."""
    await app.ingest([_txt("glaciers", LONG, source="/home/ci/build-41/docs/glaciers.txt")])
    before, points = await app.metadata.get_document("glaciers"), await app.vectors.count("glaciers")
    embedded: list[int] = []
    embed = app.embedder.embed_background

    async def counted(texts: list[str], *, beside_queries: bool) -> np.ndarray:
        embedded.append(len(texts))
        return await embed(texts, beside_queries=beside_queries)

    monkeypatch.setattr(app.embedder, "embed_background", counted)
    moved = await app.ingest([_txt("glaciers", LONG, source="docs/glaciers.txt", url="https://x.test/glaciers")])
    assert not moved.errors and moved.documents[0].replaced and not moved.documents[0].unchanged
    assert embedded == []
    after = await app.metadata.get_document("glaciers")
    assert after is not None and before is not None and (after.source, after.url) == ("docs/glaciers.txt", "https://x.test/glaciers")
    # The points are kept, at their version; the content hash changes, which a cached answer citing
    # the document is checked against (its source and url are the old ones).
    assert after.version == before.version and after.content_hash != before.content_hash
    assert await app.vectors.count("glaciers", after.version) == points == await app.vectors.count("glaciers")
    result = await app.pipeline.query(QueryOptions("history of glaciers and ice sheets", 5, use_cache=False))
    assert result.contexts and {c.document.source for c in result.contexts} == {"docs/glaciers.txt"}
    again = await app.ingest([_txt("glaciers", LONG, source="docs/glaciers.txt", url="https://x.test/glaciers")])
    assert again.documents[0].unchanged and embedded == []
    # Anything else that changes is embedded, as before.
    await app.ingest([_txt("glaciers", LONG, source="docs/glaciers.txt", title="Glaciers")])
    assert embedded


async def test_a_document_stored_before_the_version_left_out_its_source_is_unchanged(app: Application,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Its content hash is the digest of everything, source and url among it: were that a change,
    # the first ingest after the upgrade would embed every stored document again.
    fingerprint = indexer_module.Indexer._fingerprint  # noqa: SLF001 - as releases before stored it
    monkeypatch.setattr(indexer_module.Indexer, "_fingerprint", lambda self, doc, loaded, parents: (fingerprint(self, doc, loaded, parents)[1],) * 2)
    await app.ingest([_txt("glaciers", LONG, source="docs/glaciers.txt")])
    monkeypatch.setattr(indexer_module.Indexer, "_fingerprint", fingerprint)
    again = await app.ingest([_txt("glaciers", LONG, source="docs/glaciers.txt")])
    assert again.documents[0].unchanged


async def test_the_callers_url_source_and_metadata_are_stored_composed_as_a_files_are(app: Application) -> None:
    import unicodedata

    nfd = unicodedata.normalize("NFD", "Zürich")
    marks = "a" + "\u0301\u0300" * 20
    report = await app.ingest([_txt("branch", "Quarterly figures of the branch office.", url=f"https://x.test/{nfd}", source=nfd,
                                    metadata={"city": nfd, nfd: "key", "marks": marks})])
    assert not report.errors
    doc = (await app.metadata.get_documents(["branch"]))["branch"]
    assert doc.url == "https://x.test/Zürich" and doc.source == "Zürich"
    assert doc.metadata["city"] == "Zürich" and doc.metadata["Zürich"] == "key" and "\u034f" in doc.metadata["marks"]
    # Two keys that are one once composed: the document is refused, no value silently dropped.
    twice = await app.ingest([_txt("offices", "Two offices.", metadata={nfd: "office A", "Zürich": "office B"})])
    assert not twice.documents and "send each key once" in twice.errors[0].reason
    # So is a JSONL row's, alone: the other rows are stored.
    rows = "\n".join(json.dumps(r) for r in ({"_id": "twice", "text": "Two offices.", "metadata": {nfd: "A", "Zürich": "B"}},
                                              {"_id": "once", "text": "One office.", "metadata": {"Zürich": "B"}}))
    report = await app.ingest([DocumentSource(filename="offices.jsonl", content=rows.encode())])
    assert [d.document_id for d in report.documents] == ["once"]
    assert [(e.source, "send each key once" in e.reason) for e in report.errors] == [("offices.jsonl:line 1", True)]


async def test_new_extraction_rules_make_a_stored_document_changed(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """A document whose graph the rules would now read differently is extracted again on its next
    ingest, not skipped as unchanged."""
    from retrieval_server.ingest import indexer

    await app.ingest([_txt("ørsted", "The Ørsted Team maintains WindSvc.")])
    before = await app.metadata.get_document("ørsted")
    await app.ingest([_txt("ørsted", "The Ørsted Team maintains WindSvc.")])
    assert (await app.metadata.get_document("ørsted")).content_hash == before.content_hash  # type: ignore[union-attr]
    monkeypatch.setattr(indexer, "rules_revision_for", lambda text: RULES_REVISION + 1)
    await app.ingest([_txt("ørsted", "The Ørsted Team maintains WindSvc.")])
    assert (await app.metadata.get_document("ørsted")).content_hash != before.content_hash  # type: ignore[union-attr]


async def test_new_rules_make_changed_only_the_documents_whose_graph_they_change(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Revision 10 reads headings only: named in every fingerprint, it embedded every document
    again on its next ingest after an upgrade (with the LLM extractor, extracted through the model
    again), its graph the same."""
    from retrieval_server.ingest import indexer

    plain, headed = _txt("plain", "AuthService calls TokenStore for refresh tokens."), _txt("headed", "# AuthService\nIt uses TokenStore.")
    monkeypatch.setattr(indexer, "rules_revision_for", lambda text: 9)  # as revision 9 stored them
    await app.ingest([plain, headed])
    monkeypatch.undo()
    again = await app.ingest([plain, headed])
    assert [(d.document_id, d.unchanged) for d in again.documents] == [("plain", True), ("headed", False)]
    assert again.documents[1].replaced


async def test_a_new_max_seq_length_embeds_a_stored_document_again(tmp_path: Path) -> None:
    """The model reads each parent up to MAX_SEQ_LENGTH tokens: after a change, the next ingest of
    an unchanged document embeds it again, where it used to keep the vectors of the old limit."""
    text = " ".join(f"Section {i} of the survey records {i * 7} metres of retreat near the moraine." for i in range(12))

    async def ingest(max_seq_length: int) -> tuple[bool, float]:
        # Children of 126 tokens at both limits (at most MAX_SEQ_LENGTH - 2): only the limit changes.
        app = Application(load_settings(data_dir=tmp_path, cache_backend="none", max_seq_length=max_seq_length, child_chunk_tokens=126))
        await app.open(warm_kernels=False)
        try:
            report = await app.ingest([_txt("survey", text)])
            (parent,) = (await app.metadata.get_parents_and_documents(["survey#p0"]))[0].values()
            assert report.documents[0].parent_chunks == 1 and 128 < parent.tokens < 256
            vector = (await app.embedder.embed([indexer_module.embedded_texts("survey", [parent], [], child_title=False,
                                                                              parent_vectors=True)[1][0]]))[0]
            hits = await app.vectors.search_parents(vector, 1, PointFilter(access=AccessFilter(reads_everything=True)))
            return report.documents[0].replaced, hits[0].score
        finally:
            await app.close()

    assert (await ingest(128))[1] == pytest.approx(1.0, abs=1e-5)
    replaced, score = await ingest(256)
    assert replaced and score == pytest.approx(1.0, abs=1e-5)  # the whole parent, not its first 128 tokens
    # At the setting's default the limit is left out of the fingerprint, as stored before it counted
    # (or an upgrade embedded every unchanged document again): the two defaults are one.
    assert indexer_module.DEFAULT_MODEL_TOKENS == load_settings().max_seq_length


async def test_a_new_glossary_makes_a_stored_document_changed(tmp_path: Path) -> None:
    """The glossary makes an abbreviation and its expansion one entity: changed (by its content, at
    the same path too), a stored document is extracted again on its next ingest, not skipped as
    unchanged with the old glossary's graph."""
    glossary = tmp_path / "glossary.txt"

    async def entities(glossary_path: Path | None) -> set[str]:
        app = Application(load_settings(data_dir=tmp_path / "data", glossary_path=glossary_path, cache_backend="none"))
        await app.open()
        try:
            assert not (await app.ingest([_txt("ops", "The SRE team maintains Alerting. Site Reliability Engineering owns PagerBridge.")])).errors
            return set(await app.metadata.graph_entities(None, AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN))))
        finally:
            await app.close()

    apart = {"sre", "sitereliabilityengineering", "alerting", "pagerbridge"}
    assert await entities(None) == apart
    glossary.write_text("SRE = Site Reliability Engineering\n")
    assert await entities(glossary) == {"sre", "alerting", "pagerbridge"}
    glossary.write_text("SLO = Service Level Objective\n")
    assert await entities(glossary) == apart


async def test_a_document_whose_title_metadata_search_read_split_is_written_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata search reads titles without soft hyphens since terms revision 3, its schema
    unchanged: re-ingesting a document stored before was skipped as unchanged (with the graph off,
    whose rules revision changed every fingerprint), and "coordinated" missed its title for good."""
    from retrieval_server.backends import metadata_store

    sources = [_txt("plan", "The body of the plan.", title="Co\u00adordinated release plan"),
               _txt("notes", "The notes of the meeting.", title="Coordinated meeting notes", metadata={"team": "Ops"})]
    everything = AccessFilter.for_identity(Identity("ops", Role.SUPER_ADMIN))

    async def ingest() -> tuple[dict[str, bool], list[str]]:
        app = Application(load_settings(data_dir=tmp_path, graph_enabled=False, cache_backend="none"))
        await app.open(warm_kernels=False)
        try:
            report = await app.ingest(sources)
            found = await app.metadata.search_documents("coordinated", 5, everything)
            return {d.document_id: d.unchanged for d in report.documents}, sorted(d for d, _ in found)
        finally:
            await app.close()

    # As the release before stored them: soft hyphens kept in the search text, and so (the mark
    # read from the store's search text) no mark of them in the fingerprint.
    monkeypatch.setattr(metadata_store, "without_break_hints", lambda text: text)
    assert await ingest() == ({"plan": False, "notes": False}, ["notes"])
    monkeypatch.undo()
    # Only the document that holds one is written again; then it is unchanged too.
    assert await ingest() == ({"plan": False, "notes": True}, ["notes", "plan"])
    assert await ingest() == ({"plan": True, "notes": True}, ["notes", "plan"])


class _ChatModel:
    """A graph model whose provider is down until ``up``."""

    name = "fake:model"

    def __init__(self) -> None:
        self.up = False

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        if not self.up:
            raise LlmError("provider unavailable")
        return json.dumps({"entities": [{"name": "settlement pipeline", "type": "SERVICE"}, {"name": "ledger cluster", "type": "SERVICE"}],
                           "relations": [{"source": "settlement pipeline", "target": "ledger cluster", "type": "DEPENDS_ON"}]})


async def _no_graph(*chunks: Any) -> DocumentGraph:
    raise RuntimeError("extraction failed")


@pytest.mark.parametrize("failed", [False, True], ids=["llm-fell-back", "extraction-failed"])
async def test_a_graph_not_built_by_the_configured_extractor_is_extracted_again_on_the_next_ingest(
    app: Application, monkeypatch: pytest.MonkeyPatch, caplog: Any, failed: bool
) -> None:
    """A graph the classical rules built while the LLM was down, or a document stored without one:
    stored with the document's own fingerprint, the next ingest (the provider back) skipped it as
    unchanged and the graph stayed so for good."""
    model = _ChatModel()
    monkeypatch.setattr(app.indexer, "_graph", LlmGraphExtractor(model, ClassicalGraphExtractor()))  # type: ignore[arg-type]
    text = "The settlement pipeline is run nightly. Settlement relies on the ledger cluster operated by Finance Ops."
    root = AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN))
    with monkeypatch.context() as down:
        if failed:
            down.setattr(app.indexer._graph, "extract", _no_graph)
        assert not (await app.ingest([_txt("s", text)])).errors
    assert "ledgercluster" not in await app.metadata.graph_entities(None, root)
    assert any("its next ingest extracts it again" in r.getMessage() for r in caplog.records)
    model.up = True
    assert (await app.ingest([_txt("s", text)])).documents[0].replaced
    assert {"settlementpipeline", "ledgercluster"} <= set(await app.metadata.graph_entities(None, root))
    # Built by the model, the graph is the one the next ingest would make: that one is skipped.
    settled = await app.metadata.get_document("s")
    await app.ingest([_txt("s", text)])
    assert await app.metadata.get_document("s") == settled


class _Unparsable:
    """A graph model that answers, always with what no graph is made of."""

    name = "fake:model"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        return "I cannot help with that."


class _RefusingContent:
    """A provider that refuses the chunk for what it holds (over its context window, a filter)."""

    name = "refusing"

    async def complete(self, system: str, prompt: str, **_: object) -> str:
        raise LlmRefused("refusing: HTTP 400 context_length_exceeded")


@pytest.mark.parametrize("model", [_Unparsable, _RefusingContent], ids=["answer-refused", "content-refused"])
async def test_a_graph_the_rules_built_because_the_models_answer_was_refused_is_settled(
    app: Application, monkeypatch: pytest.MonkeyPatch, model: type
) -> None:
    """The next ingest gets the same answer: given a fingerprint no ingest computes, the document
    was embedded again and given a new version (dropping the answers cached citing it) at every
    ingest, for good. So does a chunk whose content the model refuses (a 400, a filter)."""
    monkeypatch.setattr(app.indexer, "_graph", LlmGraphExtractor(model(), ClassicalGraphExtractor()))  # type: ignore[arg-type]
    text = "The settlement pipeline is run nightly. Settlement relies on the ledger cluster operated by Finance Ops."
    assert not (await app.ingest([_txt("s", text)])).errors
    stored = await app.metadata.get_document("s")
    again = await app.ingest([_txt("s", text)])
    assert not again.errors and await app.metadata.get_document("s") == stored


async def _points(app: Application, doc_id: str, most_children: int) -> dict[str, str]:
    """The document's stored child points, chunk id to text (a child's id names its parent, whose
    index is at most the child's)."""
    ids = [f"{doc_id}#p{p}c{c}" for c in range(most_children) for p in range(c + 1)]
    return {h.chunk_id: h.content for h in await app.vectors.get_chunks(ids)}


@pytest.mark.parametrize("sizes", [(48, 16, 4), (96, 40, 8)], ids=["more-chunks", "fewer-chunks"])
async def test_a_document_chunked_anew_under_the_same_version_keeps_only_the_new_chunks(
    app: Application, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, int, int]
) -> None:
    """A chunker changed without its revision bumped: re-ingesting a document left the points of
    the chunks the new chunking no longer makes (for good, and cited as evidence), or, with as
    many chunks or fewer, was skipped as unchanged."""
    from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
    from retrieval_server.ingest.chunker import Chunker, ChunkSizes

    first = (await app.ingest([_txt("glaciers", LONG)])).documents[0]
    version = (await app.metadata.get_document("glaciers")).version  # type: ignore[union-attr]
    stored = app.indexer._chunker
    other = Chunker(str(BUNDLED_TOKENIZER), ChunkSizes(*sizes))
    monkeypatch.setattr(stored, "chunk", other.chunk)  # the chunker's code changed, its sizes and revision did not
    parents, children = other.chunk("glaciers", [(1, LONG)])
    more = sizes[1] < stored.sizes.child_tokens
    assert (len(children) > first.child_chunks) if more else (len(children) < first.child_chunks)

    await app.ingest([_txt("glaciers", LONG)])
    assert (await app.metadata.get_document("glaciers")).version == version  # type: ignore[union-attr]
    assert await _points(app, "glaciers", 200) == {c.chunk_id: c.content for c in children}
    assert await app.vectors.count("glaciers") == len(children)
    assert await app.vectors.count("glaciers", parents=True) == len(parents)
    result = await app.pipeline.query(QueryOptions("history of glaciers and ice sheets", 10, use_cache=False))
    cited = [(k.chunk_id, k.content) for c in result.contexts for k in c.children]
    assert cited and set(cited) <= {(c.chunk_id, c.content) for c in children}


async def test_a_new_chunker_revision_makes_a_stored_document_changed(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """A document the chunker would now cut differently is written again on its next ingest."""
    from retrieval_server.ingest import indexer

    await app.ingest([_txt("glaciers", LONG)])
    before = await app.metadata.get_document("glaciers")
    monkeypatch.setattr(indexer, "CHUNKER_REVISION", indexer.CHUNKER_REVISION + 1)
    assert (await app.ingest([_txt("glaciers", LONG)])).documents[0].replaced
    after = await app.metadata.get_document("glaciers")
    assert before is not None and after is not None and after.version != before.version
    assert await app.vectors.count("glaciers") == await app.vectors.count("glaciers", after.version) > 0


async def test_an_unchanged_document_whose_points_are_gone_is_written_again(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows with no points and no write pending (two processes writing one document against shared
    stores, a power loss before the engine flushed): the same content ingested again writes them,
    where it used to be skipped as unchanged and the document stayed unsearchable for good."""
    await app.ingest([_txt("glaciers", LONG)])
    upserts: list[int] = []
    upsert = app.vectors.upsert

    async def counting(points: Any) -> None:
        upserts.append(len(points))
        await upsert(points)

    monkeypatch.setattr(app.vectors, "upsert", counting)
    await app.ingest([_txt("glaciers", LONG)])
    assert upserts == []  # stored as it is: skipped
    await app.vectors.delete_document("glaciers")
    assert await app.vectors.count("glaciers") == 0 and await app.metadata.get_document("glaciers") is not None
    await app.ingest([_txt("glaciers", LONG)])
    assert upserts and await app.vectors.count("glaciers") > 0
    result = await app.pipeline.query(QueryOptions("glaciers and ice sheets", 1, use_cache=False))
    assert [c.document.document_id for c in result.contexts] == ["glaciers"]


async def test_an_unchanged_document_whose_parent_points_are_gone_is_written_again(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows and child points, and no parent point (lost to a power loss before the engine flushed,
    say): the parent leg never finds the document. The same content ingested again writes them,
    where it used to be skipped as unchanged."""
    assert app.vectors.features.parent_vectors
    upsert_parents = app.vectors.upsert_parents

    async def lost(points: Any) -> None:
        return None

    monkeypatch.setattr(app.vectors, "upsert_parents", lost)
    report = await app.ingest([_txt("glaciers", LONG)])
    stored = await app.metadata.get_document("glaciers")
    assert stored is not None and await app.metadata.pending_writes() == []
    assert await app.vectors.count("glaciers", stored.version) == report.documents[0].child_chunks
    assert await app.vectors.count("glaciers", stored.version, parents=True) == 0
    monkeypatch.setattr(app.vectors, "upsert_parents", upsert_parents)
    await app.ingest([_txt("glaciers", LONG)])
    assert await app.vectors.count("glaciers", stored.version, parents=True) == report.documents[0].parent_chunks > 0


async def test_delete_removes_vectors_and_rows(app: Application) -> None:
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock.")])
    deleted, missing = await app.indexer.delete(["a", "zzz"])
    assert (deleted, missing) == (["a"], ["zzz"])
    assert await _state(app, "a") == (0, 0)
    assert await app.metadata.get_document("b") is not None


async def test_a_delete_takes_its_documents_out_of_the_keyword_scores(app: Application, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The embedded engine vacuums deleted points only in optimize(), and until then they count in
    BM25's IDF: a delete schedules it as an ingest does, so the scores become a fresh index's."""
    kept = [_txt("harbour", "The harbour keeps a gauge."), _txt("island", "The island has a ferry."),
            *(_txt(f"l{i}", f"Lighthouse number {i} stands on the rocks.") for i in range(10))]
    gone = [_txt(f"g{i}", f"The gauge museum number {i}.") for i in range(6)]
    root = Identity("root", Role.SUPER_ADMIN)

    async def scores(application: Application) -> list[tuple[str, float]]:
        answer = await application.pipeline.query(QueryOptions("gauge ferry", 5, strategy=Strategy.KEYWORD, use_cache=False,
                                                                rerank=False, identity=root))
        return [(c.document.document_id, round(c.score, 4)) for c in answer.contexts]

    await app.ingest([*kept, *gone])
    await app.wait_for_optimize()
    assert (await app.delete([f"g{i}" for i in range(6)]))[0] == [f"g{i}" for i in range(6)]
    await app.wait_for_optimize()
    fresh = Application(app.settings.model_copy(update={"data_dir": tmp_path_factory.mktemp("fresh")}))
    await fresh.open()
    try:
        await fresh.ingest(kept)
        await fresh.wait_for_optimize()
        assert sorted(d for d, _ in await scores(fresh)) == ["harbour", "island"]
        assert await scores(app) == await scores(fresh)
    finally:
        await fresh.close()


async def test_the_search_policy_counts_the_children_after_each_ingest_and_delete(app: Application) -> None:
    """Writes leave the count alone; the indexer counts once its writes are done."""
    policy = app.vectors.policy  # type: ignore[attr-defined]
    assert policy.points == 0
    report = await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock.")])
    children = {d.document_id: d.child_chunks for d in report.documents}
    assert policy.points == sum(children.values()) == await app.vectors.count() > children["b"]
    await app.indexer.delete(["a"])
    assert policy.points == children["b"] == await app.vectors.count()


class _Killed(BaseException):
    """What a kill -9 leaves for the indexer: nothing of the write after this point runs, not even its cleanup."""


@pytest.mark.parametrize("interruption", ["failed commit", "kill before the commit"])
async def test_a_replacement_interrupted_before_its_commit_keeps_the_committed_version_whole(tmp_path: Path, interruption: str) -> None:
    """The new version's points are written before its rows commit; until then the committed version must keep all of its
    points, whether the write fails (reconciled at once) or the process dies (reconciled at the next start)."""
    settings = load_settings(data_dir=tmp_path, parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8)
    app = Application(settings)
    await app.open()
    try:
        first = (await app.ingest([_txt("glaciers", LONG)])).documents[0]
        committed = await app.metadata.get_document("glaciers")
        assert committed is not None

        async def commit_interrupted(*args: object, **kwargs: object) -> bool:
            if interruption == "failed commit":
                raise RuntimeError("the metadata store went away")
            raise _Killed

        app.metadata.replace_document = commit_interrupted  # type: ignore[method-assign]
        changed = _txt("glaciers", LONG.replace("glaciers", "moraines"))
        if interruption == "failed commit":
            report = await app.ingest([changed])
            assert [e.source for e in report.errors] == ["glaciers.txt"]
        else:
            with pytest.raises(_Killed):
                await app.ingest([changed])
            assert await app.metadata.pending_writes() == ["glaciers"]
    finally:
        await app.close()
    app = Application(settings)
    await app.open()  # recovery reconciles what the kill left pending
    try:
        assert await app.metadata.pending_writes() == []
        assert await app.metadata.get_document("glaciers") == committed
        assert await app.vectors.count("glaciers", committed.version) == first.child_chunks
        assert await app.vectors.count("glaciers") == first.child_chunks
        result = await app.pipeline.query(QueryOptions("history of glaciers and ice sheets", 3))
        assert result.contexts and "glaciers" in result.contexts[0].parent.content
    finally:
        await app.close()


@pytest.mark.parametrize("commit", ["commits", "fails"])
async def test_a_cancelled_ingest_finishes_the_document_it_is_writing_and_stops(
    app: Application, monkeypatch: pytest.MonkeyPatch, commit: str
) -> None:
    """A client's cancel or an expired deadline cancels the call while a document is between its two
    stores (new points written, rows not yet committed). Cut there, the new version's points would
    stay until the next start and outrank the stored version in every search; the write runs to its
    end instead (a commit that fails is reconciled), and the documents after it are not started."""
    await app.ingest([_txt("glaciers", LONG)])
    before = await app.metadata.get_document("glaciers")
    replace, entered, release = app.metadata.replace_document, asyncio.Event(), asyncio.Event()

    async def slow_commit(*args: Any, **kwargs: Any) -> bool:
        entered.set()
        await release.wait()
        if commit == "fails":
            raise RuntimeError("the metadata store went away")
        return await replace(*args, **kwargs)

    monkeypatch.setattr(app.metadata, "replace_document", slow_commit)
    moraines = LONG.replace("glaciers", "moraines")
    call = asyncio.create_task(app.ingest([_txt("glaciers", moraines), _txt("volcanoes", "Volcanoes erupt molten rock.")]))
    await entered.wait()
    call.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    stored = await app.metadata.get_document("glaciers")
    assert stored is not None and await app.metadata.pending_writes() == []
    assert (stored == before) is (commit == "fails")
    assert await app.vectors.count("glaciers") == await app.vectors.count("glaciers", stored.version) > 0
    found = (await app.pipeline.query(QueryOptions("history of moraines and ice sheets", 1))).contexts[0].parent.content
    assert ("moraines" in found) is (commit == "commits")
    assert await app.metadata.get_document("volcanoes") is None and await app.vectors.count("volcanoes") == 0


async def test_a_cancelled_ingest_stops_while_it_drops_a_batch_that_failed_to_embed(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that cannot be embedded (or that the disk check refuses) has its keyword vectors and
    graph cancelled and waited for. Ctrl-C, a client's cancel or its deadline coming meanwhile was
    swallowed with that task's own end, and the ingest went on to its last row."""
    extractor = app.indexer._graph  # noqa: SLF001 - holding the batch's graph while it is dropped
    assert extractor is not None
    extracting, dropping, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class HeldGraph:
        def __getattr__(self, name: str) -> Any:
            return getattr(extractor, name)

        async def extract(self, parents: Any, children: Any) -> Any:
            extracting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                dropping.set()  # and ends only later, as a job on a thread does
                await release.wait()
                raise

    embedded: list[list[str]] = []

    async def broken(texts: list[str], tokens: list[int]) -> Any:
        embedded.append(texts)
        await extracting.wait()
        raise RuntimeError("model crashed")

    monkeypatch.setattr(app.indexer, "_graph", HeldGraph())
    monkeypatch.setattr(app.indexer, "_embed", broken)
    monkeypatch.setattr(app.indexer, "_batch", 1)  # a batch per document: the second is the one not to start
    call = asyncio.create_task(app.ingest([_txt("glaciers", LONG), _txt("volcanoes", "Volcanoes erupt molten rock.")]))
    await dropping.wait()
    call.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert len(embedded) == 1  # the second batch was not started


async def test_a_cancelled_delete_removes_the_document_it_is_at_and_stops(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled after a document's rows went and before its points did, a delete would leave the
    points (filtered out only after the top-k cut, so they crowd the other documents out of
    searches) until the next start; it removes them, and the ids after it are not deleted."""
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock."), _txt("c", "Deserts are dry.")])
    remove, entered, release = app.vectors.delete_document, asyncio.Event(), asyncio.Event()

    async def slow_remove(*args: Any, **kwargs: Any) -> None:
        entered.set()
        await release.wait()
        await remove(*args, **kwargs)

    monkeypatch.setattr(app.vectors, "delete_document", slow_remove)
    call = asyncio.create_task(app.delete(["a", "c"]))
    await entered.wait()
    call.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await _state(app, "a") == (0, 0) and await app.metadata.pending_writes() == []
    assert await app.metadata.get_document("c") is not None and await app.vectors.count("c") > 0


class _FollowUps:
    """What an app's writes are followed by: optimizations scheduled, cache entries dropped."""

    def __init__(self, app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
        assert app.cache is not None
        self.optimized = 0
        self.invalidated: list[str] = []
        invalidate = app.cache.invalidate_documents

        async def invalidated(document_ids: list[str]) -> None:
            self.invalidated += document_ids
            await invalidate(document_ids)

        def optimized() -> None:
            self.optimized += 1

        monkeypatch.setattr(app.cache, "invalidate_documents", invalidated)
        monkeypatch.setattr(app, "schedule_optimize", optimized)


def _ingested(app: Application) -> float:
    return app.metrics.registry.get_sample_value("retrieval_ingested_documents_total") or 0.0


async def test_a_cancelled_ingest_still_follows_up_the_documents_it_committed(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut by its caller's deadline or cancel, an ingest skipped what follows its writes: the documents
    it had committed went uncounted, their replaced versions' points unvacuumed, and the cached
    answers citing those versions were served on."""
    await app.ingest([_txt("glaciers", LONG)])
    replace, second, release = app.metadata.replace_document, asyncio.Event(), asyncio.Event()

    async def commit(document: Any, *args: Any, **kwargs: Any) -> bool:
        if document.document_id == "volcanoes":  # glaciers, before it in the same batch, is committed
            second.set()
            await release.wait()
        return await replace(document, *args, **kwargs)

    monkeypatch.setattr(app.metadata, "replace_document", commit)
    follow_ups, before = _FollowUps(app, monkeypatch), _ingested(app)
    sources = [_txt("glaciers", LONG.replace("glaciers", "moraines")), _txt("volcanoes", "Volcanoes erupt molten rock."),
               _txt("deserts", "Deserts are dry.")]
    call = asyncio.create_task(app.ingest(sources))
    await second.wait()
    call.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await app.metadata.get_document("volcanoes") is not None and await app.metadata.get_document("deserts") is None
    assert _ingested(app) - before == 2
    assert follow_ups.invalidated == ["glaciers"] and follow_ups.optimized == 1  # volcanoes is new: no answer cites it


async def test_only_the_documents_written_are_counted_ingested(app: Application) -> None:
    """retrieval_ingested_documents_total is documents stored: a re-sync of a corpus found as it
    was counted each of its documents again."""
    await app.ingest([_txt("glaciers", LONG)])
    before = _ingested(app)
    report = await app.ingest([_txt("glaciers", LONG), _txt("owls", "Owls hunt at night.")])
    assert [(d.document_id, d.unchanged) for d in report.documents] == [("glaciers", True), ("owls", False)]
    assert _ingested(app) - before == 1
    await app.ingest([_txt("glaciers", LONG.replace("glaciers", "moraines"))])  # replaced
    assert _ingested(app) - before == 2


async def test_a_cancelled_delete_still_follows_up_the_documents_it_deleted(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock."), _txt("c", "Deserts are dry.")])
    remove, second, release = app.vectors.delete_document, asyncio.Event(), asyncio.Event()

    async def slow_remove(document_id: str, *args: Any, **kwargs: Any) -> None:
        if document_id == "b":
            second.set()
            await release.wait()
        await remove(document_id, *args, **kwargs)

    monkeypatch.setattr(app.vectors, "delete_document", slow_remove)
    follow_ups = _FollowUps(app, monkeypatch)
    call = asyncio.create_task(app.delete(["a", "b", "c"]))
    await second.wait()
    call.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await app.metadata.get_document("b") is None and await app.metadata.get_document("c") is not None
    assert follow_ups.invalidated == ["a", "b"] and follow_ups.optimized == 1


async def test_a_pending_write_is_cleared_only_after_a_sync_that_follows_its_vector_changes(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power loss takes back what the vector engine has not synced. Cleared before that, a write's
    intent no longer says the vectors need reconciling, and a deleted (or replaced) document's
    points, text and all, come back for good. One sync covers a whole batch or delete call."""
    calls: list[tuple[str, str]] = []

    def recorded(inner: Any, name: str) -> Intercepted:
        async def around(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            first = args[0] if args else ""
            calls.append((name, first[0].document.document_id if name.startswith("upsert") else str(first)))
            return result

        return Intercepted(inner, name, around)

    vectors: Any = app.vectors
    for name in ("upsert", "upsert_parents", "delete_document", "sync"):
        vectors = recorded(vectors, name)
    monkeypatch.setattr(app.indexer, "_vectors", vectors)
    monkeypatch.setattr(app.indexer, "_metadata", recorded(app.metadata, "end_write"))
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock."), _txt("c", "Deserts are dry.")])
    await app.ingest([_txt("a", LONG.replace("glaciers", "moraines"))])
    await app.delete(["b", "c"])

    cleared = [(i, doc) for i, (name, doc) in enumerate(calls) if name == "end_write"]
    assert sorted(doc for _, doc in cleared) == ["a", "a", "b", "b", "c", "c"]
    for i, doc in cleared:
        changed = max(j for j, (name, d) in enumerate(calls[:i]) if d == doc and name != "end_write")
        assert ("sync", "") in calls[changed:i], f"the intent of {doc} was cleared before its vector changes were synced: {calls}"
    assert calls.count(("sync", "")) == 3  # one per ingested batch and per delete call, not per document
    assert await app.metadata.pending_writes() == []


async def test_a_retry_repairs_a_replacement_whose_old_points_could_not_be_removed(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector store fails once a replacement's rows have committed: removing the old version's
    points fails, and so does the reconciliation after it. The caller is told the document failed
    and sends it again once the store is back; that retry must finish the job (old points gone,
    pending write cleared), not be skipped as unchanged while the stale points (filtered out only
    after the top-k cut) crowd searches until the next restart."""
    first = (await app.ingest([_txt("glaciers", LONG)])).documents[0]
    old = await app.metadata.get_document("glaciers")
    assert old is not None

    async def vectors_down(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the vector store went away")

    monkeypatch.setattr(app.vectors, "delete_document", vectors_down)
    changed = _txt("glaciers", LONG.replace("glaciers", "moraines"))
    report = await app.ingest([changed])
    assert [e.source for e in report.errors] == ["glaciers.txt"]
    new = await app.metadata.get_document("glaciers")
    assert new is not None and new.version != old.version  # the rows committed before the failure
    assert await app.vectors.count("glaciers", old.version) == first.child_chunks
    assert await app.metadata.pending_writes() == ["glaciers"]

    monkeypatch.undo()  # the store is back; the caller retries
    retry = await app.ingest([changed])
    assert not retry.errors and [d.document_id for d in retry.documents] == ["glaciers"]
    assert await app.vectors.count("glaciers", old.version) == 0
    assert await app.vectors.count("glaciers") == await app.vectors.count("glaciers", new.version) > 0
    assert await app.metadata.pending_writes() == []


async def test_fields_over_their_limits_are_reported_per_document_whatever_the_entry(app: Application) -> None:
    """A JSONL row (or a command's file) is held to the limits the API holds a request to; a title
    the file gives itself is cut to the limit instead, as content."""
    rows = b'{"_id": "fat", "title": "t", "text": "Glaciers move.", "metadata": {"note": "' + b"x" * 16_381 + b'"}}\n'
    rows += b'{"_id": "thin", "title": "t", "text": "Glaciers move slowly."}\n'
    heading = "# " + "Heading " * 200 + "\n\nGlaciers carve valleys."
    report = await app.ingest([DocumentSource(filename="rows.jsonl", content=rows), _txt("lost", "Ice.", access=Access.PRIVATE, owner_id=" "),
                               DocumentSource(filename="long.md", content=heading.encode())])
    assert sorted(d.document_id for d in report.documents) == ["long", "thin"]
    assert {e.source: e.reason for e in report.errors} == {
        "rows.jsonl:line 1 (fat)": "metadata must be at most 16384 bytes of UTF-8 in its keys and values (got 16385)",
        "lost.txt": "owner_id is required for a PRIVATE document",
    }
    long = await app.metadata.get_document("long")
    assert long is not None and len(long.title) == 1_024 and long.title.startswith("Heading Heading")


async def test_a_group_cannot_own_a_document(app: Application) -> None:
    """A private document owned by "group:hr" was readable by every member of hr: ownership is a
    user's (a grant gives a group its reading), and a group owner is that document's error."""
    report = await app.ingest([_txt("bands", "Quarterly salary bands for the engineering team.", access=Access.PRIVATE, owner_id="group:hr"),
                               _txt("menu", "The cafeteria serves soup on Fridays.")])
    assert [d.document_id for d in report.documents] == ["menu"]
    assert [(e.source, e.reason) for e in report.errors] == [("bands.txt", "owner_id must not start with 'group:': grants name groups that way")]
    assert await app.metadata.get_document("bands") is None


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


async def test_a_jsonl_row_that_is_not_unicode_fails_its_row_not_the_request(app: Application) -> None:
    """A lone surrogate escaped in a JSONL row (``\\ud800``: valid JSON, no Unicode) is reported for its
    row; the file's other rows and the request's other files are stored."""
    rows = b'{"_id": "good", "text": "Glaciers move slowly."}\n{"_id": "bad", "text": "Broken \\ud800 text."}\n'
    report = await app.ingest([DocumentSource(filename="rows.jsonl", content=rows), _txt("volcanoes", "Volcanoes erupt molten rock.")])
    assert [d.document_id for d in report.documents] == ["good", "volcanoes"]
    assert [(e.source, e.reason) for e in report.errors] == [("rows.jsonl:line 2", "'text' is not valid Unicode (a lone surrogate)")]


async def test_a_pdf_whose_text_names_a_lone_surrogate_is_stored_with_a_replacement_character(app: Application) -> None:
    """A PDF's ToUnicode map may send a glyph to a lone surrogate, which pypdf decodes as it is: that
    character becomes U+FFFD, and neither the file nor the request around it fails."""
    pdf = make_pdf(["Hello world, this PDF names \x01 a broken glyph."], title="Broken glyph", to_unicode={0x01: 0xD800})
    report = await app.ingest([_txt("before", "Aardvarks dig burrows."), DocumentSource(filename="glyph.pdf", content=pdf),
                               _txt("after", "Camels cross deserts.")])
    assert [d.document_id for d in report.documents] == ["before", "glyph", "after"] and not report.errors
    result = await app.pipeline.query(QueryOptions("PDF names a broken glyph", 1, use_cache=False))
    assert result.contexts[0].document.document_id == "glyph" and "names \ufffd a broken" in result.contexts[0].parent.content


async def test_a_document_the_chunker_fails_on_fails_alone(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    chunker = app.indexer._chunker
    chunk = chunker.chunk

    def failing(document_id: str, pages: Any) -> Any:
        if document_id == "odd":
            raise TypeError("TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]")
        return chunk(document_id, pages)

    monkeypatch.setattr(chunker, "chunk", failing)
    report = await app.ingest([_txt("before", "Aardvarks dig burrows."), _txt("odd", "Anything."), _txt("after", "Camels cross deserts.")])
    assert [d.document_id for d in report.documents] == ["before", "after"]
    assert [(e.source, e.reason) for e in report.errors] == [("odd.txt", "cannot chunk this document (TypeError)")]


async def test_files_are_read_on_ingestions_own_thread_while_queries_are_answered(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a file cannot be interrupted: on the pool the engines' calls use, two files slow to
    read (a PDF whose pages share one large content stream) held both threads, and every query
    waited behind them."""
    assert not (await app.ingest([_txt("glaciers", LONG)])).errors
    started, release = threading.Event(), threading.Event()
    threads: list[str] = []
    read = indexer_module.load

    def held(src: DocumentSource, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        started.set()
        release.wait()
        return read(src, *args)

    monkeypatch.setattr(indexer_module, "load", held)
    ingests = [asyncio.create_task(app.ingest([_txt(f"slow{i}", "Slow files are read slowly.")])) for i in range(2)]
    try:
        await asyncio.to_thread(started.wait)
        assert threads[0].startswith("ingest")  # checked first: on the shared pool the query below would wait forever
        answer = await app.pipeline.query(QueryOptions("history of glaciers", 2, strategy=Strategy.HYBRID, use_cache=False))
    finally:
        release.set()
    reports = await asyncio.gather(*ingests)
    assert [c.document.document_id for c in answer.contexts][:1] == ["glaciers"]
    assert all(not r.errors for r in reports) and len(threads) == 2 and all(t.startswith("ingest") for t in threads)


async def test_a_name_that_is_not_utf8_fails_its_document_alone(app: Application) -> None:
    """Python reads a file name that is not UTF-8 as lone surrogates, which the stores refused with
    an error of their own: the whole ingest failed, nothing stored."""
    odd = os.fsdecode(b"caf\xe9.txt")
    report = await app.ingest([
        _txt("before", "Aardvarks dig burrows."),
        DocumentSource(filename=odd, content=b"Coffee is brewed."),
        DocumentSource(filename="named.txt", content=b"Coffee is ground.", source=f"/data/{odd}"),
        _txt("after", "Camels cross deserts."),
    ])
    assert [d.document_id for d in report.documents] == ["before", "after"]
    assert [e.reason for e in report.errors] == [
        "document_id must be Unicode text (it holds a lone surrogate, as a file name that is not UTF-8 does)",
        "source must be Unicode text (it holds a lone surrogate, as a file name that is not UTF-8 does)",
    ]
    assert await app.metadata.list_document_ids() == ["after", "before"]


async def test_a_document_granted_to_more_users_than_the_limit_fails_alone(app: Application) -> None:
    """Every chunk carries its document's readers, and every query citing it reads them: more than
    MAX_GRANTEES is a group's job. The same ids repeated count once."""
    many = tuple(f"u{i}" for i in range(1_001))
    report = await app.ingest([_txt("wide", "Shared with a crowd.", access=Access.PRIVATE, owner_id="alice", granted_user_ids=many),
                               _txt("near", "Shared with a few.", access=Access.PRIVATE, owner_id="alice", granted_user_ids=many[:1_000] * 2)])
    assert [d.document_id for d in report.documents] == ["near"]
    assert [(e.source, e.reason.split(":")[0]) for e in report.errors] == [("wide.txt", "granted_user_ids must hold at most 1000 users (got 1001)")]


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


async def test_search_returns_no_two_results_with_the_same_text_as_trimmed(tmp_path: Path) -> None:
    """Duplicates were found on the whole text and the text trimmed after: two chunks differing
    only past the trim came back as the same text twice."""
    application = Application(load_settings(data_dir=tmp_path, search_text_chars=40))
    await application.open()
    try:
        same = "Glaciers carve deep valleys in the mountains"
        await application.ingest([_txt("alpha", same + " of Norway."), _txt("beta", same + " of Chile."), _txt("other", "Volcanoes erupt.")])
        found = await application.pipeline.search("glaciers carve valleys", 5, Identity())
    finally:
        await application.close()
    texts = [r.text for r in found]
    assert len(texts) == len(set(texts)) and texts[0] == same[:40] and len(found) == 2, texts


MIRRORED = "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts."
DISTINCT = [
    "Glacier ice flows downhill under its own weight, carving valleys over centuries.",
    "Ice sheets and glaciers store most of the fresh water on Earth.",
    "Glacial retreat is a visible sign of a warming climate in mountain regions.",
    "Crevasses open where a glacier flows over uneven bedrock and the ice cracks.",
    "Moraines are ridges of rock debris left behind by advancing and retreating glaciers.",
]


async def test_search_looks_past_copies_of_one_text_for_top_k_distinct_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fifteen copies of one text filled the 3 x top_k hits fetched: top_k=3 answered with one
    result. Wider pages are fetched up to HITS_PER_RESULT hits a result, and no further."""
    application = Application(load_settings(data_dir=tmp_path))
    await application.open()
    try:
        await application.ingest([_txt(f"mirror{i}", MIRRORED) for i in range(15)] + [_txt(f"other{i}", t) for i, t in enumerate(DISTINCT)])
        found = {k: await application.pipeline.search("glaciers rivers of ice", k, Identity()) for k in (3, 6)}
        monkeypatch.setattr(nodes, "HITS_PER_RESULT", 3)
        capped = await application.pipeline.search("glaciers rivers of ice", 3, Identity())
    finally:
        await application.close()
    assert [len(found[3]), len(found[6])] == [3, 6], {k: [r.document_id for r in v] for k, v in found.items()}
    assert sorted(r.text for r in found[6]) == sorted([MIRRORED, *DISTINCT])
    # The cap reached (9 hits), fewer results: the copies rank first and fill it
    assert [r.text for r in capped] == [MIRRORED]


async def test_one_bad_pdf_does_not_fail_the_batch(app: Application) -> None:
    from tests.unit.test_loader_fuzz import PYPDF_ASSERTION

    report = await app.ingest([DocumentSource(filename="bad.pdf", content=PYPDF_ASSERTION), _txt("good", "Glaciers carve valleys.")])
    assert [d.document_id for d in report.documents] == ["good"]
    assert [(e.source, "not a readable PDF" in e.reason) for e in report.errors] == [("bad.pdf", True)]


async def test_ids_are_cleaned_the_same_way_at_ingest_and_delete(app: Application) -> None:
    spaced = DocumentSource(filename="x.txt", content=b"Tides follow the moon.", document_id="  tide\u200b notes \t",
                            access=Access.PRIVATE, owner_id=" alice ", granted_user_ids=("bob ",))
    report = await app.ingest([spaced])
    assert [d.document_id for d in report.documents] == ["tide\u200b notes"]
    doc = await app.metadata.get_document("tide\u200b notes")
    assert doc is not None and doc.owner_id == "alice" and doc.granted_user_ids == ("bob",)
    # The owner and the grantee, as their identities arrive (trimmed), can read it.
    for who in ("alice", "bob"):
        r = await app.pipeline.query(QueryOptions("moon tides", 1, identity=Identity(who, Role.USER)))
        assert [c.document.document_id for c in r.contexts] == ["tide\u200b notes"]
    assert await app.delete(["\ufefftide\u200b notes  "]) == (["tide\u200b notes"], [])
    assert await app.vectors.count() == 0


@pytest.mark.parametrize("grant", ["group: hr", "group:hr\u200b ", "group:\u200b hr"])
async def test_a_grant_to_a_group_names_the_group_as_its_members_arrive(app: Application, grant: str) -> None:
    """Grantees are trimmed, but a group's name after its prefix was kept as sent: "group: hr"
    was stored, which no caller's groups (taken exactly: never " hr") ever match, and the group
    silently read nothing."""
    report = await app.ingest([_txt("payroll", "Payroll closes on the 25th.", access=Access.PRIVATE, owner_id="alice", granted_user_ids=(grant,))])
    assert not report.errors, report.errors
    doc = await app.metadata.get_document("payroll")
    assert doc is not None and doc.granted_user_ids == ("group:hr",)
    r = await app.pipeline.query(QueryOptions("payroll closes", 1, use_cache=False, identity=Identity("bob", Role.USER, ("hr",))))
    assert [c.document.document_id for c in r.contexts] == ["payroll"]


async def test_a_grant_to_a_group_without_a_name_is_the_documents_error(app: Application) -> None:
    report = await app.ingest([_txt("payroll", "Payroll closes on the 25th.", access=Access.PRIVATE, owner_id="alice",
                                    granted_user_ids=("group: \u200b",))])
    assert [(e.source, e.reason) for e in report.errors] == [
        ("payroll.txt", "granted_user_ids must name a group after 'group:' of 1 to 249 characters after trimming (got 0)")]
    assert await app.metadata.get_document("payroll") is None


async def test_a_query_stops_an_ingestion_piece_which_then_runs_beside_the_queries(app: Application) -> None:
    """A query that needs the model while ingestion's piece runs stops that piece (it does not wait
    for it); the piece runs again beside the queries on a lane of its own, one text at a time, and
    once no query comes the pieces go back to the queries' lane at full size. The vectors are those
    of an ingest nothing interrupted."""
    #: ingestion's pieces on the queries' lane (texts, stopped?), in order; pieces run beside; query runs
    lane: list[tuple[int, bool]] = []
    beside_runs: list[int] = []
    queries: list[int] = []
    #: the scheduling priority (nice) of the threads that ran the query and ingestion's pieces beside it
    nice: dict[str, int] = {}
    first_piece = asyncio.Event()
    query_queued = threading.Event()
    loop = asyncio.get_running_loop()
    embedder = app.embedder
    encoder = embedder._encoder  # noqa: SLF001 - recording the model runs
    encode, encode_beside, run = encoder.encode, embedder._encode_narrow, app.inference.run  # noqa: SLF001

    def recording(texts: list[str], interruption: Any = None) -> object:
        if texts == ["what carves valleys"]:
            queries.append(len(texts))
            nice["query"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            return encode(texts, interruption)
        if not first_piece.is_set():
            loop.call_soon_threadsafe(first_piece.set)
            # The query arrives while this piece runs; the bound only turns a regression into a failure, not a hang.
            assert query_queued.wait(timeout=300), "no query was queued while the first piece ran"
        try:
            out = encode(texts, interruption)
        except Interrupted:
            lane.append((len(texts), True))
            raise
        lane.append((len(texts), False))
        return out

    def beside(texts: list[str]) -> object:
        beside_runs.append(len(texts))
        nice["beside"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return encode_beside(texts)

    async def queued(fn: Any, *args: Any, priority: Priority = Priority.QUERY, **kwargs: Any) -> Any:
        job = asyncio.ensure_future(run(fn, *args, priority=priority, **kwargs))
        await asyncio.sleep(0)  # one turn of the loop runs the new task up to its first await: run() has queued the job
        if priority is Priority.QUERY:
            query_queued.set()
        return await job

    encoder.encode = recording
    embedder._encode_narrow = beside  # noqa: SLF001
    app.inference.run = queued  # type: ignore[method-assign]
    try:
        big = _txt("big", " ".join(f"Sentence {i} tells how glaciers carve valleys over many thousands of years." for i in range(600)))
        ingest = asyncio.ensure_future(app.ingest([big]))
        await first_piece.wait()
        jobs_before = app.inference.query_jobs()
        r = await app.pipeline.query(QueryOptions("what carves valleys", 1, use_cache=False))
        # Only a query job stops a piece: the query's one model run is its only one (its retry,
        # with nothing found to learn from, embeds nothing new).
        assert app.inference.query_jobs() - jobs_before == 1
        assert not ingest.done(), "the query waited for the whole ingest"
        report = await ingest
    finally:
        encoder.encode = encode
        del embedder._encode_narrow  # noqa: SLF001
        app.inference.run = run  # type: ignore[method-assign]
    assert not report.errors and r.metrics.total_ms > 0
    full = app.settings.embed_batch_size
    assert lane[0] == (full, True), "the first, full piece was stopped by the query"
    assert queries == [1]
    assert beside_runs[0] == 1, "the stopped piece ran again beside the queries, a text at a time"
    if sys.platform == "linux":  # the kernel, too, gives the query's model run the cores it shares with the pieces beside it
        assert nice["beside"] == min(19, nice["query"] + BACKGROUND_NICE)
        assert nice["beside"] > nice["query"] or nice["query"] == 19, "a process already at the lowest priority has no lower one"
    assert (full, False) in lane[1:], "without queries, pieces go back to the queries' lane at full size"
    assert not any(stopped for _, stopped in lane[1:]) and max(n for n, _ in lane) == full
    # Every child is stored with the vector its own text embeds to, whichever lane embedded it.
    children = await app.vectors.search_dense((await app.embedder.embed(["glaciers carve valleys"]))[0], 1000, PointFilter())
    assert len(children) == report.documents[0].child_chunks
    for child in children[:: max(1, len(children) // 8)]:
        top = (await app.vectors.search_dense((await app.embedder.embed([child.content]))[0], 1, PointFilter()))[0]
        assert top.chunk_id == child.chunk_id and top.score > 0.999


async def test_contextual_children_embed_the_title_and_return_their_own_text(tmp_path: Path) -> None:
    """With ``child_title``, every child (not only the first) is embedded as title + text, while the
    chunk stored and returned is the document's own text."""
    app = Application(load_settings(data_dir=tmp_path, parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8, child_title=True))
    await app.open()
    try:
        assert not (await app.ingest([_txt("glaciers", LONG, title="Ice Atlas")])).errors
        probe = (await app.embedder.embed(["glaciers and ice sheets"]))[0]
        children = await app.vectors.search_dense(probe, 100, PointFilter())
        assert len({c.parent_index for c in children}) > 1, "the document must span several parents"
        for child in (min(children, key=lambda c: c.chunk_index), max(children, key=lambda c: c.chunk_index)):
            assert not child.content.startswith("Ice Atlas")
            titled, plain = await app.embedder.embed([f"Ice Atlas\n\n{child.content}", child.content])
            top = (await app.vectors.search_dense(titled, 1, PointFilter()))[0]
            assert top.chunk_id == child.chunk_id and top.score > 0.999
            own = [h for h in await app.vectors.search_dense(plain, 100, PointFilter()) if h.chunk_id == child.chunk_id]
            assert own[0].score < 0.99
        result = await app.pipeline.query(QueryOptions("history of glaciers", 1, use_cache=False))
        assert not result.contexts[0].parent.content.startswith("Ice Atlas")
    finally:
        await app.close()


async def test_a_long_title_leaves_each_child_whole_in_what_the_model_reads(tmp_path: Path) -> None:
    """A title of more tokens than the model has beside a child pushed the child's last sentences
    out of its vector: children lead with the title cut to fit."""
    from retrieval_server.ingest.indexer import children_title

    title = " ".join(f"Annual infrastructure report volume {i}" for i in range(20))
    app = Application(load_settings(data_dir=tmp_path, parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8,
                                    child_title=True, max_seq_length=64))
    await app.open()
    try:
        assert not (await app.ingest([_txt("glaciers", LONG, title=title)])).errors
        kid_title = children_title(app.chunker, title, 64)
        assert title.startswith(kid_title) and len(kid_title) < len(title)
        child = (await app.vectors.get_chunks(["glaciers#p0c0"]))[0]
        fitted, whole = await app.embedder.embed([f"{kid_title}\n\n{child.content}", f"{title}\n\n{child.content}"])
        top = (await app.vectors.search_dense(fitted, 1, PointFilter()))[0]
        assert top.chunk_id == child.chunk_id and top.score > 0.999
        assert [h for h in await app.vectors.search_dense(whole, 100, PointFilter()) if h.chunk_id == child.chunk_id][0].score < 0.99
    finally:
        await app.close()


async def _titled_embedding_matches(app: Application, doc_id: str, title: str) -> bool:
    """Whether the document's first child is stored as the embedding of title + text."""
    child = (await app.vectors.get_chunks([f"{doc_id}#p0c0"]))[0]
    titled = (await app.embedder.embed([f"{title}\n\n{child.content}"]))[0]
    top = (await app.vectors.search_dense(titled, 1, PointFilter()))[0]
    return top.chunk_id == child.chunk_id and top.score > 0.999


async def test_an_index_keeps_the_contextual_children_it_was_built_with(tmp_path: Path, caplog: Any) -> None:
    """CHILD_TITLE is bound when an index gets its first documents and recorded in it: a later
    setting does not mix untitled children into a titled index (with a warning); an index from
    before the record holds untitled children unless the setting says otherwise; an empty index
    takes the setting of the moment."""
    sizes: dict[str, Any] = {"parent_chunk_tokens": 64, "child_chunk_tokens": 24, "child_overlap_tokens": 8}

    async def opened(**kw: Any) -> Application:
        app = Application(load_settings(data_dir=tmp_path, **sizes, **kw))
        await app.open()
        return app

    app = await opened(child_title=False)  # empty: records off, yet a later setting may still change it
    assert not app.indexer.child_title
    await app.close()
    app = await opened(child_title=True)
    try:
        assert app.indexer.child_title
        assert not (await app.ingest([_txt("glaciers", LONG, title="Ice Atlas")])).errors
        assert await _titled_embedding_matches(app, "glaciers", "Ice Atlas")
    finally:
        await app.close()
    caplog.clear()
    app = await opened(child_title=False)
    try:
        assert app.indexer.child_title, "the index was built with titled children"
        assert any("RETRIEVAL_CHILD_TITLE=true, which it keeps" in r.getMessage() for r in caplog.records)
        assert not (await app.ingest([_txt("fjords", LONG.replace("glaciers", "fjords"), title="Coast Guide")])).errors
        assert await _titled_embedding_matches(app, "fjords", "Coast Guide")
        async with app.metadata.transaction() as tx:
            await tx.execute("DELETE FROM index_info WHERE info_key = ?", ["child_title"])
    finally:
        await app.close()
    # No record (an index from before it was kept): untitled unless the setting is given.
    for given, built in ({}, False), ({"child_title": True}, True):
        app = await opened(**given)
        try:
            assert app.indexer.child_title is built and await app.metadata.get_info("child_title") == str(built).lower()
            async with app.metadata.transaction() as tx:
                await tx.execute("DELETE FROM index_info WHERE info_key = ?", ["child_title"])
        finally:
            await app.close()


SERVICES = ("ProjectAlpha depends on AuthSvc for its logins. AuthSvc uses DatabaseSvc to keep the sessions. "
            "DatabaseSvc replicates to the standby in another region every night.")


async def test_keyword_vectors_and_the_graph_are_made_while_the_batch_is_embedded(app: Application) -> None:
    """The embedding and the graph extraction each wait for the other to start: made one after the
    other (the graph between a document's writes, after the embedding) the ingest could not go on,
    and the bound turns that into a failure rather than a hang. What they make is stored as usual."""
    started = {"embed": asyncio.Event(), "graph": asyncio.Event()}
    indexer = app.indexer
    embedder, extractor = indexer._embedder, indexer._graph  # noqa: SLF001 - holding the two stages
    assert extractor is not None
    extracted: list[Any] = []

    async def hold(mine: str, other: str) -> None:
        started[mine].set()
        await asyncio.wait_for(started[other].wait(), 300)

    class HeldEmbedder:
        def __getattr__(self, name: str) -> Any:
            return getattr(embedder, name)

        async def embed_background(self, texts: Any, **kwargs: Any) -> Any:
            await hold("embed", "graph")
            return await embedder.embed_background(texts, **kwargs)

    class HeldGraph:
        def __getattr__(self, name: str) -> Any:
            return getattr(extractor, name)

        async def extract(self, parents: Any, children: Any) -> Any:
            await hold("graph", "embed")
            extracted.append(await extractor.extract(parents, children))
            return extracted[-1]

    indexer._embedder, indexer._graph = HeldEmbedder(), HeldGraph()  # type: ignore[assignment]  # noqa: SLF001
    report = await app.ingest([_txt("services", SERVICES)])
    assert not report.errors and [d.document_id for d in report.documents] == ["services"]
    (graph,) = extracted
    stored = await app.metadata.graph_entities(None, AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN)), document_ids=["services"])
    assert set(stored) == {e.key for e in graph.entities} >= {"authsvc", "databasesvc"}
    found = await app.pipeline.query(QueryOptions("DatabaseSvc standby region", 1, strategy=Strategy.KEYWORD, use_cache=False))
    assert [c.document.document_id for c in found.contexts] == ["services"]


# --- a document replaced while a query reads it -----------------------------------------------------

LAMP_V1 = "Lighthouse keepers check the lamp every night. The lamp needs oil."
LAMP_V2 = "Lighthouse keepers check the lamp every evening. The lamp needs kerosene."


class _ReplacedAfterSearching:
    """Around the vector store's ``search_dense`` (tests.support.intercept): a re-ingest of ``lh``
    committed right after each of the first ``times`` dense searches, a concurrent writer finishing
    between a query's search and its read. Records the vectors searched, in order."""

    def __init__(self, app: Application, times: int) -> None:
        self._app, self.left = app, times
        self.searched: list[bytes] = []

    @property
    def searches(self) -> int:
        return len(self.searched)

    def store(self) -> Intercepted:
        return Intercepted(self._app.vectors, "search_dense", self)

    async def __call__(self, search: Callable[..., Awaitable[Any]], vector: Any, *args: Any, **kwargs: Any) -> Any:
        self.searched.append(np.asarray(vector, dtype=np.float32).tobytes())
        hits = await search(vector, *args, **kwargs)
        if self.left:
            self.left -= 1
            report = await self._app.ingest([_txt("lh", f"{LAMP_V2} Revision {self.searches}.")])
            assert [d.document_id for d in report.documents] == ["lh"]
        return hits


@pytest.mark.parametrize("strategy", [Strategy.SEMANTIC, Strategy.HYBRID])
async def test_a_document_replaced_between_search_and_enrich_is_searched_again(app: Application, strategy: Strategy) -> None:
    """The document exists throughout: its old version's hits cannot be shown, so its new version is
    searched for, once, rather than the answer going without it."""
    await app.ingest([_txt("lh", LAMP_V1), _txt("harbour", "The harbour master logs every ship that docks.")])
    replacer = _ReplacedAfterSearching(app, times=1)
    deps = app.pipeline.deps
    # One pass: the retry an insufficient answer gets is not what brings the document back.
    one_pass = dataclasses.replace(deps.settings, max_iterations=1)
    p = QueryPipeline(dataclasses.replace(deps, vectors=replacer.store(), settings=one_pass))
    r = await p.query(QueryOptions("lighthouse lamp", 1, strategy=strategy, use_cache=False))
    assert [c.document.document_id for c in r.contexts] == ["lh"] and "Revision 1." in r.contexts[0].parent.content
    assert [s.stage for s in r.metrics.stages].count("retrieve") == 2 and replacer.searches == 2


async def test_a_document_replaced_at_every_search_is_searched_again_once_only(app: Application) -> None:
    await app.ingest([_txt("lh", LAMP_V1)])
    replacer = _ReplacedAfterSearching(app, times=5)
    deps = app.pipeline.deps
    one_pass = dataclasses.replace(deps.settings, max_iterations=1)  # no retry for an empty answer: only the search again
    r = await QueryPipeline(dataclasses.replace(deps, vectors=replacer.store(), settings=one_pass)).query(
        QueryOptions("lighthouse lamp", 3, strategy=Strategy.SEMANTIC, use_cache=False)
    )
    assert r.contexts == () and [s.stage for s in r.metrics.stages].count("retrieve") == 2 and replacer.searches == 2


async def test_search_looks_again_for_a_document_replaced_since_its_search(app: Application) -> None:
    await app.ingest([_txt("lh", LAMP_V1)])
    replacer = _ReplacedAfterSearching(app, times=1)
    found = await QueryPipeline(dataclasses.replace(app.pipeline.deps, vectors=replacer.store())).search("lighthouse lamp", 3, Identity())
    assert {f.document_id for f in found} == {"lh"} and any("Revision 1." in f.text for f in found) and replacer.searches == 2


async def test_searched_again_the_dense_legs_reuse_their_vectors_in_their_order(app: Application) -> None:
    """A long query's dense legs search its vector, its variants' and its windows': searched again,
    each leg searches the vector it searched before, and nothing is embedded again."""
    await app.ingest([_txt("lh", LAMP_V1), _txt("harbour", "The harbour master logs every ship that docks.")])
    query = "lighthouse lamp " + " ".join(f"keepers check the lamp and its oil on night {i}" for i in range(12))
    replacer = _ReplacedAfterSearching(app, times=1)
    marks: list[int] = []  # where enrich read the stored versions (it does when it finds stale hits)
    embeddings: list[int] = []

    async def marking(read: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        marks.append(replacer.searches)
        return await read(*args, **kwargs)

    async def counting(embed: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        embeddings.append(1)
        return await embed(*args, **kwargs)

    deps = app.pipeline.deps
    one_pass = dataclasses.replace(deps.settings, max_iterations=1)
    r = await QueryPipeline(dataclasses.replace(
        deps, vectors=replacer.store(), embedder=Intercepted(deps.embedder, "embed", counting),
        metadata=Intercepted(deps.metadata, "document_versions", marking), settings=one_pass,
    )).query(QueryOptions(query, 1, strategy=Strategy.SEMANTIC, use_cache=False))
    [split] = marks  # enrich read the versions once: after the first pass, which found stale hits
    first, second = replacer.searched[:split], replacer.searched[split:]
    assert len(first) > 2 and sorted(first) == sorted(second)  # the query's and its windows', each searched again
    assert len(embeddings) == 1 and [c.document.document_id for c in r.contexts] == ["lh"]


async def test_a_jsonl_row_is_named_by_its_line_and_id_however_many_rows_are_read(app: Application) -> None:
    rows = '{"_id": "a", "text": "Aardvarks dig.", "metadata": {"note": "' + "x" * 16_400 + '"}}\n{broken\n'
    report = await app.ingest([DocumentSource(filename="one.jsonl", content=rows.encode())])
    assert [e.source for e in report.errors] == ["one.jsonl:line 2", "one.jsonl:line 1 (a)"]


async def test_a_jsonl_row_read_but_not_stored_is_named_by_its_line(app: Application) -> None:
    """By its id alone, every blank id read "rows.jsonl: ", and a repeated id named both rows."""
    rows = ['{"_id": " ", "text": "A blank id."}', '{"_id": "", "text": "An empty id."}', '{"_id": "dup", "text": "First."}',
            "", '{"_id": "dup", "text": "Second."}']
    report = await app.ingest([DocumentSource(filename="rows.jsonl", content="\n".join(rows).encode())])
    assert [d.document_id for d in report.documents] == ["dup"]
    assert [e.source for e in report.errors] == ["rows.jsonl:line 1 ( )", "rows.jsonl:line 2 ()", "rows.jsonl:line 5 (dup)"]
    assert report.errors[-1].reason == "document_id 'dup' appears twice in one request"


async def test_a_files_rows_that_cannot_be_stored_are_listed_as_its_unreadable_ones(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 MB file of 20,000 repeated ids answered with an error each: 22 MB, over a client's 4 MiB."""
    rows = "".join('{"_id": "a", "text": "Aardvarks dig."}\n' for _ in range(250))
    report = await app.ingest([DocumentSource(filename="many.jsonl", content=rows.encode())])
    assert [d.document_id for d in report.documents] == ["a"]
    assert [e.source for e in report.errors] == [f"many.jsonl:line {n} (a)" for n in range(2, 102)] + ["many.jsonl"]
    assert report.errors[-1].reason == "149 more rows could not be stored"
    # And a request of many files lists the first errors, then counts the rest.
    monkeypatch.setattr(indexer_module, "MAX_REPORTED_ERRORS", 3)
    report = await app.ingest([DocumentSource(filename=f"f{i}.docx", content=b"x") for i in range(5)])
    assert [e.source for e in report.errors] == ["f0.docx", "f1.docx", "f2.docx"] and report.errors_not_listed == 2


class _Full:
    def check(self, estimated: int) -> None:
        raise ResourceExhausted("the disk is full")


@pytest.mark.parametrize("failure", ["disk", "embedding", "storing"])
async def test_a_failure_after_loading_names_the_file_or_row_as_loading_does(
    app: Application, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """Failures past loading named the document id ("intro", "r1"), where the proto promises the
    file name, or the file, line and id of a JSONL row, as load-time errors name them."""

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("gone")

    if failure == "disk":
        monkeypatch.setattr(app.indexer, "_disk", _Full())
    else:
        monkeypatch.setattr(*((app.indexer, "_embed") if failure == "embedding" else (app.vectors, "upsert")), broken)
    report = await app.ingest([
        DocumentSource(filename="handbook/intro.txt", content=b"Glaciers move slowly. Ice sheets too."),
        DocumentSource(filename="rows.jsonl", content=b'{"_id": "r1", "text": "Row one text about moraines."}\n'),
        DocumentSource(filename="", content=b"Tides follow the moon.", document_id="tides"),
    ])
    assert not report.documents
    assert [e.source for e in report.errors] == ["handbook/intro.txt", "rows.jsonl:line 1 (r1)", "tides"], report.errors


async def test_each_source_is_told_finished_once_its_documents_are_stored_or_failed(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller stopped part-way (Ctrl-C) gets no report: the CLI reported a file of rows all
    written STORED IN PART, and a file already refused NOT SENT, its failure unknown to it."""
    monkeypatch.setattr(app.indexer, "_batch", 1)  # each document written while the next are loaded
    told: list[tuple[str, int, str]] = []
    r1_stored = asyncio.Event()
    prepare = app.indexer._prepare

    async def after_r1(src: DocumentSource, loaded: Any, *args: Any) -> Any:
        if loaded.document_id == "r2":  # the file's first row written, its last not loaded yet
            await r1_stored.wait()
        return await prepare(src, loaded, *args)

    def stored(place: int, d: Any) -> None:
        told.append(("stored", place, d.document_id))
        if d.document_id == "r1":
            r1_stored.set()

    monkeypatch.setattr(app.indexer, "_prepare", after_r1)
    report = await app.ingest(
        [DocumentSource(filename="broken.docx", content=b"x"),
         DocumentSource(filename="rows.jsonl", content=b'{"_id": "r1", "text": "Rivers meet the sea."}\n{broken\n'
                                                      b'{"_id": "r2", "text": "Deltas form at river mouths."}\n'),
         _txt("owls", "Owls hunt at night.")],
        on_document=stored,
        on_failure=lambda place, e: told.append(("failed", place, e.source)),
        on_finished=lambda place: told.append(("finished", place, "")),
    )
    assert [d.document_id for d in report.documents] == ["r1", "r2", "owls"]
    assert sorted(t for t in told if t[0] != "finished") == sorted(
        [("failed", 0, "broken.docx"), ("failed", 1, "rows.jsonl:line 2"), ("stored", 1, "r1"), ("stored", 1, "r2"), ("stored", 2, "owls")])
    finished = [place for kind, place, _ in told if kind == "finished"]
    assert sorted(finished) == [0, 1, 2]
    for place in finished:  # after everything of its source, never before
        assert max(i for i, t in enumerate(told) if t[1] == place) == told.index(("finished", place, ""))


async def test_a_callback_that_fails_leaves_its_document_stored_and_reported_stored(app: Application, caplog: Any) -> None:
    """Raised from the document's write, it was reported a storing failure as well as stored; found
    unchanged, the ingest failed."""

    def fails(place: int, d: Any) -> None:
        raise OSError("stderr is closed")

    for _ in range(2):  # written, then found unchanged
        report = await app.ingest([_txt("glaciers", LONG)], on_document=fails)
        assert [d.document_id for d in report.documents] == ["glaciers"] and not report.errors, report.errors
        points, parents = await _state(app, "glaciers")
        assert points > 1 and parents > 1
    assert report.documents[0].unchanged and "telling the caller of an ingest's progress failed" in caplog.text


async def test_a_document_sent_without_a_file_name_is_named_by_its_id(app: Application) -> None:
    report = await app.ingest([DocumentSource(filename="", content=b"\xffnot text", document_id="notes"),
                               DocumentSource(filename="", content=b"Tides follow the moon.", document_id="tides")])
    assert [(e.source, e.reason.split(" (")[0]) for e in report.errors] == [("notes", "file is not UTF-8 text")]  # not "notes.txt"
    [doc] = (await app.metadata.get_documents(["tides"])).values()
    assert (doc.title, doc.source) == ("tides", "tides.txt")  # read as a text file named by its id, as before


async def test_abandoned_writes_are_reconciled_while_the_process_runs(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared storage: a process killed mid-delete left its intent, too young for the start-up's
    recovery; the sweep reconciles it once the lease has passed, without another restart."""
    await app.ingest([_txt("x", "Orphaned points outlive their rows."), _txt("y", "Kept.")])
    await app.metadata.delete_document("x")  # the rows went, the kill came before the points did
    assert await app.metadata.pending_writes(older_than=time.time() + 1) == ["x"] and await app.vectors.count("x") > 0
    recover, recovered = app.indexer.recover, asyncio.Event()

    async def watched(min_age_s: float = 0.0) -> list[str]:
        done = await recover(min_age_s=min_age_s)
        if done:
            recovered.set()
        return done

    monkeypatch.setattr(app.indexer, "recover", watched)
    sweep = asyncio.ensure_future(sweep_abandoned_writes(app.indexer, lease_s=0.0, every_s=0.01))
    try:
        await asyncio.wait_for(recovered.wait(), 60)
    finally:
        sweep.cancel()
        await asyncio.gather(sweep, return_exceptions=True)
    assert await app.vectors.count("x") == 0 and await app.vectors.count("y") > 0
    assert await app.metadata.pending_writes(older_than=time.time() + 1) == []


async def test_recovery_takes_intents_stamped_ahead_of_the_clock(app: Application) -> None:
    """A clock stepped back after a kill -9 leaves the intents stamped before the kill ahead of it.
    By their stamps alone, recovery left them pending (and a deleted document's points in the
    searches) until the clock caught up: an embedded index's start-up takes every one; with a
    lease, one stamped more than a lease ahead, which no live write stamped."""
    await app.ingest([_txt("near", "Orphaned points outlive their rows."), _txt("far", "Stale points of a deleted document.")])
    ahead = {"near": time.time() + 120, "far": time.time() + 7200}
    for doc_id, stamp in ahead.items():
        await app.metadata.delete_document(doc_id)  # the rows went, the kill came before the points did
        async with app.metadata.transaction() as tx:
            await tx.execute("UPDATE pending_writes SET started_at = ? WHERE document_id = ?", [stamp, doc_id])
    assert await app.indexer.recover(min_age_s=600.0) == ["far"]
    assert await app.vectors.count("far") == 0 and await app.vectors.count("near") > 0  # within a lease ahead: perhaps a live write on a clock ahead
    assert await app.indexer.recover(min_age_s=0.0) == ["near"]
    assert await app.vectors.count("near") == 0 and await app.metadata.pending_writes() == []


async def test_a_delete_below_the_disk_floor_is_done_and_its_vacuum_waits_for_room(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deletes go on below RETRIEVAL_MIN_FREE_DISK_MB (tens of KiB written); the vacuum they start
    rewrites a segment (tens of MiB), which on a full volume is the engine's SIGBUS, so it waits
    for a delete (or an ingest) with room for it."""
    await app.ingest([_txt("a", LONG), _txt("b", "Volcanoes erupt molten rock."), _txt("c", "Deserts are dry.")])
    await app.wait_for_optimize()
    optimize, vacuums = app.vectors.optimize, [0]

    async def counted() -> None:
        vacuums[0] += 1
        await optimize()

    monkeypatch.setattr(app.vectors, "optimize", counted)
    roomy, low = app.disk, app.disk.shortest()
    assert low is not None
    monkeypatch.setattr(app, "disk", dataclasses.replace(roomy, floor_bytes=low[1] + 1024**3))
    assert await app.delete(["a"]) == (["a"], [])
    await app.wait_for_optimize()
    assert await _state(app, "a") == (0, 0) and vacuums[0] == 0
    monkeypatch.setattr(app, "disk", roomy)
    assert await app.delete(["b"]) == (["b"], [])
    await app.wait_for_optimize()
    assert vacuums[0] == 1


@pytest.mark.mariadb
async def test_a_cleanup_that_fails_with_the_store_is_retried_once_it_is_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MariaDB killed between a replacement's vector writes and its rows' commit: the cleanup after
    the failed commit fails too. Once MariaDB is back the leftover points go and the pending write
    is cleared, without a restart of the service: they crowded the stored documents out of
    searches (a Query at top_k=2 answered with one context) until the next start."""
    server = MariaDb(tmp_path / "mariadb")
    server.start(setup=True)
    app = Application(load_settings(data_dir=tmp_path / "data", mysql_dsn=server.dsn, mysql_timeout_s=3.0, cache_backend="none",
                                    parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8))
    try:
        await app.open()
        first = (await app.ingest([_txt("glaciers", LONG), _txt("volcanoes", "Volcanoes erupt molten rock from the crust.")])).documents
        committed = await app.metadata.get_document("glaciers")
        assert committed is not None and not first[0].replaced
        upsert, reconcile, reconciled = app.vectors.upsert, app.indexer.reconcile, asyncio.Event()

        async def upsert_then_kill(*args: Any, **kwargs: Any) -> None:
            await upsert(*args, **kwargs)
            if server.proc is not None and server.proc.poll() is None:
                server.kill()

        async def watched(document_id: str) -> None:
            await reconcile(document_id)
            reconciled.set()

        monkeypatch.setattr(app.vectors, "upsert", upsert_then_kill)
        monkeypatch.setattr(app.indexer, "reconcile", watched)
        report = await app.ingest([_txt("glaciers", LONG.replace("glaciers", "moraines"))])
        assert [e.source for e in report.errors] == ["glaciers.txt"] and not reconciled.is_set()
        monkeypatch.setattr(app.vectors, "upsert", upsert)
        assert await app.vectors.count("glaciers") > first[0].child_chunks  # the new version's points stayed

        server.start()
        # 120 s only turns a retry that never comes into a failure; it comes CLEANUP_RETRY_FIRST_S after the failure.
        await asyncio.wait_for(reconciled.wait(), 120)
        assert await app.metadata.pending_writes() == []
        assert await app.metadata.get_document("glaciers") == committed
        assert await app.vectors.count("glaciers") == await app.vectors.count("glaciers", committed.version) == first[0].child_chunks
        result = await app.pipeline.query(QueryOptions("history of glaciers and ice sheets", 2))
        assert len(result.contexts) == 2 and all("moraines" not in c.parent.content for c in result.contexts)
    finally:
        await app.close()
        server.stop()


async def test_recovery_leaves_a_write_begun_after_it_listed_the_abandoned_ones(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared storage: another process began writing the document after recovery read its list
    (the intent is renewed): that write is in flight, not abandoned, and its points stay."""
    await app.ingest([_txt("x", "Points of a write in flight.")])
    await app.metadata.delete_document("x")  # an intent, older than the cutoff below
    listed = app.metadata.pending_writes

    async def listed_then_renewed(*args: Any, **kwargs: Any) -> list[str]:
        pending = await listed(*args, **kwargs)
        await asyncio.sleep(0.001)  # another process's begin_write, stamped after the cutoff
        await app.metadata.begin_write("x")
        return pending

    monkeypatch.setattr(app.metadata, "pending_writes", listed_then_renewed)
    assert await app.indexer.recover(min_age_s=1e-9) == []
    assert await app.vectors.count("x") > 0 and await app.metadata.has_pending_write("x")


@pytest.mark.parametrize("blank", [" ", "\x00", "\u200b", " \t\x1b\u2060 "], ids=["space", "nul", "zero-width", "mixed"])
async def test_a_callers_url_or_source_with_nothing_visible_is_none(app: Application, blank: str) -> None:
    """Sent with nothing visible in it, a caller's url replaced each JSONL row's own (" " in every
    hit of every row), and its source the file name: each is none sent, as a blank title is."""
    rows = b'{"_id": "r1", "text": "Row one is about tides.", "metadata": {"url": "https://rows.example/1"}}\n'
    report = await app.ingest([DocumentSource(filename="rows.jsonl", content=rows, url=blank, source=blank),
                               DocumentSource(filename="notes.txt", content=b"Notes about tides.", document_id="notes", url=blank, source=blank)])
    assert not report.errors, report.errors
    docs = await app.metadata.get_documents(["r1", "notes"])
    assert (docs["r1"].url, docs["r1"].source) == ("https://rows.example/1", "rows.jsonl")
    assert (docs["notes"].url, docs["notes"].source) == ("", "notes.txt")


async def test_a_file_names_control_characters_are_spaces_in_its_default_title_and_source(app: Application) -> None:
    """A file that gives no title is titled by its name, and its source is the name: both are
    carried back in every hit, and the name's OSC 52 and carriage return reached each reader."""
    name = "invoice\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2K\r\npaid.txt"
    report = await app.ingest([DocumentSource(filename=name, content=b"Invoice 7 was paid in full.", document_id="inv-7")])
    assert not report.errors, report.errors
    [doc] = (await app.metadata.get_documents(["inv-7"])).values()
    assert doc.title == "invoice ]52;c;cm0gLXJmIH4K [2K paid"
    assert doc.source == "invoice ]52;c;cm0gLXJmIH4K  [2K  paid.txt"
