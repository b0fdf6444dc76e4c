"""The retrieval workflow over the embedded stores: strategies, routers, access, degradations.

A hand-made corpus makes the right answer obvious for each strategy; each router decision is
forced and the stages that ran are checked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from retrieval_server.api.servicer import _deadline
from retrieval_server.app import Application
from retrieval_server.backends.cache import MemoryCache
from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.http_body import MAX_RESPONSE_BYTES
from retrieval_server.backends.llm import OpenAICompatibleChat
from retrieval_server.backends.sparse import TERMS_REVISION
from retrieval_server.backends.vector_store import IndexFeatures
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore
from retrieval_server.backends.reranker import FallbackReranker, OnnxReranker, RerankError, TeiReranker
from retrieval_server.config import load_settings
from retrieval_server.domain import (
    Access, AccessFilter, DeadlineExceeded, Document, DocumentSource, Fusion, Identity, ParentChunk, PointFilter, QueryOptions,
    Mode, RetrievedContext, Role, StageMetric, Strategy,
)
from retrieval_server.workflow import dense_feedback, nodes
from retrieval_server.workflow.nodes import sufficiency_score
from retrieval_server.workflow.analysis import Analysis, ClassicalAnalyzer, LlmAnalyzer, NotApplicable, TechniqueModel
from retrieval_server.workflow.pipeline import QueryPipeline
from retrieval_server.workflow.assistant import Assistant
from retrieval_server.workflow.state import QueryState
from retrieval_server.workflow.tools import TOOLS, Calculate
from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
from scoring_core.encoders import CrossEncoder
from scoring_core.model_builder import BertShape, build_cross_encoder
from tests.support.clock import Clock
from tests.support.http_servers import Followed, Streamed, Unsized, json_server, tei_rerank, word_overlap
from tests.support.intercept import Intercepted

ANON, ALICE, BOB, CAROL = Identity(), Identity("alice", Role.USER), Identity("bob", Role.USER), Identity("carol", Role.USER)
ROOT = Identity("root", Role.SUPER_ADMIN)
ALL_STRATEGIES = [Strategy.SEMANTIC, Strategy.KEYWORD, Strategy.HYBRID, Strategy.ADAPTIVE]


def _doc(doc_id: str, text: str, **kw: Any) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode(), document_id=doc_id, **kw)


CORPUS = [
    _doc("codes", "Error XK-4471 means the flux capacitor overheated during the test run."),
    _doc("weather", "Rain is expected across the northern valleys tomorrow, with heavy showers in the afternoon."),
    _doc("cooking", "Simmer the tomato sauce slowly with basil and garlic for forty minutes."),
    _doc("handbook", "Vacation days accrue monthly. Unused days expire at the end of March.", title="Zephyr Charter", metadata={"team": "Nimbus"}),
    _doc("alice-notes", "Alice's notes: the flux capacitor prototype is stored in lab three.", access=Access.PRIVATE, owner_id="alice"),
    _doc("bob-notes", "Bob's roadmap: the flux capacitor ships to customers in May.", access=Access.PRIVATE, owner_id="bob", granted_user_ids=("carol",)),
]


@pytest_asyncio.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path_factory.mktemp("pipeline"), cache_backend="none", store_backoff_s=0.001))
    await application.open()
    report = await application.ingest(CORPUS)
    assert not report.errors
    yield application
    await application.close()


def pipeline(app: Application, clock: Callable[[], float] = time.monotonic, **overrides: Any) -> QueryPipeline:
    """The app's pipeline with some dependencies or settings replaced; deadlines read on ``clock``."""
    settings = {k: overrides.pop(k) for k in list(overrides) if hasattr(app.pipeline.deps.settings, k)}
    deps = dataclasses.replace(app.pipeline.deps, settings=dataclasses.replace(app.pipeline.deps.settings, **settings), **overrides)
    return QueryPipeline(deps, clock=clock)


def _docs(result: Any) -> list[str]:
    return [c.document.document_id for c in result.contexts]


def _stages(result: Any) -> list[str]:
    return [s.stage for s in result.metrics.stages]


# --- strategies -------------------------------------------------------------------------------


async def test_semantic_finds_meaning(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("will it be wet outside tomorrow", 1, strategy=Strategy.SEMANTIC))
    assert _docs(r) == ["weather"] and r.metrics.strategy_used is Strategy.SEMANTIC
    assert 0.3 < r.contexts[0].score <= 1.0  # one leg: its cosine similarity, not an RRF score


async def test_parent_leg_is_a_second_dense_granularity(app: Application, tmp_path: Path) -> None:
    """On (the default), an index stores the parents' vectors and SEMANTIC also searches them; a chunk
    scores its best cosine of the two granularities (DENSE_FUSION=max_cosine), or with rrf children
    and parents share the dense weight. Off, a new index embeds no parent and the leg does not run."""
    assert app.vectors.features.parent_vectors
    wet = "will it be wet outside tomorrow"
    r = await app.pipeline.query(QueryOptions(wet, 1, strategy=Strategy.SEMANTIC, use_cache=False))
    assert _docs(r) == ["weather"]
    legs = await _legs(app, wet, ROOT)
    best = max(h.score for leg in ("dense:0", "parent:0") for h in legs[leg] if h.document_id == "weather")
    assert r.contexts[0].score == pytest.approx(best) and 0.3 < best <= 1.0  # a cosine, not an RRF score
    ranked = await pipeline(app, dense_fusion="rrf").query(QueryOptions(wet, 1, strategy=Strategy.SEMANTIC, use_cache=False))
    k = app.settings.rrf_k
    assert _docs(ranked) == ["weather"]
    assert ranked.contexts[0].score == pytest.approx(0.5 / (k + 1) + 0.5 / (k + 1))  # both legs rank it first
    assert "analysis:hyde:skipped: needs an LLM" in r.metrics.degraded  # reported, not hidden
    assert "rerank:unavailable" in r.metrics.degraded

    embedded: list[int] = []
    without = Application(load_settings(data_dir=tmp_path, cache_backend="none", parent_leg=False))
    await without.open()
    try:
        assert not without.vectors.features.parent_vectors
        encode = without.embedder.embed_background

        async def counted(texts: list[str], **kwargs: Any) -> Any:
            embedded.append(len(texts))
            return await encode(texts, **kwargs)

        without.embedder.embed_background = counted  # type: ignore[method-assign]
        report = await without.ingest(CORPUS)
        assert not report.errors and sum(embedded) == sum(d.child_chunks for d in report.documents)  # the children, and no parent
        assert "parent:0" not in await _legs(without, wet, ROOT)
        assert _docs(await without.pipeline.query(QueryOptions(wet, 1, strategy=Strategy.SEMANTIC, use_cache=False))) == ["weather"]
    finally:
        await without.close()


async def _legs(app: Application, query: str, identity: Identity) -> dict[str, Any]:
    state = QueryState(options=QueryOptions(query, 5, strategy=Strategy.SEMANTIC, use_cache=False, identity=identity))
    for node in (nodes.build_access_filter, nodes.analyze_query, nodes.retrieve):
        for k, v in (await node(state, app.pipeline.deps)).items():
            setattr(state, k, v)
    return state.legs


async def test_document_leg_searches_each_documents_first_window(app: Application, tmp_path: Path) -> None:
    """The document leg reads the first parents' vectors only, inside the access filter; its hits
    are children, so they fuse with the child leg's; off (the default) it does not run."""
    assert "document:0" not in await _legs(app, "flux capacitor", ROOT)
    # The parent leg off: the document leg alone beside the children, though the index holds every parent's vector.
    settings = load_settings(data_dir=tmp_path, cache_backend="none", document_leg=True, parent_leg=False, parent_chunk_tokens=24,
                             child_chunk_tokens=12, child_overlap_tokens=0)
    with_documents = Application(settings)
    await with_documents.open()
    try:
        assert with_documents.vectors.features.parent_vectors
        lava = _doc("volcano", "Basalt flows cool into columns. " * 6 + "Lava from the volcano glows red at night near the flux capacitor.")
        assert not (await with_documents.ingest([*CORPUS, lava])).errors
        legs = await _legs(with_documents, "lava glowing red at night", ROOT)
        assert {h.parent_index for h in legs["document:0"]} == {0}
        assert "volcano#p0" in {h.parent_chunk_id for h in legs["document:0"]}
        # The child leg finds the volcano's later parent; the document leg holds its first window only.
        assert any(h.document_id == "volcano" and h.parent_index > 0 for h in legs["dense:0"])
        child_ids = {h.chunk_id for h in legs["dense:0"]}
        assert all(h.chunk_id in child_ids or h.chunk_id.split("#")[1].startswith("p0c") for h in legs["document:0"])
        assert "alice-notes" not in {h.document_id for h in (await _legs(with_documents, "flux capacitor prototype", ANON))["document:0"]}
        assert "alice-notes" in {h.document_id for h in (await _legs(with_documents, "flux capacitor prototype", ALICE))["document:0"]}
        wet = QueryOptions("will it be wet outside tomorrow", 1, strategy=Strategy.SEMANTIC, use_cache=False)
        r = await pipeline(with_documents, dense_fusion="rrf").query(wet)
        assert _docs(r) == ["weather"]
        assert r.contexts[0].score == pytest.approx(1.0 / (with_documents.settings.rrf_k + 1))  # both legs first; shares sum to 1
        # By cosine (the default): the volcano's best cosine of its chunks and its first window, not an RRF score.
        whole = "basalt flows cool into columns and lava glows red at night"
        legs = await _legs(with_documents, whole, ROOT)
        best = max(h.score for leg in ("dense:0", "document:0") for h in legs[leg] if h.document_id == "volcano")
        top = await with_documents.pipeline.query(QueryOptions(whole, 1, strategy=Strategy.SEMANTIC, use_cache=False))
        assert _docs(top) == ["volcano"] and top.contexts[0].score == pytest.approx(best)
        # Document evidence: the volcano's several matching chunks lift its best one.
        q = QueryOptions("basalt columns and lava of the volcano", 1, strategy=Strategy.HYBRID, use_cache=False)
        plain = await with_documents.pipeline.query(q)
        lifted = await pipeline(with_documents, document_evidence=0.5).query(q)
        assert _docs(plain) == _docs(lifted) == ["volcano"] and lifted.contexts[0].score > plain.contexts[0].score * 1.1
    finally:
        await with_documents.close()


class FeedbackRecorder:
    """Wraps a vector store: records the feedback vectors read and the dense searches asked for."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.feedback, self.searched = inner, [], []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def nearest_vectors(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[np.ndarray]:
        got = await self._inner.nearest_vectors(vector, limit, flt)
        self.feedback.append(got)
        return got

    async def search_dense(self, vector: np.ndarray, limit: int, flt: PointFilter) -> Any:
        self.searched.append(np.asarray(vector))
        return await self._inner.search_dense(vector, limit, flt)


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
async def test_dense_feedback_searches_again_with_the_query_moved_towards_readable_neighbours(
    app: Application, backend: str, tmp_path: Path
) -> None:
    """Off by default. On, a second dense search runs with the Rocchio-moved query, fused as a leg
    of its own; the vectors that move the query are those of chunks the caller may read."""
    if backend == "edge":
        await _dense_feedback_checks(app)
        return
    local = Application(load_settings(data_dir=tmp_path, cache_backend="none", qdrant_path=str(tmp_path / "qdrant")))
    await local.open()
    try:
        assert type(local.vectors).__name__ == "QdrantVectorStore"
        assert not (await local.ingest(CORPUS)).errors
        await _dense_feedback_checks(local)
    finally:
        await local.close()


async def _dense_feedback_checks(app: Application) -> None:
    assert "feedback:0" not in await _legs(app, "flux capacitor", ROOT)
    query = "where is the flux capacitor kept"
    runs: dict[str, FeedbackRecorder] = {}
    for who, identity in (("anon", ANON), ("root", ROOT)):
        recorder = runs[who] = FeedbackRecorder(app.vectors)
        p = pipeline(app, vectors=recorder, dense_feedback=dense_feedback.DenseFeedback(docs=3, weight=0.6))
        state = QueryState(options=QueryOptions(query, 5, strategy=Strategy.SEMANTIC, use_cache=False, identity=identity))
        for node in (nodes.build_access_filter, nodes.analyze_query, nodes.retrieve):
            for k, v in (await node(state, p.deps)).items():
                setattr(state, k, v)
        assert state.legs["feedback:0"] and len(recorder.feedback) == 1
        q = state.query_vector
        # Two dense searches: the query's own and the moved one, which is exactly Rocchio's.
        assert len(recorder.searched) == 2
        moved = next(v for v in recorder.searched if not np.allclose(v, q, atol=1e-6))
        assert moved == pytest.approx(dense_feedback.rocchio(q, recorder.feedback[0], 0.6), abs=1e-5)
        if who == "anon":
            assert not {"alice-notes", "bob-notes"} & {h.document_id for leg in state.legs.values() for h in leg}
    # The private notes are the nearest flux-capacitor chunks: they move root's query, never anon's.
    root_fb, anon_fb = runs["root"].feedback[0], runs["anon"].feedback[0]
    private = await app.vectors.nearest_vectors(runs["root"].searched[0], 10, PointFilter(access=AccessFilter.for_identity(ROOT, True), document_ids=("alice-notes", "bob-notes")))
    assert any(np.allclose(v, pv, atol=1e-5) for v in root_fb for pv in private)
    assert not any(np.allclose(v, pv, atol=1e-5) for v in anon_fb for pv in private)
    r = await pipeline(app, dense_feedback=dense_feedback.DenseFeedback(docs=3, weight=0.6)).query(
        QueryOptions("will it be wet outside tomorrow", 1, strategy=Strategy.SEMANTIC, use_cache=False))
    assert _docs(r) == ["weather"]
    assert r.contexts[0].score == pytest.approx(1.0 / (app.settings.rrf_k + 1))  # both searches rank it first; halves of one weight


async def test_keyword_finds_the_exact_code(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("XK-4471", 3, strategy=Strategy.KEYWORD))
    assert _docs(r)[0] == "codes" and r.metrics.strategy_used is Strategy.KEYWORD


@pytest.mark.parametrize("strategy", [Strategy.KEYWORD, Strategy.HYBRID])
async def test_a_query_of_stop_words_only_says_the_keyword_leg_had_no_terms(app: Application, strategy: Strategy) -> None:
    """BM25 leaves stop words out of its terms: "to be or not to be" searches nothing by keyword."""
    r = await app.pipeline.query(QueryOptions("to be or not to be", 3, strategy=strategy, use_cache=False))
    assert "keyword:no_terms" in r.metrics.degraded
    if strategy is Strategy.KEYWORD:
        assert _docs(r) == []
    found = await app.pipeline.query(QueryOptions("XK-4471 is it", 3, strategy=strategy, use_cache=False))
    assert "keyword:no_terms" not in found.metrics.degraded and _docs(found)[0] == "codes"


UNSPACED_AND_ACCENTED = [
    _doc("ja", "東京タワーは東京にある電波塔です。"), _doc("zh", "我喜欢机器学习和自然语言处理。"),
    _doc("fr", "Le café au lait est servi à Zürich chaque matin."), _doc("cs", "The desktop client is written in C# on .NET."),
    _doc("cpp", "The engine is written in C++ for speed."),
]


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
async def test_keyword_finds_words_inside_chinese_and_japanese_and_without_accents(
    backend: str, tmp_path: Path, executor: BlockingExecutor
) -> None:
    """A new index's keyword terms are of the current revision; one built with revision 1 keeps it,
    and its queries are encoded as its documents were."""
    def settings(data_dir: Path) -> Any:
        return load_settings(data_dir=data_dir, cache_backend="none", **({"qdrant_path": str(data_dir / "qdrant")} if backend != "edge" else {}))

    async def keyword(application: Application, query: str) -> list[str]:
        return _docs(await application.pipeline.query(QueryOptions(query, 1, strategy=Strategy.KEYWORD, use_cache=False)))

    new = Application(settings(tmp_path / "new"))
    await new.open()
    try:
        assert new.vectors.features.terms == new.sparse.terms == TERMS_REVISION
        assert not (await new.ingest(UNSPACED_AND_ACCENTED)).errors
        for query, found in [("東京", "ja"), ("電波塔", "ja"), ("机器学习", "zh"), ("cafe", "fr"), ("Zurich", "fr"), ("C#", "cs"), ("c++", "cpp")]:
            assert await keyword(new, query) == [found], query
    finally:
        await new.close()
    old_settings = settings(tmp_path / "old")
    wanted = IndexFeatures(parent_vectors=True, title_field=True, terms=1)
    built = (EdgeVectorStore(old_settings.embedded_vectors_dir, 384, executor, features=wanted) if backend == "edge"
             else QdrantVectorStore(old_settings.qdrant_collection, 384, path=old_settings.qdrant_path, features=wanted))
    await built.open()
    await built.close()
    old = Application(old_settings)
    await old.open()
    try:
        assert old.vectors.features.terms == old.sparse.terms == 1
        assert not (await old.ingest(UNSPACED_AND_ACCENTED)).errors
        assert await keyword(old, "Zürich") == ["fr"] and await keyword(old, "東京") == []
    finally:
        await old.close()


#: one title for all, or each file's name would tell them apart
CODES = [_doc(doc_id, text, title="Ops log") for doc_id, text in [
    ("ip-a", "Host 192.168.1.10 refused the connection."), ("ip-b", "Host 192.168.10.1 refused the connection."),
    ("ver-311", "Python 3.11 removed the asynchat module."), ("ver-113", "Python 11.3 removed the asynchat module."),
    ("date-a", "Outage on 2024-01-02 in the billing cluster."), ("date-b", "Outage on 2024-02-01 in the billing cluster."),
]]


async def test_keyword_ranks_the_exact_code_first_and_an_index_of_revision_2_keeps_its_terms(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """A code's digit groups in another order (an IP address, a version, a date) tied with it, or won."""
    asked = [("192.168.1.10", "ip-a"), ("192.168.10.1", "ip-b"), ("Python 3.11", "ver-311"), ("Python 11.3", "ver-113"),
             ("outage 2024-01-02", "date-a"), ("outage 2024/02/01", "date-b")]

    async def scores(application: Application, query: str) -> list[tuple[str, float]]:
        r = await application.pipeline.query(QueryOptions(query, 2, strategy=Strategy.KEYWORD, use_cache=False, rerank=False))
        return [(c.document.document_id, c.score) for c in r.contexts]

    new = Application(load_settings(data_dir=tmp_path / "new", cache_backend="none"))
    await new.open()
    try:
        assert not (await new.ingest(CODES)).errors
        for query, exact in asked:
            (first, best), (_, other) = await scores(new, query)
            assert first == exact and best > other, query
    finally:
        await new.close()
    old_settings = load_settings(data_dir=tmp_path / "old", cache_backend="none")
    built = EdgeVectorStore(old_settings.embedded_vectors_dir, 384, executor,
                            features=IndexFeatures(parent_vectors=True, title_field=True, terms=2))
    await built.open()
    await built.close()
    old = Application(old_settings)
    await old.open()
    try:
        assert old.vectors.features.terms == old.sparse.terms == 2
        assert not (await old.ingest(CODES)).errors
        for query, _ in asked:
            (_, best), (_, other) = await scores(old, query)
            assert best == other, query  # its terms as they were: the digit groups only
    finally:
        await old.close()


async def test_hybrid_uses_metadata_search(app: Application) -> None:
    # "Nimbus" appears only in the metadata, never in the title or the text.
    r = await app.pipeline.query(QueryOptions("Nimbus", 1, strategy=Strategy.HYBRID))
    assert _docs(r) == ["handbook"] and r.metrics.strategy_used is Strategy.HYBRID
    for other in (Strategy.SEMANTIC, Strategy.KEYWORD):
        alone = await app.pipeline.query(QueryOptions("Nimbus", 1, strategy=other))
        assert _docs(alone) != ["handbook"], "the corpus must make the metadata leg necessary"


async def test_the_metadata_leg_keeps_stop_words_only_when_asked_to(app: Application) -> None:
    seen: list[bool] = []

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(app.metadata, name)

        async def search_documents(self, *args: Any, keep_stopwords: bool = False, **kwargs: Any) -> Any:
            seen.append(keep_stopwords)
            return await app.metadata.search_documents(*args, keep_stopwords=keep_stopwords, **kwargs)

    for keep in (False, True):
        query = QueryOptions("the charter of Nimbus", 1, strategy=Strategy.HYBRID)
        await pipeline(app, metadata=Recording(), metadata_stopwords=keep).query(query)
    assert seen == [False, True]
    assert Application.workflow_settings(load_settings(metadata_stopwords=True)).metadata_stopwords
    assert not app.pipeline.deps.settings.metadata_stopwords


async def test_keyword_leg_searches_the_title_as_a_field(app: Application) -> None:
    """BM25F: words only in the title reach the keyword leg through the titled vector, not the plain one."""
    r = await app.pipeline.query(QueryOptions("Zephyr charter", 1, strategy=Strategy.KEYWORD))
    assert _docs(r) == ["handbook"]
    q = app.sparse.query("Zephyr charter")
    assert "handbook" not in {h.document_id for h in await app.vectors.search_sparse(q, 5, PointFilter())}
    assert "handbook" in {h.document_id for h in await app.vectors.search_sparse(q, 5, PointFilter(), titled=True)}


async def test_hybrid_weighted_fusion(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("tomato sauce with garlic", 2, strategy=Strategy.HYBRID, fusion=Fusion.WEIGHTED))
    assert _docs(r)[0] == "cooking"


async def test_adaptive_weighs_the_hybrid_legs(app: Application) -> None:
    """ADAPTIVE never drops a leg: a code and a question both run hybrid and find their document."""
    code = await app.pipeline.query(QueryOptions("XK-4471", 2, strategy=Strategy.ADAPTIVE))
    assert _docs(code)[0] == "codes" and code.metrics.strategy_used is Strategy.HYBRID
    question = await app.pipeline.query(QueryOptions("how long should the tomato sauce simmer?", 2, strategy=Strategy.ADAPTIVE))
    assert _docs(question)[0] == "cooking" and question.metrics.strategy_used is Strategy.HYBRID


# --- routers ----------------------------------------------------------------------------------


async def test_sufficient_results_take_one_pass(app: Application) -> None:
    r = await pipeline(app, sufficiency_threshold=0.0).query(QueryOptions("tomato sauce", 2))
    assert _stages(r) == ["build_access_filter", "check_cache", "analyze_query", "retrieve", "fuse", "rerank", "enrich", "check_sufficiency", "select", "update_cache"]
    assert r.metrics.iterations == 1


async def test_insufficient_results_retry_with_widened_parameters(app: Application) -> None:
    r = await pipeline(app, sufficiency_threshold=1.01, max_iterations=2).query(QueryOptions("tomato sauce basil", 2))
    stages = _stages(r)
    assert stages.count("analyze_query") == 2 and stages.count("retrieve") == 2
    assert r.metrics.iterations == 2 and "execute_sub_queries" not in stages  # a single question
    assert r.metrics.sufficiency_score < 1.01 and _docs(r)[0] == "cooking"


@pytest.mark.parametrize(("threshold", "strategy", "passes"),
                         [(0.6, Strategy.SEMANTIC, 1), (0.8, Strategy.SEMANTIC, 2), (0.8, Strategy.KEYWORD, 1), (0.81, Strategy.KEYWORD, 2)])
async def test_relevance_decides_a_retry_only_above_what_count_and_diversity_reach(
    app: Application, threshold: float, strategy: Strategy, passes: int
) -> None:
    """As the README says: contexts of as many documents as asked for score 0.3 + 0.3 whatever
    their relevance, so at the default 0.6 a question the corpus knows nothing of takes one pass,
    and at 0.8 its cosines (no reranker) must average 0.5, which they do not. A KEYWORD context,
    which no dense search scored, counts 0.5: only above 0.8 does a KEYWORD request retry."""
    query = "orbital mechanics of binary neutron stars" if strategy is Strategy.SEMANTIC else "tomato weather"
    r = await pipeline(app, sufficiency_threshold=threshold, max_iterations=2).query(
        QueryOptions(query, 2, strategy=strategy, use_cache=False)
    )
    assert len({c.document.document_id for c in r.contexts}) == 2 and r.metrics.iterations == passes


async def test_relevant_contexts_pass_a_threshold_that_asks_for_relevance(app: Application) -> None:
    r = await pipeline(app, sufficiency_threshold=0.8, max_iterations=2).query(
        QueryOptions("will it be wet outside tomorrow", 1, strategy=Strategy.SEMANTIC, use_cache=False)
    )
    assert _docs(r) == ["weather"] and r.metrics.iterations == 1 and r.metrics.sufficiency_score >= 0.8


@pytest.mark.parametrize(("threshold", "on_retry"), [(0.3, 0.15), (0.0, -0.5), (-2.0, -2.5)])
async def test_a_retry_halves_the_rerank_threshold_or_lowers_it_from_zero_down(app: Application, threshold: float, on_retry: float) -> None:
    # Halved, a threshold at or below 0 (a raw logit, or 0 with the sigmoid) would not relax.
    state = QueryState(options=QueryOptions("tomato sauce", 3, strategy=Strategy.KEYWORD), rerank_threshold=threshold,
                       iteration=1, pool=30, strategy=Strategy.KEYWORD)
    assert (await nodes.analyze_query(state, app.pipeline.deps))["rerank_threshold"] == pytest.approx(on_retry)


async def test_a_retry_with_nothing_new_to_embed_takes_no_model_lane(app: Application) -> None:
    # Nothing found, so the retry has no feedback to reformulate with: its query vector is the
    # first pass's. A model job for no texts would still queue on the inference lanes and, as a
    # query job, stop an ingestion piece that runs there.
    embedder = RecordingEmbedder(app.pipeline.deps.embedder)
    r = await pipeline(app, embedder=embedder, sufficiency_threshold=1.01, max_iterations=2).query(
        QueryOptions("tomato sauce basil", 2, strategy=Strategy.SEMANTIC, use_cache=False, document_ids=("no-such-doc",))
    )
    assert r.metrics.iterations == 2 and _stages(r).count("retrieve") == 2
    assert embedder.calls == [(["tomato sauce basil"], False)]


class FirstPassRewrites(ClassicalAnalyzer):
    """Rewrites the first pass's query off topic (a weather forecast), and no later pass's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rewrites = iter(["weather forecast: heavy rain in the northern valleys"])

    async def rewrite(self, query: str) -> str:
        rewrite = next(self._rewrites, None)
        if rewrite is None:
            raise NotApplicable("nothing this time")
        return rewrite


async def test_a_retry_whose_rewrite_says_nothing_searches_the_querys_own_vector(app: Application) -> None:
    """The first pass's rewrite was searched on the retry as the query's own vector, when the
    retry's rewrite contributed nothing (cut for the deadline, failed, not applicable)."""
    searched: list[np.ndarray] = []

    async def record(method: Any, vector: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(np.asarray(vector))
        return await method(vector, *args, **kwargs)

    r = await pipeline(app, analyzer=FirstPassRewrites(), vectors=Intercepted(app.vectors, "search_dense", record),
                       sufficiency_threshold=1.01, max_iterations=2, parent_leg=False, document_leg=False).query(
        QueryOptions("tomato sauce", 2, strategy=Strategy.SEMANTIC, use_cache=False)
    )
    own, rewritten = await app.embedder.embed(["tomato sauce", "weather forecast: heavy rain in the northern valleys"])
    assert r.metrics.iterations == 2 and len(searched) == 2
    assert float(searched[0] @ rewritten) > 0.999 and float(searched[1] @ own) > 0.999
    # The retry, which searched the caller's own words, answers: the first pass's off-topic hits
    # scored higher only against the rewrite they matched.
    assert _docs(r)[0] == "cooking"


async def test_each_pass_is_scored_by_its_own_cosines(app: Application) -> None:
    """Without a reranker a pass's relevance is its hits' cosines. The retry, which searched the
    caller's words, was scored with the first pass's cosines against an off-topic rewrite where
    those were higher (a running maximum over the passes): the weather page counted 0.8."""
    # One dense leg, of the query alone: each context's score is its best cosine with the query.
    r = await pipeline(app, analyzer=FirstPassRewrites(variants=0), sufficiency_threshold=1.01, max_iterations=2,
                       parent_leg=False, document_leg=False).query(
        QueryOptions("tomato sauce", 4, strategy=Strategy.SEMANTIC, use_cache=False)
    )
    assert r.metrics.iterations == 2 and r.metrics.rewritten_query == "" and "weather" in _docs(r)
    relevance = [min(1.0, max(0.0, c.score)) for c in r.contexts]
    expected = 0.3 * len(r.contexts) / 4 + 0.4 * sum(relevance) / len(relevance) + 0.3 * len(set(_docs(r))) / len(r.contexts)
    assert r.metrics.sufficiency_score == pytest.approx(expected, abs=1e-6)


async def test_sub_queries_record_their_cosines(app: Application) -> None:
    """Without a reranker the sub-queries' pass is scored by cosines: theirs were not recorded, so
    a context only a sub-query found dense counted 0.5, whatever its cosine."""
    deps, subs = app.pipeline.deps, ["what does error XK-4471 mean", "how long should the tomato sauce simmer"]
    state = QueryState(options=QueryOptions(" and ".join(subs), 4, strategy=Strategy.SEMANTIC), strategy=Strategy.SEMANTIC,
                       pool=32, analysis=Analysis(sub_queries=subs))
    state.point_filter = (await nodes.build_access_filter(state, deps))["point_filter"]
    relevance = (await nodes.execute_sub_queries(state, deps))["dense_relevance"]
    for vector in await deps.embedder.embed(subs):
        hits = await deps.vectors.search_dense(vector, 3, state.point_filter)
        assert hits and all(relevance[h.chunk_id] >= h.score - 1e-6 for h in hits)


async def test_sub_queries_build_on_the_best_pass_not_on_a_later_one_that_lost_a_leg(app: Application) -> None:
    """The retry lost its dense leg and found nothing, so the first pass stayed the best: the
    sub-queries' hits were fused with the retry's empty candidates, and their pass, which lost
    nothing of its own, answered without the first pass's weather page (which neither sub-query finds)."""
    deps, subs = app.pipeline.deps, ["what does error XK-4471 mean", "how long should the tomato sauce simmer"]
    state = QueryState(options=QueryOptions(" and ".join(subs), 4, strategy=Strategy.SEMANTIC), strategy=Strategy.SEMANTIC,
                       pool=32, analysis=Analysis(sub_queries=subs), iteration=1)
    state.point_filter = (await nodes.build_access_filter(state, deps))["point_filter"]
    [vector] = await deps.embedder.embed(["rain in the northern valleys"])
    state.fused = await deps.vectors.search_dense(vector, 32, state.point_filter)
    state.best = (await nodes.check_sufficiency(state, deps))["best"]
    state.fused, state.iteration = [], 2
    state.degrade("dense:store_error")
    fused = (await nodes.execute_sub_queries(state, deps))["fused"]
    assert "weather#p0c0" in {h.chunk_id for h in fused}


async def test_an_extractive_answer_ranks_its_sentences_against_the_question_not_its_rewrite(app: Application) -> None:
    """Without a reranker the sentences were scored against the dense legs' vector, the rewrite's
    when analysis rewrote the question (a reranker scores them against the question itself)."""

    class Rewrites(ClassicalAnalyzer):
        async def rewrite(self, query: str) -> str:
            return "weather forecast: heavy rain in the northern valleys"

    embedder = RecordingEmbedder(app.pipeline.deps.embedder)
    r = await pipeline(app, analyzer=Rewrites(), embedder=embedder, sufficiency_threshold=0.0).query(
        QueryOptions("tomato sauce", 2, strategy=Strategy.SEMANTIC, mode=Mode.GENERATION, use_cache=False, rerank=False)
    )
    assert r.answer is not None and r.answer.text
    assert (["tomato sauce"], False) in embedder.calls  # the question's own vector, for the sentences


async def test_max_iterations_then_sub_queries(app: Application) -> None:
    query = "what does error XK-4471 mean and how long should the tomato sauce simmer"
    r = await pipeline(app, sufficiency_threshold=1.01, max_iterations=1).query(QueryOptions(query, 4, strategy=Strategy.SEMANTIC))
    stages = _stages(r)
    i = stages.index("execute_sub_queries")
    assert stages[i + 1 : i + 4] == ["rerank", "enrich", "check_sufficiency"]
    assert stages.count("execute_sub_queries") == 1 and r.metrics.decomposition_used
    assert {"codes", "cooking"} <= set(_docs(r))


async def test_the_response_says_what_was_searched_in_the_callers_stead(app: Application) -> None:
    """The response named the caller's query only: a rewrite searched in every leg, and the
    sub-queries fused into the answer, were nowhere in it."""
    from retrieval_server.api.convert import metrics_out

    class Rewrites(ClassicalAnalyzer):
        async def rewrite(self, query: str) -> str:
            return f"{query} (XK-4471 error code)"

    query = "what does error XK-4471 mean and how long should the tomato sauce simmer"
    r = await pipeline(app, analyzer=Rewrites(), sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions(query, 4, strategy=Strategy.SEMANTIC, use_cache=False))
    subs = ["what does error XK-4471 mean", "how long should the tomato sauce simmer"]
    assert (r.metrics.rewritten_query, r.metrics.sub_queries) == (f"{query} (XK-4471 error code)", subs)
    sent = metrics_out(r.metrics)
    assert (sent.rewritten_query, list(sent.sub_queries)) == (f"{query} (XK-4471 error code)", subs)
    # The caller's own words searched, and answered without sub-queries: both empty.
    plain = await pipeline(app, sufficiency_threshold=0.0).query(QueryOptions("tomato sauce", 2, strategy=Strategy.SEMANTIC, use_cache=False))
    assert plain.metrics.rewritten_query == "" and plain.metrics.sub_queries == []


class SearchesFailOnceSet:
    """A vector store whose dense and keyword searches fail once ``failing`` is set."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.failing = inner, False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)
        if name not in ("search_dense", "search_sparse"):
            return method

        async def search(*args: Any, **kwargs: Any) -> Any:
            if self.failing:
                raise ConnectionError("vector store unreachable")
            return await method(*args, **kwargs)

        return search


async def test_sub_queries_that_found_nothing_are_not_reported_as_used(app: Application) -> None:
    """Every sub-query search failed: nothing was fused in, and the answer is the main search's."""
    vectors = SearchesFailOnceSet(app.vectors)

    def after(event: Any) -> None:
        if isinstance(event, StageMetric) and event.stage == "check_sufficiency":
            vectors.failing = True

    query = "what does error XK-4471 mean and how long should the tomato sauce simmer"
    r = await pipeline(app, vectors=vectors, sufficiency_threshold=1.01, max_iterations=1, store_retries=0).query(
        QueryOptions(query, 4, strategy=Strategy.HYBRID, use_cache=False), events=after
    )
    assert "execute_sub_queries" in _stages(r) and "sub_queries:store_error" in r.metrics.degraded
    assert r.contexts and not r.metrics.decomposition_used and r.metrics.sub_queries == []


async def test_sub_queries_search_as_the_keyword_leg_does(app: Application) -> None:
    """With the title as a field, as the main keyword leg: a part only a title matches found nothing."""
    titled: list[bool] = []

    async def record(method: Any, *args: Any, **kwargs: Any) -> Any:
        titled.append(kwargs.get("titled", False))
        return await method(*args, **kwargs)

    query = "what does error XK-4471 mean and what is the zephyr charter"
    r = await pipeline(app, vectors=Intercepted(app.vectors, "search_sparse", record), sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions(query, 4, strategy=Strategy.HYBRID, use_cache=False)
    )
    assert r.metrics.decomposition_used and len(titled) > 1 and all(titled)
    assert {"codes", "handbook"} <= set(_docs(r))


async def test_sub_queries_search_at_most_the_keyword_term_limit(app: Application) -> None:
    # Decomposition's parts (the classical splitter's, or a model's lines of any length) are
    # keyword-searched as the query is: with its first QUERY_MAX_TERMS distinct terms, no more.
    searched: list[int] = []

    class Vectors:
        def __getattr__(self, name: str) -> Any:
            return getattr(app.vectors, name)

        async def search_sparse(self, vector: Any, *args: Any, **kwargs: Any) -> Any:
            searched.append(len(vector.indices))
            return await app.vectors.search_sparse(vector, *args, **kwargs)

    query = (
        "what does error XK-4471 mean for the flux capacitor during the test run? "
        "how long should the tomato sauce simmer slowly with basil and garlic"
    )
    keyword = dataclasses.replace(app.pipeline.deps.settings.keyword, max_terms=4)
    r = await pipeline(app, vectors=Vectors(), keyword=keyword, sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions(query, 4, strategy=Strategy.KEYWORD, use_cache=False)
    )
    assert r.metrics.decomposition_used and "execute_sub_queries" in _stages(r)
    assert searched and max(searched) <= 4, searched


async def test_cache_hit_ends_the_graph(app: Application) -> None:
    p = pipeline(app, cache=MemoryCache(app.embedder.dim))
    first = await p.query(QueryOptions("northern valleys rain", 2))
    assert not first.cached and _stages(first)[-1] == "update_cache"
    again = await p.query(QueryOptions("  Northern valleys RAIN ", 2))  # exact match after normalization
    similar = await p.query(QueryOptions("rain in the northern valleys", 2))  # cosine 0.958 >= 0.95
    for hit in (again, similar):
        assert hit.cached and hit.metrics.cache_hit and _stages(hit) == ["build_access_filter", "check_cache"]
        assert _docs(hit) == _docs(first)
    other = await p.query(QueryOptions("northern valleys rain", 3))  # another top_k: another answer
    assert not other.cached
    # An exact repeat is answered before the model runs (the embedding is most of a hit's cost).
    counting = RecordingEmbedder(app.embedder)
    repeat = await pipeline(app, cache=p.deps.cache, embedder=counting).query(QueryOptions("northern valleys RAIN", 2))
    assert repeat.cached and _docs(repeat) == _docs(first) and counting.calls == []
    # So is a repeat of the question a similar one answered: it is remembered under its own text.
    paraphrase = await pipeline(app, cache=p.deps.cache, embedder=counting).query(QueryOptions("rain in the Northern valleys", 2))
    assert paraphrase.cached and _docs(paraphrase) == _docs(first) and counting.calls == []


async def test_a_hit_by_similarity_reports_what_describes_the_contexts_not_how_another_query_was_searched(app: Application) -> None:
    """The rewrite, the sub-queries and the graph trace of the query an answer was found for are in
    its caller's words, and a similar query's caller is not told them; the sufficiency, the
    fallback and the degradations describe the contexts it is served."""

    class Rewrites(ClassicalAnalyzer):
        async def rewrite(self, query: str) -> str:
            return f"{query} (heavy showers)"

    p = pipeline(app, cache=MemoryCache(app.embedder.dim), analyzer=Rewrites())
    first = await p.query(QueryOptions("northern valleys rain", 2))
    assert not first.cached and first.metrics.rewritten_query == "northern valleys rain (heavy showers)"
    similar = await p.query(QueryOptions("rain in the northern valleys", 2))  # cosine 0.958 >= 0.95
    m = similar.metrics
    assert similar.cached and _docs(similar) == _docs(first)
    assert (m.sufficiency_score, m.rerank_fallback_triggered, m.degraded) == (
        first.metrics.sufficiency_score, first.metrics.rerank_fallback_triggered, first.metrics.degraded)
    assert m.sufficiency_score > 0 and "rerank:unavailable" in m.degraded
    assert (m.rewritten_query, m.sub_queries, m.decomposition_used, m.graph) == ("", [], False, None)


async def test_an_exact_hit_in_other_capitals_is_not_told_the_other_querys_rewrite(app: Application) -> None:
    """The exact key sets case aside, the rewrite does not (an acronym in capitals is expanded in
    capitals only): "northern valleys rain" was served "northern valleys RAIN"'s answer reporting
    that it had been searched as "northern valleys RAIN (heavy showers)"."""
    p = pipeline(app, cache=MemoryCache(app.embedder.dim), analyzer=ClassicalAnalyzer({"RAIN": "heavy showers"}))
    first = await p.query(QueryOptions("northern valleys RAIN", 2))
    assert not first.cached and first.metrics.rewritten_query == "northern valleys RAIN (heavy showers)"
    lower = await p.query(QueryOptions("northern valleys rain", 2))
    m = lower.metrics
    assert lower.cached and _docs(lower) == _docs(first) and m.sufficiency_score == first.metrics.sufficiency_score
    assert (m.rewritten_query, m.sub_queries, m.decomposition_used, m.graph) == ("", [], False, None)
    # Its own text, white space aside: its own search.
    again = await p.query(QueryOptions(" northern  valleys RAIN ", 2))
    assert again.cached and again.metrics.rewritten_query == "northern valleys RAIN (heavy showers)"


@pytest.mark.parametrize("preamble", [
    " ".join(["You are a helpful assistant. Answer from the retrieved documents only, citing them."] * 20),
    # Fewer characters than the model's tokens, more tokens: a Hangul syllable is two or three.
    ("당신은 도움이 되는 비서입니다. 검색된 문서만을 근거로 답하고 출처를 인용하세요. " * 6)[:200],
], ids=["english", "hangul"])
async def test_a_query_longer_than_the_model_reads_is_matched_exactly_only(app: Application, preamble: str) -> None:
    p = pipeline(app, cache=MemoryCache(app.embedder.dim))
    # The same opening past the model's 256 tokens: the same vector for two different questions.
    rain = f"{preamble} Question: will it rain in the northern valleys?"
    sauce = f"{preamble} Question: how long does the tomato sauce simmer?"
    first = await p.query(QueryOptions(rain, 1, strategy=Strategy.HYBRID))
    assert not first.cached and _docs(first) == ["weather"]
    other = await p.query(QueryOptions(sauce, 1, strategy=Strategy.HYBRID))
    assert not other.cached and _docs(other) == ["cooking"]
    # Its exact repeat is still served from the cache.
    again = await p.query(QueryOptions(rain, 1, strategy=Strategy.HYBRID))
    assert again.cached and _docs(again) == ["weather"]


async def test_cache_entries_are_dropped_when_a_cited_document_changes(app: Application, tmp_path: Path) -> None:
    application = Application(load_settings(data_dir=tmp_path))
    await application.open()
    try:
        await application.ingest([_doc("note", "The seminar moves to room 101 on Friday.")])
        q = QueryOptions("where is the seminar", 1)
        assert not (await application.pipeline.query(q)).cached
        assert (await application.pipeline.query(q)).cached
        await application.ingest([_doc("note", "The seminar moves to room 202 on Monday.")])
        fresh = await application.pipeline.query(q)
        assert not fresh.cached and "202" in fresh.contexts[0].parent.content
        await application.delete(["note"])
        assert (await application.pipeline.query(q)).contexts == ()
    finally:
        await application.close()


# --- access -----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
async def test_private_documents_reach_only_their_readers(app: Application, strategy: Strategy) -> None:
    query = "where is the flux capacitor prototype stored and when does it ship"
    seen = {}
    for who in (ANON, ALICE, BOB, CAROL, ROOT):
        r = await app.pipeline.query(QueryOptions(query, 6, strategy=strategy, identity=who))
        seen[who.user_id] = set(_docs(r))
    assert not {"alice-notes", "bob-notes"} & seen[None]
    assert "alice-notes" in seen["alice"] and "bob-notes" not in seen["alice"]
    assert "bob-notes" in seen["bob"] and "alice-notes" not in seen["bob"]
    assert "bob-notes" in seen["carol"] and "alice-notes" not in seen["carol"]
    assert {"alice-notes", "bob-notes"} <= seen["root"]


async def test_no_private_document_through_the_cache_or_sub_queries(app: Application) -> None:
    p = pipeline(app, cache=MemoryCache(app.embedder.dim), sufficiency_threshold=1.01, max_iterations=1)
    query = "where is the flux capacitor prototype stored and what does error XK-4471 mean"
    alice = await p.query(QueryOptions(query, 6, identity=ALICE))
    assert "alice-notes" in _docs(alice) and alice.metrics.decomposition_used
    for who in (BOB, ANON, CAROL):
        r = await p.query(QueryOptions(query, 6, identity=who))
        assert "alice-notes" not in _docs(r), who
    # And alice gets her own answer back from the cache, private document included.
    again = await p.query(QueryOptions(query, 6, identity=ALICE))
    assert again.cached and "alice-notes" in _docs(again)
    anon_first = await p.query(QueryOptions("flux capacitor", 6, identity=ANON))
    alice_after = await p.query(QueryOptions("flux capacitor", 6, identity=ALICE))
    assert not anon_first.cached and not alice_after.cached  # a public answer never serves alice
    assert "alice-notes" in _docs(alice_after)


# --- degradations -----------------------------------------------------------------------------


class BrokenEmbedder:
    model_id = "broken"
    dim = 384

    async def embed(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
        raise RuntimeError("model crashed")


class RecordingEmbedder:
    """The app's embedder, recording each call's texts and ``beside_work``."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.calls = inner, []  # type: list[tuple[list[str], bool]]
        self.model_id, self.dim = inner.model_id, inner.dim

    async def embed(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
        self.calls.append((list(texts), kwargs.get("beside_work", False)))
        return await self._inner.embed(texts, *args, **kwargs)


class FailingDense:
    """Wraps a vector store: dense search always fails; counts the attempts."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.dense_calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def search_dense(self, *args: Any, **kwargs: Any) -> Any:
        self.dense_calls += 1
        raise ConnectionError("vector store unreachable")


class Overlap:
    """Stores and a model that hold each leg until the others have started: legs run one after
    another would never finish (each waits for a leg that cannot start before it ends)."""

    def __init__(self, app: Application) -> None:
        self.started = {leg: asyncio.Event() for leg in ("embed", "keyword", "metadata")}
        self.embedder, self.vectors, self.metadata = _Held(app.pipeline.deps.embedder, self), _Held(app.vectors, self), _Held(app.metadata, self)
        self.embeds = 0

    async def hold(self, leg: str, others: Sequence[str]) -> None:
        self.started[leg].set()
        await asyncio.wait_for(asyncio.gather(*(self.started[o].wait() for o in others)), 60)


class _Held:
    def __init__(self, inner: Any, overlap: Overlap) -> None:
        self._inner, self._overlap = inner, overlap
        self.model_id, self.dim = getattr(inner, "model_id", ""), getattr(inner, "dim", 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def embed(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        self._overlap.embeds += 1
        await self._overlap.hold("embed", ["keyword", "metadata"])
        return await self._inner.embed(texts, *args, **kwargs)

    async def search_sparse(self, *args: Any, **kwargs: Any) -> Any:
        await self._overlap.hold("keyword", ["embed", "metadata"])
        return await self._inner.search_sparse(*args, **kwargs)

    async def search_documents(self, *args: Any, **kwargs: Any) -> Any:
        await self._overlap.hold("metadata", ["embed", "keyword"])
        return await self._inner.search_documents(*args, **kwargs)


async def test_hybrid_legs_overlap_the_query_embedding_and_each_other(app: Application) -> None:
    held = Overlap(app)
    r = await pipeline(app, embedder=held.embedder, vectors=held.vectors, metadata=held.metadata).query(
        QueryOptions("tomato sauce garlic", 2, strategy=Strategy.HYBRID, use_cache=False)
    )
    assert _docs(r)[0] == "cooking" and r.metrics.strategy_used is Strategy.HYBRID
    assert not [d for d in r.metrics.degraded if d.startswith(("dense", "keyword", "metadata"))]
    assert held.embeds == 1  # the query once, by retrieve: nothing else needed a vector
    assert _stages(r).count("retrieve") == 1


async def test_the_query_is_embedded_on_one_thread_only_while_other_legs_run_beside_it(app: Application) -> None:
    for strategy, beside in ((Strategy.HYBRID, True), (Strategy.ADAPTIVE, True), (Strategy.SEMANTIC, False)):
        embedder = RecordingEmbedder(app.pipeline.deps.embedder)
        r = await pipeline(app, embedder=embedder).query(QueryOptions("tomato sauce garlic", 2, strategy=strategy, use_cache=False))
        assert _docs(r)[0] == "cooking"
        assert embedder.calls == [(["tomato sauce garlic"], beside)], strategy


async def test_a_keyword_query_embeds_nothing(app: Application) -> None:
    embedder = RecordingEmbedder(app.pipeline.deps.embedder)
    r = await pipeline(app, embedder=embedder).query(QueryOptions("basil garlic sauce", 2, strategy=Strategy.KEYWORD, use_cache=False))
    assert _docs(r)[0] == "cooking" and embedder.calls == []


async def test_embedding_failure_falls_back_to_keyword_search(app: Application) -> None:
    r = await pipeline(app, embedder=BrokenEmbedder()).query(QueryOptions("basil garlic sauce", 2))
    assert _docs(r)[0] == "cooking"
    assert "dense:embedding_failed" in r.metrics.degraded and r.metrics.strategy_used is Strategy.KEYWORD


@pytest.mark.parametrize("top_k", [1, 5])
async def test_a_failed_embedding_keeps_the_legs_that_need_no_vector(app: Application, top_k: int) -> None:
    """Only the metadata leg finds the handbook by its team ("Nimbus"): it was given up with the
    dense legs, and the answer came back empty, its suggestions naming the handbook. At top_k 5
    the first pass is insufficient: the retry, which ran without the metadata leg and found
    nothing, answered in its stead. (No reformulations: searched by keyword, the first pass's
    feedback would find the handbook by its text.)"""
    r = await pipeline(app, embedder=BrokenEmbedder(), analyzer=ClassicalAnalyzer(variants=0)).query(QueryOptions("Nimbus", top_k, strategy=Strategy.HYBRID, use_cache=False))
    assert _docs(r) == ["handbook"] and "dense:embedding_failed" in r.metrics.degraded
    assert r.metrics.iterations == (1 if top_k == 1 else 2) and r.metrics.strategy_used is Strategy.KEYWORD


class FailsOnce(RecordingEmbedder):
    """The app's embedder, whose first call fails (a model restarting)."""

    async def embed(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if not self.calls:
            self.calls.append((list(texts), kwargs.get("beside_work", False)))
            raise RuntimeError("model crashed")
        return await super().embed(texts, *args, **kwargs)


async def test_a_failed_embedding_turns_its_own_pass_to_keyword_search_only(app: Application) -> None:
    """The first pass's embedding failed once: the retry ran as KEYWORD as well, without asking the
    model again and without HYBRID's metadata leg, which alone finds the handbook."""
    embedder, searched = FailsOnce(app.pipeline.deps.embedder), []

    async def record(method: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(args[0])
        return await method(*args, **kwargs)

    r = await pipeline(app, embedder=embedder, metadata=Intercepted(app.metadata, "search_documents", record),
                       analyzer=ClassicalAnalyzer(variants=0), sufficiency_threshold=1.01, max_iterations=2).query(
        QueryOptions("Nimbus", 5, strategy=Strategy.HYBRID, use_cache=False)
    )
    assert r.metrics.iterations == 2 and "dense:embedding_failed" in r.metrics.degraded
    assert [texts for texts, _ in embedder.calls] == [["Nimbus"], ["Nimbus"]] and searched == ["Nimbus", "Nimbus"]
    # The retry, which lost nothing, answers as it ran.
    assert "handbook" in _docs(r) and r.metrics.strategy_used is Strategy.HYBRID


async def test_a_failed_cache_embedding_is_not_awaited_as_a_vector_on_its_way(app: Application) -> None:
    """check_cache's embedding job, given up at the cache's time, failed later: each pass awaited
    that failed job as the query's vector on its way, searched by keyword and never asked the model."""
    embedder = RecordingEmbedder(app.pipeline.deps.embedder)
    deps = pipeline(app, embedder=embedder, analyzer=ClassicalAnalyzer(variants=0)).deps
    state = QueryState(options=QueryOptions("Nimbus", 5, strategy=Strategy.HYBRID, use_cache=False))
    state.point_filter = (await nodes.build_access_filter(state, deps))["point_filter"]
    failed: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("model crashed"))
    state.query_embedding = failed
    for node in (nodes.analyze_query, nodes.retrieve):
        for k, v in (await node(state, deps)).items():
            setattr(state, k, v)
    assert [texts for texts, _ in embedder.calls] == [["Nimbus"]] and state.strategy is Strategy.HYBRID


async def test_sub_queries_after_a_failed_embedding_ask_the_model_again(app: Application) -> None:
    """The main search's embedding failed once: its sub-queries were searched by keyword alone."""
    embedder = FailsOnce(app.pipeline.deps.embedder)
    query = "what does error XK-4471 mean and how long should the tomato sauce simmer"
    r = await pipeline(app, embedder=embedder, sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions(query, 4, strategy=Strategy.HYBRID, use_cache=False)
    )
    subs = ["what does error XK-4471 mean", "how long should the tomato sauce simmer"]
    assert [texts for texts, _ in embedder.calls] == [[query], subs] and r.metrics.decomposition_used
    # The strategy reported is the main search's, which fell back.
    assert r.metrics.strategy_used is Strategy.KEYWORD and {"codes", "cooking"} <= set(_docs(r))


async def test_store_error_is_retried_then_degrades_to_partial_results(app: Application) -> None:
    store = FailingDense(app.vectors)
    r = await pipeline(app, vectors=store, store_retries=2).query(QueryOptions("tomato sauce garlic", 2, strategy=Strategy.HYBRID))
    assert store.dense_calls >= 3  # first try + 2 retries
    assert "dense:store_error" in r.metrics.degraded
    assert _docs(r)[0] == "cooking"  # the keyword and metadata legs still answered


async def test_a_rewritten_query_is_cached_under_its_own_vector(app: Application) -> None:
    """The cache compares a later caller's query with the query asked, not with what analysis
    rewrote it to: the entry is stored under the asked query's own embedding."""
    stored: list[tuple[str, Any]] = []
    cache = MemoryCache(app.embedder.dim)
    store = cache.store

    async def recording(query: str, vector: Any, *args: Any) -> None:
        stored.append((query, vector))
        await store(query, vector, *args)

    cache.store = recording  # type: ignore[method-assign]
    asked = "how long to simmer tomato sauce"
    p = pipeline(app, cache=cache, analyzer=ClassicalAnalyzer({"simmer": "cook gently just below boiling"}))
    r = await p.query(QueryOptions(asked, 2, strategy=Strategy.HYBRID))
    assert not r.cached
    [(query, vector)] = stored
    own, rewritten = await app.embedder.embed([asked, "how long to simmer (cook gently just below boiling) tomato sauce"])
    assert query == asked and vector is not None
    assert float(np.dot(vector, own)) > 0.9999 and float(np.dot(vector, rewritten)) < 0.999
    assert (await p.query(QueryOptions("How long to simmer tomato sauce?", 2, strategy=Strategy.HYBRID))).cached


async def _wait_until_cancelled(on_cancel: Callable[[], None]) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        on_cancel()
        raise


def _answers_after(inner: Any, name: str, delay_s: float) -> Intercepted:
    """``name`` answers ``delay_s`` seconds after it is called."""

    async def late(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(delay_s)
        return await method(*args, **kwargs)

    return Intercepted(inner, name, late)


#: the call each held leg makes, by the dependency that makes it
_LEG_CALLS = {"embed": "embedder", "search_documents": "metadata", "match": "graph", "search_sparse": "vectors"}


class Held:
    """Legs held until cancelled: which started, which were cancelled."""

    def __init__(self, *calls: str) -> None:
        self.started = {call: asyncio.Event() for call in calls}
        self.cancelled: list[str] = []

    def pipeline(self, app: Application, **overrides: Any) -> QueryPipeline:
        deps = app.pipeline.deps
        held = {_LEG_CALLS[call]: Intercepted(getattr(deps, _LEG_CALLS[call]), call, self._held(call)) for call in self.started}
        return pipeline(app, **held, **overrides)

    def _held(self, call: str) -> Callable[..., Awaitable[Any]]:
        async def held(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
            self.started[call].set()
            await _wait_until_cancelled(lambda: self.cancelled.append(call))

        return held

    async def all_cancelled(self) -> list[str]:
        for _ in range(10):  # each leg hears of its cancellation at its next step
            await asyncio.sleep(0)
        return sorted(self.cancelled)


async def test_a_cancelled_query_cancels_the_legs_started_beside_its_searches(app: Application) -> None:
    """The caller went away (or its deadline passed): its embedding, metadata search and graph
    match stop with it instead of spending the model and the stores on nobody."""
    assert app.pipeline.deps.graph is not None
    held = Held("embed", "search_documents", "match", "search_sparse")
    p = held.pipeline(app)
    request = asyncio.ensure_future(p.query(QueryOptions("How long should tomato sauce simmer?", 3, strategy=Strategy.HYBRID, use_cache=False)))
    for event in held.started.values():
        await event.wait()
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert await held.all_cancelled() == ["embed", "match", "search_documents", "search_sparse"]


async def test_a_deadline_that_leaves_no_time_is_deadline_exceeded(app: Application) -> None:
    with pytest.raises(DeadlineExceeded, match=r"left 0 ms for the work after the time kept to send the answer \(at most 50 ms and at most a quarter of the call's time\); nothing was found"):
        await app.pipeline.query(QueryOptions("tomato sauce", 2, deadline=time.monotonic() - 1))


# The deadline tests read deadlines on a test's clock that stands still: a busy machine's stalls do
# not bring the deadline nearer, while the cut-offs and a stage's cut still come in real time,
# counted from the start of the stage that waits for them.


async def test_a_short_deadline_leaves_a_fast_query_most_of_its_time(app: Application) -> None:
    """A fixed 50 ms kept to send the answer left a 40 ms deadline nothing for the work: a KEYWORD
    query that takes 4 ms was DEADLINE_EXCEEDED every time."""
    clock = Clock()
    deadline = _deadline(SimpleNamespace(time_remaining=lambda: 0.04), clock)
    assert deadline == pytest.approx(0.03)  # a quarter of the call's time kept to send the answer
    r = await pipeline(app, clock=clock).query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.KEYWORD, use_cache=False, deadline=deadline))
    assert _docs(r)[0] == "cooking" and not [d for d in r.metrics.degraded if d.startswith("deadline:")]
    assert _deadline(SimpleNamespace(time_remaining=lambda: 1.0), clock) == pytest.approx(0.95)  # a long one keeps 50 ms


async def test_legs_still_running_at_the_cutoff_are_abandoned_and_the_others_answer(app: Application) -> None:
    """A slow optional leg no longer costs the caller the answer the other legs found."""
    held = Held("search_documents", "match")
    p = held.pipeline(app, clock=Clock(), deadline_reserve_ms=1000)  # the legs are given up 1 s before the deadline
    r = await asyncio.wait_for(p.query(QueryOptions("How long should tomato sauce simmer?", 2, strategy=Strategy.HYBRID, use_cache=False, deadline=2.0)), 60)
    assert _docs(r)[0] == "cooking" and await held.all_cancelled() == ["match", "search_documents"]
    assert {"deadline:metadata_skipped", "deadline:graph_skipped"} <= set(r.metrics.degraded)
    assert "deadline:partial_results" not in r.metrics.degraded


async def test_with_no_leg_answered_at_the_cutoff_the_first_to_answer_is_used(app: Application) -> None:
    held = Held("embed", "search_documents", "match")
    # The legs' cut-off comes 1.5 s into retrieve (the deadline 3 s away less the 1.5 s reserve); the
    # keyword leg answers 0.5 s after it.
    slow_keyword = _answers_after(app.pipeline.deps.vectors, "search_sparse", 2.0)
    p = held.pipeline(app, clock=Clock(), vectors=slow_keyword, deadline_reserve_ms=1500)
    r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, use_cache=False, deadline=3.0)), 60)
    assert _docs(r)[0] == "cooking" and await held.all_cancelled() == ["embed", "match", "search_documents"]
    assert {"deadline:dense_skipped", "deadline:metadata_skipped", "deadline:graph_skipped"} <= set(r.metrics.degraded)
    assert "dense:embedding_failed" not in r.metrics.degraded  # given up, not failed: no keyword fallback was started


async def test_after_a_failed_embedding_the_empty_dense_legs_do_not_cut_the_keyword_legs(app: Application) -> None:
    """The dense legs of a failed embedding return nothing at once; that is no answer, so the keyword
    legs, still running at the cut-off, are waited for."""
    held = Held("search_documents", "match")
    slow_keyword = _answers_after(app.pipeline.deps.vectors, "search_sparse", 2.0)
    p = held.pipeline(app, clock=Clock(), embedder=BrokenEmbedder(), vectors=slow_keyword, deadline_reserve_ms=1500)
    r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, use_cache=False, deadline=3.0)), 60)
    assert _docs(r)[0] == "cooking" and "dense:embedding_failed" in r.metrics.degraded
    assert "deadline:keyword_skipped" not in r.metrics.degraded and r.metrics.strategy_used is Strategy.KEYWORD


async def test_with_no_leg_answering_by_the_deadline_nothing_outlives_it(app: Application) -> None:
    """Every leg held: the deadline cuts retrieve, and the empty answer is DEADLINE_EXCEEDED at once,
    without the suggestions' metadata search (held too) an empty answer otherwise gets."""
    held = Held("embed", "search_documents", "match", "search_sparse")
    query = QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, use_cache=False, deadline=0.5)
    # The budget the deadline left, read on the pipeline's clock (a test's, standing still at 0).
    with pytest.raises(DeadlineExceeded, match=r"left 500 ms for the work after the time kept to send the answer \(at most 50 ms and at most a quarter of the call's time\); nothing was found in that time"):
        await asyncio.wait_for(held.pipeline(app, clock=Clock()).query(query), 60)
    assert await held.all_cancelled() == ["embed", "match", "search_documents", "search_sparse"]


class _FrozenAnalyzer:
    """An LLM analyzer whose model never answers: every technique waits until cancelled."""

    name = "frozen"

    def __init__(self) -> None:
        self.held_to_account: list[str] = []

    def timed_out(self, techniques: Any) -> None:
        self.held_to_account.extend(techniques)

    async def _never(self, *args: Any) -> Any:
        await asyncio.Event().wait()

    rewrite = reformulate = hyde = decompose = _never


async def test_analysis_cut_for_the_deadline_is_reported_and_the_search_answers(app: Application) -> None:
    analyzer = _FrozenAnalyzer()
    p = pipeline(app, clock=Clock(), analyzer=analyzer)
    # 2 s left: analysis gets 1 s of it, the search the rest.
    r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, use_cache=False, deadline=2.0)), 60)
    assert _docs(r)[0] == "cooking" and analyzer.held_to_account == []
    assert {f"analysis:{t}:timeout (deadline)" for t in ("rewrite", "reformulate", "hyde", "decompose")} <= set(r.metrics.degraded)


async def test_a_cache_frozen_past_half_the_deadline_is_skipped_and_the_search_answers(app: Application) -> None:
    """A cache whose own timeout outlasts the deadline (or a deadline shorter than it) must not take
    the time the search needs: its lookup is given up at half the time left, like analysis."""
    cache = MemoryCache(app.embedder.dim)
    lookup_cancelled: list[str] = []
    stored: list[str] = []

    async def frozen(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        await _wait_until_cancelled(lambda: lookup_cancelled.append(args[0]))

    async def store(query: str, *args: Any) -> None:
        stored.append(query)

    cache.store = store  # type: ignore[method-assign]
    p = pipeline(app, clock=Clock(), cache=Intercepted(cache, "lookup", frozen))
    r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, deadline=2.0)), 60)
    assert _docs(r)[0] == "cooking" and lookup_cancelled == ["tomato sauce simmer"]
    assert "deadline:cache_skipped" in r.metrics.degraded and not r.cached
    assert stored == []  # a cut answer is not cached, and the frozen cache is not waited on again


async def test_a_query_embedding_the_cache_cannot_wait_for_goes_on_to_the_dense_legs(app: Application) -> None:
    """Every model lane busy with another request's job: the cache's embedding of the query is
    given up at the cache's half of the time left, like a lookup, and the keyword legs answer. The
    search awaits that same job instead of embedding the query again, and gives it up at the legs'
    cut-off like any dense leg."""
    release, running = threading.Event(), threading.Semaphore(0)

    def busy() -> None:
        running.release()
        release.wait()

    embedded: list[list[str]] = []

    async def counted(method: Callable[..., Awaitable[Any]], texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        embedded.append(list(texts))
        return await method(texts, *args, **kwargs)

    lanes = [asyncio.ensure_future(app.inference.run(busy)) for _ in range(app.inference.workers)]
    try:
        for _ in lanes:
            await asyncio.to_thread(running.acquire)
        embedder = Intercepted(app.pipeline.deps.embedder, "embed", counted)
        p = pipeline(app, clock=Clock(), embedder=embedder, cache=MemoryCache(app.embedder.dim), deadline_reserve_ms=1000)
        r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, deadline=2.0)), 60)
    finally:
        release.set()
        await asyncio.gather(*lanes)
    assert _docs(r)[0] == "cooking" and not r.cached
    assert {"deadline:cache_skipped", "deadline:dense_skipped"} <= set(r.metrics.degraded)
    assert "dense:embedding_failed" not in r.metrics.degraded
    assert embedded == [["tomato sauce simmer"]]  # once: the search awaited the cache's job


async def test_a_cache_store_frozen_past_half_the_time_left_is_given_up_and_the_answer_returned(app: Application) -> None:
    """The answer is ready: a store that does not end (Redis's writes paused during a failover)
    is given up at half the time left, as the lookups are, instead of costing the caller it."""
    store_cancelled: list[str] = []

    async def frozen(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        await _wait_until_cancelled(lambda: store_cancelled.append(args[0]))

    cache = Intercepted(MemoryCache(app.embedder.dim), "store", frozen)
    p = pipeline(app, clock=Clock(), cache=cache)
    r = await asyncio.wait_for(p.query(QueryOptions("tomato sauce simmer", 2, strategy=Strategy.HYBRID, deadline=2.0)), 60)
    assert _docs(r)[0] == "cooking" and store_cancelled == ["tomato sauce simmer"]
    assert "deadline:cache_store_skipped" in r.metrics.degraded and "deadline:partial_results" not in r.metrics.degraded


class _HeldOnSecondCall:
    """The first call goes through, the second waits until cancelled."""

    def __init__(self) -> None:
        self.calls, self.cancelled = 0, False

    async def __call__(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            await _wait_until_cancelled(lambda: setattr(self, "cancelled", True))
        return await method(*args, **kwargs)


async def test_a_stage_running_at_the_deadline_is_cut_and_the_first_pass_answers(app: Application) -> None:
    # The retry's enrich waits on the store past the deadline (a stage with no bound of its own).
    second = _HeldOnSecondCall()
    metadata = Intercepted(app.pipeline.deps.metadata, "get_parents_and_documents", second)
    p = pipeline(app, clock=Clock(), metadata=metadata, sufficiency_threshold=1.01, max_iterations=2)
    query = QueryOptions("tomato sauce basil", 2, strategy=Strategy.SEMANTIC, use_cache=False, deadline=2.0)
    r = await asyncio.wait_for(p.query(query), 60)
    assert second.calls == 2 and second.cancelled
    assert _docs(r)[0] == "cooking" and "deadline:partial_results" in r.metrics.degraded
    assert _stages(r).count("enrich") == 2 and _stages(r)[-2:] == ["select", "update_cache"]


class DeadlineOnSecondSearch:
    """A vector store whose second dense search takes the request past its deadline (moves the clock there)."""

    def __init__(self, inner: Any, clock: Clock, deadline: float) -> None:
        self._inner, self._clock, self._deadline, self.searches = inner, clock, deadline, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def search_dense(self, *args: Any, **kwargs: Any) -> Any:
        self.searches += 1
        if self.searches == 2:
            self._clock.now = self._deadline + 1
        return await self._inner.search_dense(*args, **kwargs)


async def test_a_deadline_during_a_retry_returns_the_first_pass_flagged(app: Application) -> None:
    # The first pass finds contexts; the deadline passes during the retry: what was found is returned.
    clock = Clock()
    vectors = DeadlineOnSecondSearch(app.vectors, clock, deadline=100.0)
    deps = dataclasses.replace(app.pipeline.deps, vectors=vectors,
                               settings=dataclasses.replace(app.pipeline.deps.settings, sufficiency_threshold=1.01, max_iterations=2))
    r = await QueryPipeline(deps, clock=clock).query(QueryOptions("tomato sauce basil", 2, strategy=Strategy.SEMANTIC, use_cache=False, deadline=100.0))
    assert vectors.searches == 2 and _stages(r).count("retrieve") == 2
    assert "deadline:partial_results" in r.metrics.degraded and _docs(r)[0] == "cooking"
    assert _stages(r)[-2:] == ["select", "update_cache"]


class DenseHeldOnRetry:
    """A vector store whose dense searches (of children and of parents) wait until cancelled once
    ``retrying`` is set."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.retrying, self.cancelled = inner, False, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def search_dense(self, *args: Any, **kwargs: Any) -> Any:
        return await self._held(self._inner.search_dense, *args, **kwargs)

    async def search_parents(self, *args: Any, **kwargs: Any) -> Any:
        return await self._held(self._inner.search_parents, *args, **kwargs)

    async def _held(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        if self.retrying:
            await _wait_until_cancelled(lambda: setattr(self, "cancelled", self.cancelled + 1))
        return await method(*args, **kwargs)


async def test_a_retry_that_found_less_does_not_replace_the_first_pass(app: Application) -> None:
    """The retry's dense legs are given up at its cut-off, and its keyword-only contexts score
    below the first pass's: the answer is the first pass's, as it was, not the retry's."""
    query = QueryOptions("tomato sauce basil", 4, strategy=Strategy.HYBRID, use_cache=False)
    first = await pipeline(app, sufficiency_threshold=1.01, max_iterations=1).query(query)
    clock, vectors = Clock(), DenseHeldOnRetry(app.vectors)

    def after(event: Any) -> None:
        if isinstance(event, StageMetric) and event.stage == "check_sufficiency":
            # 2 s left: the retry's legs are given up 1 s into its retrieve (the reserve is 1 s).
            vectors.retrying, clock.now = True, 98.0

    p = pipeline(app, clock=clock, vectors=vectors, deadline_reserve_ms=1000, sufficiency_threshold=1.01, max_iterations=2)
    r = await asyncio.wait_for(p.query(dataclasses.replace(query, deadline=100.0), events=after), 60)
    enriched = [s.count for s in r.metrics.stages if s.stage == "enrich"]
    assert r.metrics.iterations == 2 and vectors.cancelled and "deadline:dense_skipped" in r.metrics.degraded
    assert len(enriched) == 2 and enriched[1] < enriched[0] == len(first.contexts)
    assert [c.parent.parent_chunk_id for c in r.contexts] == [c.parent.parent_chunk_id for c in first.contexts]
    assert r.metrics.sufficiency_score == pytest.approx(first.metrics.sufficiency_score)
    assert r.metrics.strategy_used is Strategy.HYBRID


@pytest.mark.parametrize("tag, first_pass_answers", [
    ("dense:store_error", True),  # reported by the first pass too: the retry lost the leg all the same
    ("rerank:unavailable", False),  # the configuration, not a loss: the retry answers
])
async def test_a_retry_that_lost_a_leg_the_first_pass_lost_too_does_not_replace_it(
    app: Application, tag: str, first_pass_answers: bool
) -> None:
    r = await pipeline(app, sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions("tomato sauce basil", 4, strategy=Strategy.HYBRID, use_cache=False))
    state = QueryState(options=QueryOptions("tomato sauce basil", 4), iteration=1, contexts=list(r.contexts))
    state.degrade(tag)
    first = (await nodes.check_sufficiency(state, app.pipeline.deps))["best"]
    state.best, state.pass_degraded, state.iteration, state.contexts = first, set(), 2, list(r.contexts[:1])
    state.degrade(tag)
    assert state.metrics.degraded == [tag]
    retry = await nodes.check_sufficiency(state, app.pipeline.deps)
    assert retry["sufficiency"] < first.sufficiency
    assert (retry["best"] is first) is first_pass_answers


async def test_a_retry_that_found_nothing_does_not_replace_a_pass_that_found_something(app: Application) -> None:
    # Having lost nothing, it answered: empty, with suggestions, though the first pass had contexts.
    r = await pipeline(app, sufficiency_threshold=1.01, max_iterations=1).query(
        QueryOptions("tomato sauce basil", 4, strategy=Strategy.HYBRID, use_cache=False))
    state = QueryState(options=QueryOptions("tomato sauce basil", 4), iteration=1, contexts=list(r.contexts))
    first = (await nodes.check_sufficiency(state, app.pipeline.deps))["best"]
    state.best, state.pass_degraded, state.iteration, state.contexts = first, set(), 2, []
    retry = await nodes.check_sufficiency(state, app.pipeline.deps)
    assert retry["sufficiency"] == 0.0 and retry["best"] is first and first.contexts


class _CalculatePastTheDeadline(Calculate):
    """The calculator, taking the request past its deadline (the test's clock moves there)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    async def run(self, params: Any, ctx: Any) -> Any:
        self._clock.now = 100.0
        return await super().run(params, ctx)


async def test_a_tool_answer_finished_past_the_deadline_is_whole_not_partial(app: Application) -> None:
    clock = Clock()
    p = pipeline(app, clock=clock, assistant=Assistant(tools={**TOOLS, "calculate": _CalculatePastTheDeadline(clock)}))
    r = await p.query(QueryOptions("what is 2+2", 3, strategy=Strategy.KEYWORD, mode=Mode.GENERATION, use_cache=False, deadline=50.0))
    assert r.answer is not None and r.answer.text.startswith("2+2 = 4")
    assert _stages(r) == ["build_access_filter", "route", "run_tools", "generate"] and "deadline:partial_results" not in r.metrics.degraded
    # No retrieval ran: the strategy reported is the one asked for (it was SEMANTIC, whatever was asked).
    assert r.metrics.strategy_used is Strategy.KEYWORD


async def test_a_generation_cache_hit_verified_past_the_deadline_is_whole_not_partial(app: Application) -> None:
    clock = Clock()
    cache = MemoryCache(app.embedder.dim)
    q = "How long should tomato sauce simmer?"
    first = await pipeline(app, cache=cache).query(QueryOptions(q, 2, strategy=Strategy.HYBRID, mode=Mode.GENERATION))
    assert first.contexts and not first.cached

    async def versions_past_the_deadline(method: Any, *args: Any, **kwargs: Any) -> Any:
        clock.now = 100.0
        return await method(*args, **kwargs)

    metadata = Intercepted(app.pipeline.deps.metadata, "document_versions", versions_past_the_deadline)
    r = await pipeline(app, clock=clock, cache=cache, metadata=metadata).query(
        QueryOptions(q, 2, strategy=Strategy.HYBRID, mode=Mode.GENERATION, deadline=50.0))
    assert r.cached and "select" not in _stages(r) and "deadline:partial_results" not in r.metrics.degraded


async def test_a_pass_enriched_by_the_deadline_counts_as_a_pass(app: Application) -> None:
    clock = Clock()

    async def enriched_at_the_deadline(method: Any, *args: Any, **kwargs: Any) -> Any:
        out = await method(*args, **kwargs)
        clock.now = 100.0
        return out

    metadata = Intercepted(app.pipeline.deps.metadata, "get_parents_and_documents", enriched_at_the_deadline)
    r = await pipeline(app, clock=clock, metadata=metadata).query(
        QueryOptions("tomato sauce basil", 2, strategy=Strategy.SEMANTIC, use_cache=False, deadline=50.0))
    assert r.contexts and r.metrics.iterations == 1 and r.metrics.sufficiency_score > 0
    assert _stages(r)[-4:] == ["enrich", "check_sufficiency", "select", "update_cache"]


async def test_no_results_answer_empty_with_suggestions(app: Application) -> None:
    r = await pipeline(app, sufficiency_threshold=0.9, max_iterations=2).query(
        QueryOptions("zephyr charter", 3, strategy=Strategy.KEYWORD, document_ids=("no-such-doc",))
    )
    assert r.contexts == () and r.metrics.iterations == 2  # expanded and relaxed before giving up
    assert any("Zephyr Charter" in s for s in r.suggestions) and "remove the document filter" in r.suggestions


async def test_suggestions_the_time_left_does_not_hold_are_cut_to_the_hints(app: Application) -> None:
    """An empty answer is an answer: a metadata search for its suggestions that does not end (a
    loaded MySQL's full-text search) is given up at the deadline, and the hints that need no store
    come back, instead of DEADLINE_EXCEEDED."""
    held = Held("search_documents")  # SEMANTIC runs no metadata leg: the suggestions' search alone
    p = held.pipeline(app, clock=Clock())
    query = QueryOptions("zephyr charter", 3, strategy=Strategy.SEMANTIC, use_cache=False, document_ids=("no-such-doc",), deadline=2.0)
    r = await asyncio.wait_for(p.query(query), 60)
    assert r.contexts == () and await held.all_cancelled() == ["search_documents"]
    assert list(r.suggestions) == ["remove the document filter", "try the KEYWORD strategy for exact names and codes"]
    assert "deadline:suggestions_skipped" in r.metrics.degraded and "deadline:partial_results" not in r.metrics.degraded


# --- rerank -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("reranker")
    build_cross_encoder(d / "model.onnx", BertShape(hidden=32, layers=2, heads=2, intermediate=64), seed=3, init_std=0.3)
    return d


async def test_tei_rerank_orders_by_the_server_and_splits_batches(app: Application) -> None:
    with json_server(tei_rerank(word_overlap, max_batch=2)) as tei:
        reranker = TeiReranker(tei.url, max_batch=2)
        try:
            r = await pipeline(app, reranker=reranker, rerank_threshold=0.0).query(QueryOptions("simmer tomato sauce basil garlic", 3, strategy=Strategy.HYBRID))
        finally:
            await reranker.close()
    assert _docs(r)[0] == "cooking" and "rerank:unavailable" not in r.metrics.degraded
    assert len(tei.requests) >= 2 and all(len(body["texts"]) <= 2 for _, body in tei.requests)
    assert all(body["query"] and body["truncate"] is True for _, body in tei.requests)


async def test_tei_batches_of_one_request_are_sent_together_and_put_back_in_order() -> None:
    """Each call waits until the other three batches have arrived: calls sent one after another
    never get there (the first fails at its timeout), and the scores must still come back in the
    texts' order across batches."""
    arrived = threading.Barrier(4)
    score = tei_rerank(lambda q, t: float(t.split()[-1]), max_batch=2)

    def together(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        try:
            arrived.wait(timeout=60)
        except threading.BrokenBarrierError:
            return 503, {"error": "the other batches never came", "error_type": "Overloaded"}
        return score(path, body)

    texts = [f"text {n}" for n in (7, 3, 9, 1, 4, 8, 2)]
    with json_server(together) as tei:
        reranker = TeiReranker(tei.url, max_batch=2, timeout_s=30)
        try:
            scores = await reranker.rerank("q", texts)
        finally:
            await reranker.close()
    assert scores == [7.0, 3.0, 9.0, 1.0, 4.0, 8.0, 2.0]
    assert sorted(len(body["texts"]) for _, body in tei.requests) == [1, 2, 2, 2]


async def _tei_rerank_fails(handle: Callable[[str, dict[str, Any]], tuple[int, Any]], texts: list[str], *, max_batch: int,
                            match: str) -> None:
    """A rerank of ``texts`` against a TEI server answering with ``handle`` raises RerankError matching ``match``."""
    with json_server(handle) as tei:
        client = TeiReranker(tei.url, max_batch=max_batch)
        try:
            with pytest.raises(RerankError, match=match):
                await client.rerank("q", texts)
        finally:
            await client.close()


async def test_one_failed_tei_batch_fails_the_rerank() -> None:
    def second_fails(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if "b" in body["texts"]:
            return 424, {"error": "model backend failed", "error_type": "Backend"}
        return tei_rerank(word_overlap)(path, body)

    await _tei_rerank_fails(second_fails, ["a", "b", "c"], max_batch=1, match="424")


async def test_a_tei_refusal_says_the_limit_tei_named() -> None:
    """TEI's 413 names its batch limit (a TEI_MAX_BATCH above it); the error said only the status."""
    await _tei_rerank_fails(tei_rerank(word_overlap, max_batch=8), [f"t{i}" for i in range(20)], max_batch=32,
                            match="HTTP 413 Request Entity Too Large: batch size 20 > maximum allowed batch size 8$")


async def test_rerank_off_per_request_keeps_the_fused_order_and_reranking_scores_an_answers_worth(app: Application) -> None:
    with json_server(tei_rerank(word_overlap)) as tei:
        reranker = TeiReranker(tei.url)
        try:
            p = pipeline(app, reranker=reranker, rerank_threshold=0.0, rerank_candidates=2, sufficiency_threshold=0.0)
            off = await p.query(QueryOptions("flux capacitor", 6, strategy=Strategy.HYBRID, rerank=False))
            calls_after_off = len(tei.requests)
            small = await p.query(QueryOptions("flux capacitor", 1, strategy=Strategy.HYBRID, use_cache=False))
            large = await p.query(QueryOptions("flux capacitor", 6, strategy=Strategy.HYBRID, use_cache=False))
        finally:
            await reranker.close()
    assert calls_after_off == 0 and "rerank:unavailable" not in off.metrics.degraded
    # Without rerank, the candidate cap does not apply: more child hits than rerank_candidates survive.
    assert sum(len(c.children) for c in off.contexts) > 2
    # Reranked, RERANK_CANDIDATES hits are scored, or as many as hold top_k parents when that is
    # more: a top_k past the cap was cut to the parents of the candidates (50 contexts for 60).
    assert [len(body["texts"]) for _, body in tei.requests] == [2, sum(len(c.children) for c in large.contexts)]
    assert len(small.contexts) == 1 and len(large.contexts) == len(off.contexts) > 2


async def test_rerank_threshold_falls_back_to_the_top_three(app: Application) -> None:
    with json_server(tei_rerank(lambda q, t: 0.01)) as tei:
        reranker = TeiReranker(tei.url)
        try:
            r = await pipeline(app, reranker=reranker, rerank_threshold=0.3, rerank_fallback=3, sufficiency_threshold=0.0).query(
                QueryOptions("flux capacitor", 5, strategy=Strategy.HYBRID)
            )
        finally:
            await reranker.close()
    assert r.metrics.rerank_fallback_triggered
    assert len(r.contexts) == 3


async def test_the_rerank_fallback_keeps_the_best_three_contexts_not_three_siblings(tmp_path: Path) -> None:
    """A long document's children all under the threshold, its first ones scored best: the best
    three hits are siblings (one context), the fallback keeps hits until three parents are
    covered, each with every hit of its own ahead of that point. With fewer parents to be had,
    as many as there are."""
    long = " ".join(f"Entry {i}: glaciers form where snow accumulates faster than it melts, and the ice flows slowly downhill." for i in range(60))
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    try:
        assert not (await application.ingest([_doc("long", long), _doc("short", "Snow becomes glacier ice over many winters.")])).errors
        with json_server(tei_rerank(lambda q, t: 0.25 - 0.001 * int(t.split()[1].rstrip(":")) if t.startswith("Entry") else 0.01)) as tei:
            reranker = TeiReranker(tei.url)
            try:
                p = pipeline(application, reranker=reranker, rerank_threshold=0.3, rerank_fallback=3, sufficiency_threshold=0.0)
                q = "glaciers form where snow accumulates"
                r = await p.query(QueryOptions(q, 5, strategy=Strategy.HYBRID, use_cache=False))
                one = await p.query(QueryOptions(q, 5, strategy=Strategy.HYBRID, use_cache=False, document_ids=("short",)))
            finally:
                await reranker.close()
    finally:
        await application.close()
    assert r.metrics.rerank_fallback_triggered and [c.parent.parent_chunk_id for c in r.contexts] == ["long#p0", "long#p1", "long#p2"]
    # The best three were siblings; nothing past the third parent's first hit is kept.
    assert len(r.contexts[0].children) >= 3 and len(r.contexts[2].children) == 1
    assert one.metrics.rerank_fallback_triggered and [c.parent.parent_chunk_id for c in one.contexts] == ["short#p0"]


async def test_the_rerank_fallback_counts_copies_of_one_section_as_one_context(tmp_path: Path) -> None:
    """Four documents of one text score best, all under the threshold: the fallback's three
    parents were three copies, which enrich made one context. It answers with three texts."""
    twin = "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts."
    others = ["A glacier forms when winter snowfall exceeds summer melting for many years.",
              "Ice sheets move as glaciers, flowing outward under their own weight as snow piles up.",
              "Snow that survives the summer compacts into firn and then glacial ice."]
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    try:
        assert not (await application.ingest([_doc(f"mirror{i}", twin) for i in range(4)] + [_doc(f"o{i}", t) for i, t in enumerate(others)])).errors
        with json_server(tei_rerank(lambda q, t: 0.2 if t == twin else 0.1)) as tei:
            reranker = TeiReranker(tei.url)
            try:
                p = pipeline(application, reranker=reranker, rerank_threshold=0.3, rerank_fallback=3, sufficiency_threshold=0.0)
                r = await p.query(QueryOptions("glaciers rivers of ice snow", 5, strategy=Strategy.HYBRID, use_cache=False))
            finally:
                await reranker.close()
    finally:
        await application.close()
    assert r.metrics.rerank_fallback_triggered
    texts = [c.parent.content for c in r.contexts]
    assert len(texts) == 3 == len(set(texts)) and texts[0] == twin


@pytest.mark.parametrize(("top_k", "retry_loses_a_leg", "retry_answers"), [(20, False, True), (3, False, True), (3, True, False)])
async def test_the_fallback_flag_is_the_answering_passs(app: Application, top_k: int, retry_loses_a_leg: bool, retry_answers: bool) -> None:
    """The first pass falls back (the cooking chunk scores 0.2, one word in five, under 0.3); the
    retry, at half the threshold, keeps that chunk alone. The flag is the answering pass's: False
    when the retry answers, True when the first pass does (top_k 3: its three contexts fill top_k,
    and the retry, which lost its parent leg, found less)."""
    retrying = False

    async def fail_on_retry(method: Any, *args: Any, **kwargs: Any) -> Any:
        if retrying and retry_loses_a_leg:
            raise RuntimeError("parent leg down")
        return await method(*args, **kwargs)

    def after(event: Any) -> None:
        nonlocal retrying
        if isinstance(event, StageMetric) and event.stage == "check_sufficiency":
            retrying = True

    with json_server(tei_rerank(word_overlap)) as tei:
        reranker = TeiReranker(tei.url)
        try:
            r = await pipeline(app, reranker=reranker, vectors=Intercepted(app.vectors, "search_parents", fail_on_retry), store_retries=0,
                               rerank_threshold=0.3, rerank_fallback=3, sufficiency_threshold=1.01, max_iterations=2).query(
                QueryOptions("simmer qqq www eee rrr", top_k, strategy=Strategy.SEMANTIC, use_cache=False), events=after
            )
        finally:
            await reranker.close()
    assert r.metrics.iterations == 2 and ("parent:store_error" in r.metrics.degraded) is retry_loses_a_leg
    assert len(r.contexts) == (1 if retry_answers else 3) and _docs(r)[0] == "cooking"
    assert r.metrics.rerank_fallback_triggered is not retry_answers


async def test_tei_scores_sent_past_the_last_responses_end_are_no_later_callers_scores() -> None:
    """A second /rerank answer sent right after alice's (an upstream or proxy out of step) was
    held on the pooled connection and read as bob's scores: the right count, valid indexes, every
    check passed, and the pair cache kept them."""
    scored = tei_rerank(word_overlap)
    stale = [{"index": 0, "score": 0.01}, {"index": 1, "score": 0.99}]

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, ranked = scored(path, body)
        return status, Followed(ranked, stale) if body["query"] == "alice" else ranked

    with json_server(handle) as tei:
        reranker = TeiReranker(tei.url)
        try:
            await reranker.rerank("alice", ["alice", "bob"])
            assert await reranker.rerank("cats sleep", ["cats sleep long", "stock prices fell"]) == [1.0, 0.0]
        finally:
            await reranker.close()


async def test_a_tei_response_above_the_size_limit_fails_the_rerank() -> None:
    """Read up to MAX_RESPONSE_BYTES, sent with a length or without: then the call fails (the
    fused order or the local model answers instead), and the server's memory is not the limit."""
    scores = [{"index": 0, "score": 0.5, "padding": "x" * MAX_RESPONSE_BYTES}]
    for reply in (scores, Unsized(scores)):
        await _tei_rerank_fails(lambda path, body: (200, reply), ["a"], max_batch=32, match="limit")  # noqa: B023


async def test_a_tei_response_is_read_only_to_what_its_batch_can_take() -> None:
    """Every call was read to 8 MiB, whose JSON of small values took 210 MB once parsed and half a
    second of the event loop. A batch's limit is an envelope and 100 bytes a text: a padded answer
    past it fails the rerank (the local model or the fused order answers instead); the same padding
    in the answer of a batch of a thousand is read."""

    def padded(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, ranked = tei_rerank(word_overlap, max_batch=1000)(path, body)
        return status, [{**ranked[0], "padding": "x" * 100_000}, *ranked[1:]]

    await _tei_rerank_fails(padded, ["a"], max_batch=32, match=r"above the limit of 65636 for a batch of 1$")
    with json_server(padded) as tei:
        client = TeiReranker(tei.url, max_batch=1000)
        try:
            assert len(await client.rerank("q", [f"t{i}" for i in range(1000)])) == 1000
        finally:
            await client.close()


@pytest.mark.parametrize(
    "body",
    [
        b'[{"index": 0, "score": 1' + b"0" * 400 + b"}]",
        b'[{"index": 1e400, "score": 0.1}]',
        b"[" * 30_000 + b"]" * 30_000,  # within a batch of one's limit
        b'[{"index": 0.0, "score": 0.1}]',
        b'[{"index": 0, "score": "0.1"}]',
    ],
    ids=["score-no-float-holds", "index-1e400", "nested-past-the-parser", "index-not-an-integer", "score-a-string"],
)
async def test_a_malformed_tei_answer_within_the_size_limit_falls_back_to_the_local_model(body: bytes) -> None:
    """OverflowError (float() of a 400-digit integer, int() of 1e400) and RecursionError (JSON
    nested past the parser) escaped as themselves: no RerankError, so the local model never
    answered (rerank:failed). int() took 0.0 for an index, float() "0.1" for a score."""

    class Local:
        name = "onnx:local"

        async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [0.5] * len(texts)

    with json_server(lambda path, _: (200, Streamed({"Content-Type": "application/json"}, [body]))) as tei:
        client = TeiReranker(tei.url)
        try:
            assert await FallbackReranker(client, Local()).rerank_reporting("q", ["a"]) == ([0.5], "rerank:tei_failed_used_local")
        finally:
            await client.close()


async def test_a_local_reranker_scoring_nan_leaves_the_fused_order(app: Application, tmp_path: Path) -> None:
    """A broken export (NaN weights here; fp16 overflow in the field) scores NaN: the query keeps
    the fused order and says so, as for TEI, where the NaN failed the whole query as INTERNAL."""
    build_cross_encoder(tmp_path / "model.onnx", BertShape(hidden=32, layers=2, heads=2, intermediate=64), seed=3, init_std=float("nan"))
    r = await pipeline(app, reranker=OnnxReranker(tmp_path, app.executor)).query(QueryOptions("tomato sauce", 2, use_cache=False))
    assert "rerank:failed" in r.metrics.degraded and _docs(r)[0] == "cooking"


async def test_tei_failure_falls_back_to_the_local_model(app: Application, local_reranker_dir: Path) -> None:
    local = OnnxReranker(local_reranker_dir, app.executor)
    with json_server(lambda path, body: (503, {"error": "overloaded"})) as tei:
        tei_client = TeiReranker(tei.url)
        try:
            r = await pipeline(app, reranker=FallbackReranker(tei_client, local), rerank_threshold=-100.0).query(QueryOptions("tomato sauce", 2))
        finally:
            await tei_client.close()
    assert "rerank:tei_failed_used_local" in r.metrics.degraded and r.contexts


async def test_the_pair_length_setting_bounds_the_local_models_pairs(local_reranker_dir: Path, tmp_path: Path) -> None:
    """RERANK_MAX_TOKENS reaches the model: its scores are those of pairs cut at that length."""
    passages = ["tomato sauce " + "basil garlic onion pepper " * 60, "simmer " * 10 + "flux capacitor " * 100]
    settings = load_settings(data_dir=tmp_path, cache_backend="none", metrics_enabled=False, reranker_model_dir=local_reranker_dir,
                             rerank_max_tokens=32, rerank_pair_cache=0)
    short = Application(settings)
    await short.open()
    try:
        assert short.pipeline.deps.reranker is not None
        got = await short.pipeline.deps.reranker.rerank("tomato sauce", passages)
    finally:
        await short.close()
    model, tokenizer = local_reranker_dir / "model.onnx", BUNDLED_TOKENIZER
    cut = CrossEncoder(model, tokenizer, max_length=32, activation="sigmoid").score("tomato sauce", passages)
    whole = CrossEncoder(model, tokenizer, max_length=512, activation="sigmoid").score("tomato sauce", passages)
    np.testing.assert_allclose(got, cut, rtol=1e-4, atol=1e-5)
    assert np.abs(cut - whole).max() > 1e-3, "the passages must be long enough for the cut to matter"


@pytest.mark.parametrize(
    "answer",
    [
        [{"index": 0, "score": 0.9}, {"index": 0, "score": 0.1}],  # one text twice, the other never
        [{"index": 0, "score": 0.9}, {"index": -1, "score": 0.7}],  # a negative index
        [{"index": 0, "score": 0.9}, {"index": 2, "score": 0.7}],  # past the batch: the next batch's text
        [{"index": 0, "score": float("nan")}, {"index": 1, "score": 0.7}],  # JSON's NaN: the query would fail on it
    ],
    ids=["duplicate", "negative", "out_of_batch", "nan"],
)
async def test_tei_answers_that_do_not_score_each_text_once_are_a_failure(answer: list[dict[str, Any]]) -> None:
    # Three texts in batches of two. Each malformed first answer has as many scores as texts, so
    # a count check alone passes it, and one text would keep a score of 0 or take another's.
    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, answer if len(body["texts"]) == 2 else [{"index": 0, "score": 0.2}]

    await _tei_rerank_fails(handle, ["a", "b", "c"], max_batch=2, match="TEI /rerank returned")


async def test_tei_failure_without_a_local_model_keeps_the_fused_order(app: Application) -> None:
    with json_server(lambda path, body: (500, {"error": "boom"})) as tei:
        tei_client = TeiReranker(tei.url)
        try:
            r = await pipeline(app, reranker=tei_client).query(QueryOptions("tomato sauce", 2))
        finally:
            await tei_client.close()
    assert "rerank:failed" in r.metrics.degraded and _docs(r)[0] == "cooking"


async def test_an_answer_a_failure_degraded_is_not_cached(app: Application) -> None:
    """A reranker (or a leg) failing for a moment must not decide the answer to that question for
    the cache's TTL: asked again once it works, the query is answered anew, not from the cache
    with the fused order and no degradation reported."""
    rerank = tei_rerank(word_overlap)
    failing = [True]

    def tei(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return (500, {"error": "boom"}) if failing[0] else rerank(path, body)

    with json_server(tei) as server:
        tei_client = TeiReranker(server.url)
        p = pipeline(app, reranker=tei_client, cache=MemoryCache(app.embedder.dim))
        try:
            failed = await p.query(QueryOptions("tomato sauce", 2))
            assert "rerank:failed" in failed.metrics.degraded
            failing[0] = False
            again = await p.query(QueryOptions("tomato sauce", 2))
        finally:
            await tei_client.close()
    assert not again.cached and "rerank:failed" not in again.metrics.degraded, "an answer degraded by a failure was served from the cache"
    assert (await p.query(QueryOptions("tomato sauce", 2))).cached  # the healthy answer is cached


async def test_an_answer_shaped_by_an_llm_fallback_is_not_cached(app: Application) -> None:
    """The rewrite's model failing for a moment (the query searched unrewritten) must not decide
    the answer either: once the model answers, the query is analysed and answered anew."""
    failing = [True]

    def llm(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if failing[0]:
            return 500, {"error": "overloaded"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": "how long to simmer a tomato sauce"}}]}

    with json_server(llm) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=60, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"rewrite": TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        p = pipeline(app, analyzer=analyzer, cache=MemoryCache(app.embedder.dim))
        try:
            failed = await p.query(QueryOptions("tomato sauce", 2))
            assert "analysis:rewrite:failed: LlmError" in failed.metrics.degraded, failed.metrics.degraded
            failing[0] = False
            again = await p.query(QueryOptions("tomato sauce", 2))
        finally:
            await model.close()
    assert not again.cached, "an answer shaped by the model's failure was served from the cache"
    assert not any("failed" in t for t in again.metrics.degraded)


async def test_a_technique_failing_only_on_the_retry_is_reported_and_the_answer_not_cached(app: Application) -> None:
    """The retry searched without the rewrite its model failed to make: reported as on a first
    pass, and asked again, the query is answered anew rather than from the cache."""
    answered: list[int] = []

    def llm(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        answered.append(1)
        if len(answered) > 1:
            return 500, {"error": "overloaded"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": "how long to simmer a tomato sauce"}}]}

    with json_server(llm) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=60, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"rewrite": TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        p = pipeline(app, analyzer=analyzer, cache=MemoryCache(app.embedder.dim), sufficiency_threshold=1.01, max_iterations=2)
        try:
            first = await p.query(QueryOptions("tomato sauce", 2, strategy=Strategy.HYBRID))
            again = await p.query(QueryOptions("tomato sauce", 2, strategy=Strategy.HYBRID))
        finally:
            await model.close()
    assert first.metrics.iterations == 2 and len(answered) >= 2
    assert first.metrics.degraded.count("analysis:rewrite:failed: LlmError") == 1, first.metrics.degraded
    assert not again.cached, "an answer the model's failure shaped was served from the cache"


async def test_a_sub_query_embedding_failure_is_reported_and_the_answer_not_cached(app: Application) -> None:
    """The sub-queries of a SEMANTIC query searched by keyword alone (the model failed after the
    whole query's embedding): reported as the whole query's would be, and not cached."""
    calls: list[int] = []

    async def fails_after_the_first(embed: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("the model went away")
        return await embed(*args, **kwargs)

    cache = MemoryCache(app.embedder.dim)
    p = pipeline(app, embedder=Intercepted(app.embedder, "embed", fails_after_the_first), cache=cache, sufficiency_threshold=1.01, max_iterations=1)
    query = QueryOptions("what does error XK-4471 mean and how long should the tomato sauce simmer", 4, strategy=Strategy.SEMANTIC)
    first = await p.query(query)
    assert first.metrics.decomposition_used and len(calls) == 2
    assert "dense:embedding_failed" in first.metrics.degraded
    assert not (await pipeline(app, cache=cache).query(query)).cached


@pytest.mark.parametrize("activation", ["none", "sigmoid"])
def test_sufficiency_reads_reranker_scores_by_the_configured_activation(activation: str) -> None:
    """Raw logits go through a sigmoid whatever their range (a logit of 0.2 read as a probability
    counted for less than one of -0.2); probabilities are read as they are."""
    def context(doc_id: str, score: float) -> RetrievedContext:
        return RetrievedContext(ParentChunk(f"{doc_id}#p0", doc_id, 0, "text", 1), Document(doc_id), score, ())

    def scored(score: float) -> QueryState:
        contexts = [context(f"d{i}", score) for i in range(3)]
        return QueryState(options=QueryOptions("q", 3), contexts=contexts, rerank_applied=True)

    scores = [-0.2, 0.2, 0.99, 1.01] if activation == "none" else [0.1, 0.5, 0.9, 1.0]
    sufficiency = [sufficiency_score(scored(x), activation) for x in scores]
    assert sufficiency == sorted(sufficiency) and len(set(sufficiency)) == len(sufficiency), sufficiency


async def test_a_long_query_is_truncated_for_the_model_not_refused(app: Application) -> None:
    """A 40 KB text runs every leg: the model reads its first tokens, keyword search its first terms."""
    text = "how long should the tomato sauce simmer? " + " ".join(f"filler{i}" for i in range(5000))
    assert len(text.encode()) > 40_000
    for strategy in ALL_STRATEGIES:
        r = await app.pipeline.query(QueryOptions(text, 2, strategy=strategy, use_cache=False))
        assert _docs(r)[0] == "cooking" and not [d for d in r.metrics.degraded if "error" in d or "failed" in d]


# --- enrich: versions ------------------------------------------------------------------------


class CountingVersions:
    """The metadata store, counting reads of the candidate pool's versions."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.version_reads = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def document_versions(self, ids: Sequence[str]) -> Any:
        self.version_reads += 1
        return await self._inner.document_versions(ids)


async def _pool(app: Application) -> list[Any]:
    vector = (await app.embedder.embed(["flux capacitor tomato sauce rain"]))[0]
    hits = await app.vectors.search_dense(vector, 20, PointFilter(access=AccessFilter.for_identity(ROOT)))
    assert len({h.parent_chunk_id for h in hits}) >= 3
    return hits




async def _enrich(app: Application, hits: list[Any], top_k: int) -> tuple[list[Any], int]:
    metadata = CountingVersions(app.metadata)
    deps = dataclasses.replace(app.pipeline.deps, metadata=metadata)
    state = QueryState(options=QueryOptions("q", top_k, identity=ROOT), reranked=hits, point_filter=PointFilter(access=AccessFilter.for_identity(ROOT)))
    out = await nodes.enrich(state, deps)
    return [(c.parent.parent_chunk_id, c.score, [e.chunk_id for e in c.children]) for c in out["contexts"]], metadata.version_reads


async def test_enrich_reads_the_pools_versions_only_when_a_best_parent_has_a_stale_hit(app: Application) -> None:
    hits = await _pool(app)
    current, reads = await _enrich(app, hits, 2)
    assert reads == 0 and len(current) == 2  # every hit current: the top parents' documents vouch for them
    # A stale hit (an old version's point) of a parent outside the best two changes nothing.
    third = next(h for h in hits if h.parent_chunk_id not in {pid for pid, _, _ in current})
    stale_low = dataclasses.replace(third, chunk_id=third.chunk_id + "-old", version="old", score=third.score - 1)
    assert await _enrich(app, [*hits, stale_low], 2) == (current, 0)
    # A stale hit that would lead: the versions are read, and it neither counts nor is shown.
    best = hits[0]
    stale_top = dataclasses.replace(best, chunk_id=best.chunk_id + "-old", version="old", score=best.score + 1)
    contexts, reads = await _enrich(app, [stale_top, *hits], 2)
    assert reads == 1 and contexts == current
    assert all(not cid.endswith("-old") for _, _, kids in contexts for cid in kids)


# --- enrich: identical sections --------------------------------------------------------------

TWIN = "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts."
GLACIERS = [
    "A glacier forms when winter snowfall exceeds summer melting for many years.",
    "Ice sheets move as glaciers, flowing outward under their own weight as snow piles up.",
    "Rivers of ice carve valleys over thousands of years.",
    "Snow that survives the summer compacts into firn and then glacial ice.",
]


async def test_a_section_several_documents_hold_is_one_context_of_those_the_caller_may_read(tmp_path: Path) -> None:
    """Eight public documents and one of alice's hold one page, four others a page each: top_k 5 is
    the page once and the four others, not five copies of it. Only readable copies count: the
    private copy, the best, does not take the public ones' place for a caller who may not read it.
    The answer is cached as returned."""
    corpus = [_doc(f"twin{i}", TWIN, title=f"Mirror {i}") for i in range(8)]
    corpus += [_doc("alice-twin", TWIN, access=Access.PRIVATE, owner_id="alice")]
    corpus += [_doc(f"other{i}", text) for i, text in enumerate(GLACIERS)]
    application = Application(load_settings(data_dir=tmp_path))
    await application.open()
    try:
        assert not (await application.ingest(corpus)).errors
        q = QueryOptions("glaciers slow rivers of ice form where snow accumulates faster than it melts", 5, strategy=Strategy.HYBRID, rerank=False)
        r = await application.pipeline.query(q)
        assert sorted(c.parent.content for c in r.contexts) == sorted([TWIN, *GLACIERS])
        again = await application.pipeline.query(q)
        assert again.cached and again.contexts == r.contexts

        vector = (await application.embedder.embed([q.query]))[0]
        hits = await application.vectors.search_dense(vector, 40, PointFilter(access=AccessFilter.for_identity(ROOT)))
        private = next(h for h in hits if h.document_id == "alice-twin")
        hits = [dataclasses.replace(private, score=hits[0].score + 1), *(h for h in hits if h is not private)]
        for identity in (ANON, ALICE):
            state = QueryState(options=QueryOptions(q.query, 5, identity=identity), reranked=hits,
                               point_filter=PointFilter(access=AccessFilter.for_identity(identity)))
            contexts = (await nodes.enrich(state, application.pipeline.deps))["contexts"]
            twins = [c.document.document_id for c in contexts if c.parent.content == TWIN]
            assert len(contexts) == 5 and len(twins) == 1
            assert (twins[0] == "alice-twin") is (identity is ALICE)
    finally:
        await application.close()


async def test_copies_that_fill_the_candidate_pool_are_searched_past(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty copies of one page filled the pool (top_k 5 x 8 child hits): the answer was that
    page alone, with four distinct relevant documents stored. Enrich searches again with a wider
    pool, as Search does, once here; past the cap of hits a context it answers with fewer."""
    corpus = [_doc(f"mirror{i}", TWIN) for i in range(40)] + [_doc(f"other{i}", text) for i, text in enumerate(GLACIERS)]
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    try:
        assert not (await application.ingest(corpus)).errors
        q = "glaciers slow rivers of ice form where snow accumulates faster than it melts"
        for strategy in (Strategy.SEMANTIC, Strategy.HYBRID):
            r = await application.pipeline.query(QueryOptions(q, 5, strategy=strategy, use_cache=False, rerank=False))
            assert sorted(c.parent.content for c in r.contexts) == sorted([TWIN, *GLACIERS]), (strategy, _docs(r))
            assert _stages(r).count("retrieve") == 2 and r.metrics.iterations == 1
        monkeypatch.setattr(nodes, "HITS_PER_RESULT", 8)  # the pool's own size: no wider one
        capped = await application.pipeline.query(QueryOptions(q, 5, strategy=Strategy.SEMANTIC, use_cache=False, rerank=False))
        assert [c.parent.content for c in capped.contexts] == [TWIN] and _stages(capped).count("retrieve") == 1
    finally:
        await application.close()


async def test_a_deadline_cutting_the_search_past_copies_answers_with_the_pass_scored(tmp_path: Path) -> None:
    """Enrich asks for a wider search past copies, before check_sufficiency scores its pass; the
    deadline passes during that search: the pass's contexts answer, scored and counted (they were
    reported with iterations 0 and a sufficiency of 0)."""
    corpus = [_doc(f"mirror{i}", TWIN) for i in range(40)] + [_doc(f"other{i}", text) for i, text in enumerate(GLACIERS)]
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    try:
        assert not (await application.ingest(corpus)).errors
        clock = Clock()
        vectors = DeadlineOnSecondSearch(application.vectors, clock, deadline=100.0)
        q = QueryOptions("glaciers slow rivers of ice form where snow accumulates faster than it melts", 5,
                         strategy=Strategy.SEMANTIC, use_cache=False, rerank=False, deadline=100.0)
        r = await pipeline(application, clock=clock, vectors=vectors).query(q)
    finally:
        await application.close()
    assert vectors.searches == 2 and _stages(r).count("retrieve") == 2 and "check_sufficiency" not in _stages(r)
    assert r.contexts and "deadline:partial_results" in r.metrics.degraded
    assert r.metrics.iterations == 1 and r.metrics.sufficiency_score > 0


async def test_enrich_reads_past_copies_in_a_few_round_trips(tmp_path: Path) -> None:
    """Forty copies of one page rank first: enrich read as many parents as were still missing each
    time (four after the first copy), ten round trips before it reached the four other pages."""
    corpus = [_doc(f"mirror{i}", TWIN) for i in range(40)] + [_doc(f"other{i}", text) for i, text in enumerate(GLACIERS)]
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    try:
        assert not (await application.ingest(corpus)).errors
        vector = (await application.embedder.embed([TWIN]))[0]
        hits = await application.vectors.search_dense(vector, 200, PointFilter(access=AccessFilter.for_identity(ROOT)))
        assert {h.document_id for h in hits[:40]} == {f"mirror{i}" for i in range(40)}
        reads: list[int] = []

        async def counted(read: Callable[..., Awaitable[Any]], ids: Sequence[str]) -> Any:
            reads.append(len(ids))
            return await read(ids)

        deps = dataclasses.replace(application.pipeline.deps, metadata=Intercepted(application.metadata, "get_parents_and_documents", counted))
        state = QueryState(options=QueryOptions(TWIN, 5, identity=ROOT), reranked=hits, point_filter=PointFilter(access=AccessFilter.for_identity(ROOT)))
        contexts = (await nodes.enrich(state, deps))["contexts"]
    finally:
        await application.close()
    assert sorted(c.parent.content for c in contexts) == sorted([TWIN, *GLACIERS])
    assert len(reads) == 4 and reads[0] == 5  # 5, 8, 16 and the rest: the first reads top_k parents, as without copies


@pytest.mark.parametrize("windows", [True, False])
async def test_a_long_query_is_also_searched_window_by_window(app: Application, windows: bool) -> None:
    embedded: list[list[str]] = []
    searched: list[int] = []

    class Embedder:
        def __getattr__(self, name: str) -> Any:
            return getattr(app.embedder, name)

        async def embed(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
            embedded.append(list(texts))
            return await app.embedder.embed(texts, *args, **kwargs)

    class Vectors:
        def __getattr__(self, name: str) -> Any:
            return getattr(app.vectors, name)

        async def search_dense(self, vector: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            searched.append(1)
            return await app.vectors.search_dense(vector, *args, **kwargs)

    text = " ".join(["the flux capacitor overheated during the test run"] * 20)  # 160 words, more than a child's 128 tokens
    r = await pipeline(app, embedder=Embedder(), vectors=Vectors(), long_query_windows=windows).query(
        QueryOptions(text, 2, strategy=Strategy.SEMANTIC, use_cache=False)
    )
    assert _docs(r)[0] == "codes"
    if windows:
        # The whole query, then its windows, in one call (the encoder cuts it into runs of texts of
        # similar length: scoring_core.encoders.by_token_count).
        windows_cut = app.chunker.child_texts(text)
        assert len(windows_cut) >= 2 and embedded == [[text, *windows_cut]]
        assert len(searched) == 1 + len(windows_cut)
    else:
        assert embedded == [[text]] and len(searched) == 1
    short = await pipeline(app, embedder=Embedder(), long_query_windows=windows).query(QueryOptions("flux capacitor overheated", 1, strategy=Strategy.SEMANTIC, use_cache=False))
    assert embedded[-1] == ["flux capacitor overheated"] and _docs(short) == ["codes"]


async def test_a_query_is_tokenized_for_its_length_only_when_a_setting_needs_it(app: Application) -> None:
    cut: list[str] = []

    def windows(text: str) -> list[str]:
        cut.append(text)
        return app.chunker.child_texts(text)

    text = " ".join(["the flux capacitor overheated during the test run"] * 20)
    await pipeline(app, query_windows=windows).query(QueryOptions(text, 1, strategy=Strategy.KEYWORD, use_cache=False))
    assert cut == []  # KEYWORD searches no windows, and fusion per chunk does not ask
    await pipeline(app, query_windows=windows, fusion_unit="auto").query(QueryOptions(text, 1, strategy=Strategy.KEYWORD, use_cache=False))
    assert cut == [text]
    await pipeline(app, query_windows=windows, long_query_windows=False).query(QueryOptions(text, 1, strategy=Strategy.HYBRID, use_cache=False))
    assert cut == [text]
