"""The indexer: load → chunk → embed (batched) → upsert vectors → replace rows → drop stale vectors.

Children and (when the index has parent vectors) parents are embedded in one batch: a parent's
text is the document title followed by the parent's content, truncated by the embedder to its
``max_seq_length`` tokens, so a short document is embedded whole. Children also get the BM25F
keyword vector (title as a field of weight ``title_weight``). The keyword vectors and each
document's knowledge graph need no dense vector, so they are made while the batch is embedded.

Re-ingesting replaces a document without a window where it is missing: the new version's points
are written first, beside the committed version's (a point's id is per chunk and version, so they
never overwrite them), then its rows in one transaction, then whatever points belong to other
versions, or to chunks the version no longer has, are deleted. An unchanged document (same content
hash, and exactly its chunks' points stored) is skipped; one whose url or source alone changed
(same version) has its row updated, its points kept.

Crash consistency: before its vectors change, a document gets a pending-write intent in the
metadata store (committed first; a delete records it in the same transaction as removing the
rows). The intent is cleared once the vectors match the rows and the vector store has made them
durable (:meth:`VectorStore.sync`): cleared before, a power loss could undo the vector change (bring
a deleted document's points back) with no intent left to say so. One sync serves a whole batch of
an ingest, or a whole delete call: a flush of the embedded engine syncs its whole WAL and every
segment it changed (about 4 ms here), more than a small document's vector writes take. Whatever interrupts the sequence
(an error, a kill -9), :meth:`Indexer.reconcile` makes the vectors agree with the committed rows:
points of any other version go, and all points go when no row exists. It runs at once when a write
fails, and at start-up for every intent left behind (with shared storage, only for intents older
than a lease, since another process may still be writing them). When that cleanup fails too (the
store that failed the write is still down), the document is remembered and reconciled in the
background (:meth:`Indexer.retry_failed_cleanups`) once the store is back, without a restart: its
leftover points, filtered out only after the top-k cut, crowd stored documents out of searches.
Reads also ignore points whose version is not the committed one, so a write in flight is never
visible half-done.

Writes of one document are serialized: within a process, then across the processes sharing the
stores by the metadata store's write lock (MySQL's GET_LOCK; a file lock beside a SQLite file).
Interleaved, two writers' steps would leave one's rows with the other's points. Waiting for the
lock can be cancelled (nothing is written yet); recovery skips a document whose lock is held (a
write in flight) rather than wait for it. A lock's holder that dies lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from retrieval_server.backends.disk import DiskSpace, estimated_bytes
from retrieval_server.backends.embedder import Embedder
from retrieval_server.backends.executor import BlockingExecutor, Priority
from retrieval_server.backends.metadata_store import MetadataStore, search_text, searched_fields
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import (
    LOCAL_OPERATOR,
    Access,
    AccessFilter,
    ChildChunk,
    Document,
    DocumentSource,
    IngestedDocument,
    IngestFailure,
    IngestReport,
    InvalidArgument,
    ParentChunk,
    ParentPoint,
    ResourceExhausted,
    SparseVector,
    VectorPoint,
    WrongModel,
    version_of,
)
from retrieval_server.identifiers import (
    MAX_DOCUMENT_ID_CHARS, MAX_USER_ID_CHARS, check_descriptive_fields, check_grantees, clean_grantee, clean_identifier, clean_user_id,
    composed, composed_metadata, trim,
)
from retrieval_server.ingest.chunker import CHUNKER_REVISION, Chunker
from retrieval_server.ingest.graph_extraction import GraphExtractor, rules_revision_for
from retrieval_server.knowledge import DocumentGraph
from retrieval_server.ingest.loaders import (
    MAX_ROW_ERRORS, LoadError, LoadedDocument, load, metadata_without_controls, sent, without_controls,
)
from scoring_core.encoders import Interrupted

log = logging.getLogger(__name__)
T = TypeVar("T")

#: errors one ingest reports (a file's rows are MAX_ROW_ERRORS of them); the rest are counted in
#: one more, so that an answer stays within a client's 4 MiB (a file name is 1,024 characters)
MAX_REPORTED_ERRORS = 1_000
#: RETRIEVAL_MAX_SEQ_LENGTH's default, the tokens of a text the model reads
DEFAULT_MODEL_TOKENS = 256
#: seconds before a failed cleanup is tried again, doubled after each round that fails up to the
#: second: the store that failed it is down, and asking it at once would only fail again
CLEANUP_RETRY_FIRST_S, CLEANUP_RETRY_MAX_S = 1.0, 60.0


@dataclass(slots=True)
class _Prepared:
    document: Document
    #: what its errors name (IngestError.source): its file, the file, line and id of a .jsonl row,
    #: or its id when sent without a file; the id alone named no file a caller could find
    label: str
    #: its source's place in the request, which ``on_document`` names
    source: int
    parents: list[ParentChunk]
    children: list[ChildChunk]
    previous: Document | None
    #: the digest of everything stored of it (:meth:`Indexer._fingerprint`): the content hash of
    #: rows stored before the version left out the url and source
    whole_hash: str = ""
    #: tokens in the title, which embedded texts may lead with
    title_tokens: int = 0
    #: the title children lead with (``child_title``): cut to what the model reads beside a child
    children_title: str = ""
    children_title_tokens: int = 0


@dataclass(frozen=True, slots=True)
class _Derived:
    """What a document's writes need besides its dense vectors: its children's keyword vectors
    (plain, and with the title as a field when the index has that field) and its knowledge graph."""

    sparse: list[tuple[SparseVector, SparseVector | None]]
    graph: DocumentGraph | None


async def to_the_end(write: Coroutine[Any, Any, T]) -> T:
    """``write``'s result, run to its end even when the caller is cancelled meanwhile (a client's
    cancel, an expired deadline); the cancellation is raised after it.

    A document's write moves two stores in steps; cut between them, the vector points of a version
    the rows do not have would stay until the next start's recovery (and, ranking before the
    stored version's, hide it from searches). So a cancelled ingest or delete finishes, or
    reconciles, the document it is at, and stops before the next."""
    task = asyncio.ensure_future(write)
    if await _ended(task):
        if not task.cancelled():
            task.exception()  # a failure was logged and reconciled by the write; the cancellation wins
        raise asyncio.CancelledError
    return task.result()


async def _ended(task: asyncio.Future[Any]) -> bool:
    """Wait for ``task`` to end, even when the caller is cancelled meanwhile; whether it was."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])  # unlike awaiting it, cancels only the waiting
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


async def _discard(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to end, whatever it ends with (nobody will read it); a
    cancellation of the caller meanwhile is raised after it.

    Not by awaiting it under ``suppress(BaseException)``: that hid the caller's own cancellation
    too (Ctrl-C, a client's cancel or deadline while a batch that failed to embed was dropped),
    and the ingest went on to its last row."""
    task.cancel()
    cancelled = await _ended(task)
    if not task.cancelled():
        task.exception()  # read, or asyncio logs it as never retrieved
    if cancelled:
        raise asyncio.CancelledError


def _parent_text(title: str, content: str) -> str:
    """What a parent's vector (and, with ``child_title``, a child's) embeds: the title, then the
    content (unless it already leads with the title)."""
    return content if not title or content.startswith(title) else f"{title}\n\n{content}"


def children_title(chunker: Chunker, title: str, model_tokens: int) -> str:
    """The title as children lead with it (``child_title``): a child and its title must fit in
    what the model reads ([CLS] and [SEP] besides), or a long title pushed the child's last
    sentences out of its vector."""
    return chunker.cut(title, max(0, model_tokens - 2 - chunker.sizes.child_tokens))


def embedded_texts(
    title: str, parents: Sequence[ParentChunk], children: Sequence[ChildChunk], *, child_title: bool, parent_vectors: bool,
    children_title: str | None = None,
) -> tuple[list[str], list[str]]:
    """What one document's vectors embed: its children's texts, and its parents' (none without
    parent vectors). ``children_title``: the title as children lead with it (default ``title``)."""
    # Contextual children: a passage out of its document loses the subject the title names once.
    # Only the embedded text changes; the stored (and returned) chunk text stays the document's own.
    kid_title = title if children_title is None else children_title
    kids = [_parent_text(kid_title, c.content) if child_title else c.content for c in children]
    return kids, [_parent_text(title, parent.content) for parent in parents] if parent_vectors else []


def _token_counts(chunks: Sequence[ParentChunk | ChildChunk], texts: Sequence[str], title_tokens: int) -> list[int]:
    """About how many tokens each of the chunks' embedded ``texts`` has: the chunk's, plus the
    title's when the text leads with it (see :func:`embedded_texts`)."""
    return [c.tokens + (title_tokens if t != c.content else 0) for c, t in zip(chunks, texts, strict=True)]


@dataclass(slots=True)
class _DocumentLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _refusal(stored: Document | None, writer: AccessFilter) -> str | None:
    """Why ``writer`` may not replace ``stored`` (None: it may). Only a document the writer may
    read, by the rule reads apply: an ADMIN who could not read a private document deleted it, or
    made its id serve their own text, and learnt it existed."""
    if stored is None or writer.allows(stored):
        return None
    return f"document_id '{stored.document_id}' is taken by a document the caller may not read: only SUPER_ADMIN may replace it"


def _clean_id(document_id: str) -> str:
    try:
        return clean_identifier(document_id, "document_id", MAX_DOCUMENT_ID_CHARS)
    except ValueError as exc:
        raise LoadError(str(exc)) from None


class _Outcomes:
    """What becomes of a request's documents, told as it happens: each one stored (or found
    unchanged) goes into ``done`` and to ``on_document``, each failure into :attr:`errors` and to
    ``on_failure``, both with the source's place in the request; ``on_finished`` hears of a source
    once it is loaded and each of its documents stored or failed. A caller cancelled part-way
    (Ctrl-C) gets no report, yet knows what became of each source it sent."""

    def __init__(
        self, done: list[IngestedDocument], on_document: Callable[[int, IngestedDocument], None] | None,
        on_failure: Callable[[int, IngestFailure], None] | None, on_finished: Callable[[int], None] | None,
    ) -> None:
        self.done = done
        self.errors: list[IngestFailure] = []
        self._on_document, self._on_failure, self._on_finished = on_document, on_failure, on_finished
        #: each source's documents in batches not written yet, from its loading until it is finished
        self._left: dict[int, int] = {}
        self._loading: int | None = None

    def loading(self, place: int) -> None:
        self._loading = place
        self._left[place] = 0

    def loaded(self, place: int) -> None:
        self._loading = None
        self._finished_if_done(place)

    def batched(self, place: int) -> None:
        self._left[place] += 1

    def stored(self, place: int, document: IngestedDocument, *, batched: bool = False) -> None:
        """``batched``: one of the documents :meth:`batched` counted (not one found unchanged)."""
        self.done.append(document)
        self._tell(self._on_document, place, document)
        if batched:
            self._written(place)

    def failed(self, place: int, failure: IngestFailure, *, batched: bool = False) -> None:
        self.errors.append(failure)
        self._tell(self._on_failure, place, failure)
        if batched:
            self._written(place)

    def _written(self, place: int) -> None:
        self._left[place] -= 1
        self._finished_if_done(place)

    def _finished_if_done(self, place: int) -> None:
        # A source being loaded may have more documents to come, after those written so far.
        if place != self._loading and not self._left[place]:
            del self._left[place]
            self._tell(self._on_finished, place)

    @staticmethod
    def _tell(callback: Callable[..., None] | None, *args: Any) -> None:
        """A callback's failure is logged, not raised: raised from a document's write, it made a
        document stored (and told stored) a failure too (a progress bar writing to a closed stderr)."""
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            log.exception("telling the caller of an ingest's progress failed")


class Indexer:
    def __init__(
        self,
        chunker: Chunker,
        embedder: Embedder,
        sparse: Bm25Encoder,
        vectors: VectorStore,
        metadata: MetadataStore,
        executor: BlockingExecutor,
        *,
        batch_children: int = 1024,
        embed_piece: int = 32,
        max_document_bytes: int | None = None,
        disk: DiskSpace | None = None,
        graph: GraphExtractor | None = None,
        glossary: str = "",
        title_weight: int = 2,
        query_jobs: Callable[[], int] | None = None,
        child_title: bool = False,
        model_tokens: int = DEFAULT_MODEL_TOKENS,
    ) -> None:
        self._chunker = chunker
        self._embedder = embedder
        self._sparse = sparse
        self._vectors = vectors
        self._metadata = metadata
        self._executor = executor
        self._batch = batch_children
        self._embed_piece = embed_piece
        self._max_bytes = max_document_bytes
        self._disk = disk
        self._locks: dict[str, _DocumentLock] = {}
        #: documents whose cleanup after a failed write failed too, with when it last failed (the
        #: intents begun before it are theirs to reconcile); :meth:`retry_failed_cleanups` takes them
        self._failed_cleanups: dict[str, float] = {}
        self._cleanup_failed = asyncio.Event()
        self._graph = graph
        #: the glossary's digest ('' for none): the graph's names depend on what is in it
        self._glossary = glossary
        self._title_weight = title_weight
        self._query_jobs = query_jobs
        #: contextual children; the application binds it to what the index was created with
        self.child_title = child_title
        self._model_tokens = model_tokens

    def _fingerprint(self, doc: Document, loaded: LoadedDocument, parents: Sequence[ParentChunk]) -> tuple[str, str]:
        """The document's content hash, and the digest of everything that ends up in the index.
        The hash is that digest led by (as its :attr:`Document.version`) the digest of all but the
        fields no point or embedded text holds, its url and source: a change of those alone keeps
        the version, and so the points, and is written to the document's row only. The whole
        digest is what releases before that stored as the content hash."""
        indexed = {
            "pages": [(p.number, p.text) for p in loaded.pages],
            "sizes": [self._chunker.sizes.parent_tokens, self._chunker.sizes.child_tokens, self._chunker.sizes.child_overlap_tokens],
            "chunker": CHUNKER_REVISION,
            "model": self._embedder.model_id,
            # What of a parent (and of a child's title) the model reads: the rest is cut before embedding.
            # Absent at the default, as in the fingerprints stored before it counted: otherwise
            # the first ingest after an upgrade embedded every unchanged document again.
            **({"model_tokens": self._model_tokens} if self._model_tokens != DEFAULT_MODEL_TOKENS else {}),
            # Metadata search reads the title and metadata without break hints (soft hyphens and
            # the like) since terms revision 3, which its schema does not record: a document
            # holding one there was stored split and is written again, not skipped as unchanged.
            # Absent otherwise, as in the fingerprints stored before.
            **({"search_text": "without break hints"} if search_text(doc) != searched_fields(doc) else {}),
            # The revision that last changed this document's graph, read per parent as the graph is.
            "graph": [self._graph.name, max(map(rules_revision_for, (p.content for p in parents)), default=rules_revision_for("")), self._glossary]
            if self._graph else None,
            "title_weight": self._title_weight,
            "child_title": self.child_title,
            "features": [self._vectors.features.parent_vectors, self._vectors.features.title_field],
        }
        held = [doc.access.value, doc.owner_id, doc.metadata, doc.readers]

        def digest(fields: list[Any]) -> str:
            return hashlib.sha256(json.dumps({"doc": fields, **indexed}, sort_keys=True).encode()).hexdigest()

        whole = digest([doc.title, doc.url, doc.source, *held])
        version = version_of(digest([doc.title, *held]))
        return version + whole[len(version):], whole

    async def ingest(
        self, sources: Sequence[DocumentSource], on_document: Callable[[int, IngestedDocument], None] | None = None, *,
        writer: AccessFilter = AccessFilter.for_identity(LOCAL_OPERATOR), stored: list[IngestedDocument] | None = None,
        on_failure: Callable[[int, IngestFailure], None] | None = None, on_finished: Callable[[int], None] | None = None,
    ) -> IngestReport:
        """``writer``: what the caller may read, and so replace (:func:`_refusal`). ``on_document``
        is told of each document as it is stored or found unchanged, ``on_failure`` of each failure,
        both with its source's place in ``sources``, and ``on_finished`` of each source whose
        documents are all stored or failed (:class:`_Outcomes`); ``stored`` gets each stored
        document: a caller cancelled part-way (its deadline, a cancel, Ctrl-C) gets no report, yet
        knows what was stored and still owes those documents their follow-ups."""
        outcomes = _Outcomes([] if stored is None else stored, on_document, on_failure, on_finished)
        pending: list[_Prepared] = []
        #: each document's place in the request: batches are written while the next are embedded,
        #: and a document found unchanged is done before the batch ahead of it is written
        order: dict[str, int] = {}
        # Two stages: while a batch is written (keyword vectors, graph, stores), the next one is
        # loaded, chunked and embedded, so the model does not wait for the rest. Batches are written
        # in order, one at a time; a document is reported once it is written.
        writing: asyncio.Task[None] | None = None

        async def written() -> None:
            nonlocal writing
            if writing is not None:
                task, writing = writing, None
                await task

        async def write(batch: list[_Prepared], dense: np.ndarray, derived: asyncio.Task[list[_Derived]]) -> None:
            await self._write(batch, dense, await derived, outcomes, writer)

        async def flush() -> None:
            nonlocal writing
            batch = pending[:]
            pending.clear()
            if not batch:
                return
            # The keyword vectors and the graph need no dense vector: they are made while the model
            # embeds the batch, instead of one document at a time between its writes.
            derived = asyncio.create_task(self._derive(batch))
            try:
                dense = await self._embed_batch(batch, outcomes)
                await written()
            except BaseException:
                await _discard(derived)
                raise
            if dense is None:
                await _discard(derived)
                return
            writing = asyncio.create_task(write(batch, dense, derived))

        try:
            for place, src in enumerate(sources):
                outcomes.loading(place)
                try:
                    if self._max_bytes is not None and len(src.content) > self._max_bytes:
                        raise LoadError(f"{len(src.content)} bytes, above the limit of {self._max_bytes} (RETRIEVAL_MAX_DOCUMENT_BYTES)")
                    # Parsing and chunking are CPU work: off the event loop, behind any query's work.
                    loaded_source = await self._executor.run(load, src, self._max_bytes, priority=Priority.BACKGROUND)
                except LoadError as exc:
                    outcomes.failed(place, IngestFailure(src.filename or src.document_id, str(exc)))
                    outcomes.loaded(place)
                    continue
                for row, reason in loaded_source.failed:
                    outcomes.failed(place, IngestFailure(f"{src.filename}:{row}", reason))
                listed = unlisted = 0
                for loaded in loaded_source.documents:
                    # A row by its line: its id may be blank, or the row before's, stored in its place.
                    label = (f"{src.filename}:line {loaded.line} ({loaded.document_id})" if loaded_source.rows
                             else src.filename or loaded.document_id)
                    try:
                        doc_id = _clean_id(loaded.document_id)
                        if doc_id in order:
                            raise LoadError(f"document_id '{doc_id}' appears twice in one request")
                        order[doc_id] = len(order)
                        prepared = await self._prepare(src, dataclasses.replace(loaded, document_id=doc_id), label, place, writer)
                    except LoadError as exc:
                        # Listed as a file's unreadable rows are: a 1 MB file of 20,000 repeated
                        # ids answered with 20,000 errors (22 MB, over a client's 4 MiB).
                        if listed < MAX_ROW_ERRORS:
                            listed += 1
                            outcomes.failed(place, IngestFailure(label, str(exc)))
                        else:
                            unlisted += 1
                        continue
                    if await self._points_kept(prepared):
                        unchanged = prepared.previous.content_hash in (prepared.document.content_hash, prepared.whole_hash)  # type: ignore[union-attr]
                        try:
                            relocated = unchanged or await self._relocate(prepared)
                        except Exception as exc:
                            log.exception("storing %s failed", doc_id)
                            outcomes.failed(place, IngestFailure(label, f"storing failed: {exc}"))
                            continue
                        if relocated:
                            outcomes.stored(place, IngestedDocument(doc_id, len(prepared.parents), len(prepared.children), True,
                                                                    unchanged=unchanged))
                            continue
                    pending.append(prepared)
                    outcomes.batched(place)
                    if sum(len(p.children) for p in pending) >= self._batch:
                        await flush()
                if unlisted:
                    outcomes.failed(place, IngestFailure(src.filename or src.document_id, f"{unlisted} more rows could not be stored"))
                outcomes.loaded(place)
            await flush()
            await written()
        except BaseException:
            if writing is not None:
                await _discard(writing)
            raise
        errors = outcomes.errors
        return IngestReport(tuple(sorted(outcomes.done, key=lambda d: order[d.document_id])), tuple(errors[:MAX_REPORTED_ERRORS]),
                            max(0, len(errors) - MAX_REPORTED_ERRORS))

    async def _points_kept(self, p: _Prepared) -> bool:
        """Whether the document's stored points are its own, so it needs no embedding: stored as it
        is (its write skipped), or with only its url or source changed (:meth:`_relocate`). Not
        while its write is pending: rows that committed before the vectors could follow (old points
        left, the reconciliation failed too) would otherwise stay that way until the next start,
        however often the caller retried; writing it again finishes the job. Nor when its version's points
        (its children's, and its parents' with parent vectors) are not exactly its chunks' number: a
        power loss before the engine flushed, or a writer whose lock was lost midway, can leave rows
        whose points are gone with no write pending, and only writing it again brings them back;
        more points than chunks are another chunking's, which writing it again removes."""
        if p.previous is None or (p.previous.version != p.document.version and p.previous.content_hash != p.whole_hash):
            return False
        doc_id, version = p.document.document_id, p.previous.version
        if await self._metadata.has_pending_write(doc_id):
            return False
        if await self._vectors.count(doc_id, version) != len(p.children):
            return False
        # A parent has a point when it has a child (see _write): without it, the parent leg never
        # finds the document.
        with_points = len({c.parent_chunk_id for c in p.children}) if self._vectors.features.parent_vectors else 0
        return not with_points or await self._vectors.count(doc_id, version, parents=True) == with_points

    async def _relocate(self, p: _Prepared) -> bool:
        """Writes a document whose points are kept (:meth:`_points_kept`) and whose url or source
        changed to its row alone, under its lock; False when another version was stored since,
        which it is then written over as any change is."""
        async with self._document_lock(p.document.document_id):
            return await self._metadata.relocate_document(p.document, p.previous.content_hash)  # type: ignore[union-attr]

    async def _prepare(self, src: DocumentSource, loaded: LoadedDocument, label: str, place: int, writer: AccessFilter) -> _Prepared:
        try:
            # A user's, never a group's: a private document owned by "group:hr" was the whole group's
            # to read, which only a grant may give.
            owner = clean_user_id(src.owner_id, "owner_id") if trim(src.owner_id, "owner_id", MAX_USER_ID_CHARS) else ""
            check_grantees(src.granted_user_ids)
            grantees = {clean_grantee(u, "granted_user_ids") for u in src.granted_user_ids}
            if src.access is Access.PRIVATE and not owner:
                raise ValueError("owner_id is required for a PRIVATE document")
            # The caller's fields are stored as a file's are (loaders compose those): NFC, stream-safe.
            # Checked as sent first: composing makes a lone surrogate U+FFFD, which the caller's
            # field (a file name that is not UTF-8) is refused for instead.
            check_descriptive_fields(loaded.title, src.url, src.source or src.name, src.metadata)
            # Control characters as spaces, as in a file's title and a JSONL row's metadata: every
            # hit carries these back to whoever reads it, whose terminal obeyed them.
            metadata = composed_metadata(metadata_without_controls(src.metadata))
            doc = Document(
                document_id=loaded.document_id,
                title=loaded.title,
                # Nothing visible sent is none: a url of " " replaced every JSONL row's own.
                url=without_controls(composed(sent(src.url))) or loaded.url,
                source=without_controls(composed(sent(src.source) or src.name)),
                access=src.access,
                owner_id=owner,
                metadata={**loaded.metadata, **metadata},
                granted_user_ids=tuple(sorted(grantees)),
            )
            check_descriptive_fields(doc.title, doc.url, doc.source, doc.metadata)
        except ValueError as exc:
            raise LoadError(str(exc)) from None

        def chunk() -> tuple[list[ParentChunk], list[ChildChunk], tuple[str, str], int, str]:
            try:
                parents, children = self._chunker.chunk(doc.document_id, [(p.number, p.text) for p in loaded.pages])
                kid_title = children_title(self._chunker, doc.title, self._model_tokens) if self.child_title else ""
                return (parents, children, self._fingerprint(doc, loaded, parents), self._chunker.count(doc.title) if doc.title else 0,
                        kid_title)
            except Exception as exc:
                # Text the loaders let through and the tokenizer refuses is a bug of ours, but this
                # document's: the rest of the request is still stored. (The executor's own errors,
                # a shutdown's, are not this document's, and pass.)
                log.exception("chunking %s failed", doc.document_id)
                raise LoadError(f"cannot chunk this document ({type(exc).__name__})") from None

        parents, children, (fingerprint, whole_hash), title_tokens, kid_title = await self._executor.run(chunk, priority=Priority.BACKGROUND)
        if not children:
            raise LoadError("no text to index")
        doc = dataclasses.replace(doc, content_hash=fingerprint)
        previous = await self._metadata.get_document(doc.document_id)
        # Before it is embedded, or found unchanged (which would say the id is stored); checked
        # again under the document's lock before it is written (_write).
        if refusal := _refusal(previous, writer):
            raise LoadError(refusal)
        kid_title_tokens = title_tokens if kid_title == doc.title else self._model_tokens - 2 - self._chunker.sizes.child_tokens
        return _Prepared(doc, label, place, parents, children, previous, whole_hash, title_tokens, kid_title, kid_title_tokens)

    async def _embed(self, texts: list[str], tokens: list[int]) -> np.ndarray:
        """In pieces, so that queries never wait for ingestion's model runs.

        Pieces are cut from the whole batch in order of ``tokens`` (each text's), as the encoder
        orders a batch of its own: a piece pads to similar lengths, where pieces in document order
        would each pad to their longest text. While no query comes, a piece is ``embed_piece``
        texts (as many as the encoder runs at once; it cuts them where lengths jump) on the
        queries' lane, stopped the moment a query needs that lane. After that, and while queries
        keep coming to the model (``query_jobs`` moved during a piece), pieces run beside the
        queries on one thread of their own (the query shares the cores rather than waiting), one
        text at a time; once a piece passes with no query, they go back to the queries' lane,
        doubling back to full size.
        """
        out = np.zeros((len(texts), self._embedder.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=tokens.__getitem__)
        size, start, beside = self._embed_piece, 0, False
        while start < len(order):
            idx = order[start : start + size]
            before = self._query_jobs() if self._query_jobs else 0
            try:
                out[idx] = await self._embedder.embed_background([texts[i] for i in idx], beside_queries=beside)
            except Interrupted:
                size, beside = 1, True  # the same texts again, beside the query that stopped them
                continue
            start += len(idx)
            beside = self._query_jobs is not None and self._query_jobs() != before
            size = 1 if beside else min(2 * size, self._embed_piece)
        return out

    def _texts(self, batch: list[_Prepared]) -> tuple[list[str], list[int]]:
        """What a batch embeds: its children, then (with parent vectors) its parents; and about how
        many tokens each text has (its chunk's, plus the title's when the text leads with it), known
        from chunking without tokenizing again."""
        kids: list[str] = []
        parents: list[str] = []
        kid_tokens: list[int] = []
        parent_tokens: list[int] = []
        for p in batch:
            k, ps = embedded_texts(p.document.title, p.parents, p.children, child_title=self.child_title,
                                   parent_vectors=self._vectors.features.parent_vectors, children_title=p.children_title)
            kids += k
            parents += ps
            kid_tokens += _token_counts(p.children, k, p.children_title_tokens)
            if ps:
                parent_tokens += _token_counts(p.parents, ps, p.title_tokens)
        return kids + parents, kid_tokens + parent_tokens

    async def _embed_batch(self, batch: list[_Prepared], outcomes: _Outcomes) -> np.ndarray | None:
        """The batch's vectors (see :meth:`_texts`); None, with every document reported, when it cannot be stored."""
        texts, tokens = self._texts(batch)
        if self._disk is not None:
            try:
                self._disk.check(estimated_bytes(sum(len(x.encode()) for x in texts), len(texts), self._embedder.dim))
            except ResourceExhausted as exc:
                for p in batch:
                    outcomes.failed(p.source, IngestFailure(p.label, f"not stored: {exc}"), batched=True)
                return None
        try:
            return await self._embed(texts, tokens)
        except Exception as exc:
            log.exception("embedding failed")
            for p in batch:
                outcomes.failed(p.source, IngestFailure(p.label, f"embedding failed: {exc}"), batched=True)
            return None

    async def _derive(self, batch: list[_Prepared]) -> list[_Derived]:
        """Each document's keyword vectors and graph, in the batch's order."""
        titled = self._vectors.features.title_field
        out: list[_Derived] = []
        for p in batch:

            def sparse_vectors(
                children: list[ChildChunk] = p.children, title: str = p.document.title
            ) -> list[tuple[SparseVector, SparseVector | None]]:
                return [
                    (self._sparse.document(c.content), self._sparse.titled_document(c.content, title, self._title_weight) if titled else None)
                    for c in children
                ]

            sparse = await self._executor.run(sparse_vectors, priority=Priority.BACKGROUND)
            out.append(_Derived(sparse, await self._document_graph(p)))
        return out

    async def _write(
        self, batch: list[_Prepared], dense: np.ndarray, derived: list[_Derived], outcomes: _Outcomes, writer: AccessFilter,
    ) -> None:
        """The batch into the stores; each document committed is told to ``outcomes`` (:meth:`_store`)."""
        with_parents = self._vectors.features.parent_vectors
        row = 0
        parent_row = sum(len(p.children) for p in batch)
        begun: dict[str, float] = {}
        try:
            for p, d in zip(batch, derived, strict=True):
                vecs = dense[row : row + len(p.children)]
                row += len(p.children)
                p.document = document = self._settled(p.document, d.graph)
                points = [
                    VectorPoint(child=c, document=document, dense=v, sparse=s, version=document.version, sparse_titled=st)
                    for c, v, (s, st) in zip(p.children, vecs, d.sparse, strict=True)
                ]
                parent_points: list[ParentPoint] = []
                if with_parents:
                    first_child: dict[str, ChildChunk] = {}
                    for c in p.children:
                        first_child.setdefault(c.parent_chunk_id, c)
                    parent_points = [
                        ParentPoint(parent, first_child[parent.parent_chunk_id], document, dense[parent_row + i], document.version)
                        for i, parent in enumerate(p.parents)
                        if parent.parent_chunk_id in first_child
                    ]
                    parent_row += len(p.parents)
                doc_id = p.document.document_id
                try:
                    # Waiting for the document's lock can be cancelled; its write, once begun, runs to its end.
                    async with self._document_lock(doc_id):
                        # Under the lock, as every write of it: what was checked when it was prepared may
                        # have been replaced since (made private) by another writer.
                        if refusal := await self._refused(doc_id, writer):
                            outcomes.failed(p.source, IngestFailure(p.label, refusal), batched=True)
                            continue
                        await to_the_end(self._store(p, points, parent_points, d.graph, begun, outcomes))
                except WrongModel:
                    raise  # not this document's failure: every write of this process would fail alike
                except Exception as exc:
                    outcomes.failed(p.source, IngestFailure(p.label, f"storing failed: {exc}"), batched=True)
                    continue
                log.debug("document stored", extra={"document_id": doc_id, "children": len(p.children)})
        finally:
            await to_the_end(self._settle(begun))
        await self._recount()

    async def _store(
        self, p: _Prepared, points: list[VectorPoint], parent_points: list[ParentPoint], graph: DocumentGraph | None,
        begun: dict[str, float], outcomes: _Outcomes,
    ) -> None:
        """One document into both stores, under its lock; its intent's start goes into ``begun`` for
        :meth:`_settle`, and the document to ``outcomes`` (both even when the caller is cancelled
        meanwhile: the document is stored all the same). On failure the vectors are made to match
        the committed rows again, and the failure is raised."""
        doc_id = p.document.document_id
        try:
            started = await self._metadata.begin_write(doc_id)
            for i in range(0, len(points), self._batch):
                await self._vectors.upsert(points[i : i + self._batch])
            for i in range(0, len(parent_points), self._batch):
                await self._vectors.upsert_parents(parent_points[i : i + self._batch])
            replaced = await self._metadata.replace_document(p.document, p.parents, graph, model=self._embedder.model_id)
            # The chunks too: a version written over itself (a chunker changed with no revision
            # bumped) keeps only the points of the chunks it has now.
            await self._vectors.delete_document(doc_id, keep_version=p.document.version, keep_chunks=[c.chunk_id for c in p.children])
        except Exception:
            log.exception("storing %s failed", doc_id)
            await self._reconcile_quietly(doc_id)
            raise
        begun[doc_id] = started
        outcomes.stored(p.source, IngestedDocument(doc_id, len(p.parents), len(p.children), replaced), batched=True)

    async def _settle(self, begun: dict[str, float]) -> None:
        """Clear the intents of documents whose vectors match their rows (``begun``: each intent's
        start), once one sync has made all their vector changes durable. Outside the documents'
        locks, so an intent renewed since by another write is left to that writer. On failure the
        intents stay, and their documents are reconciled in the background."""
        if not begun:
            return
        try:
            await self._vectors.sync()
            for doc_id, started in begun.items():
                await self._metadata.end_write(doc_id, started)
        except Exception:
            log.exception("syncing the vector store failed; the pending writes of %d documents are reconciled in the background", len(begun))
            for doc_id in begun:
                self._cleanup_failing(doc_id)

    def _settled(self, document: Document, graph: DocumentGraph | None) -> Document:
        """``document`` as it is stored: when its graph is provisional (the LLM did not answer for
        some chunk, its provider down, and the classical rules stood in) or it has none (the
        extraction failed), with a fingerprint no ingest computes. Stored with its own, its next
        ingest was skipped as unchanged, and the fallback's graph stayed for good. A graph the
        rules built where the model's answer was refused is settled: the next ingest would get
        that answer again, and a new version (and answers cached citing it dropped) every time."""
        if self._graph is None or (graph is not None and not graph.provisional):
            return document
        if graph is None:
            log.warning("%s is stored without a graph; its next ingest extracts it again", document.document_id)
        else:
            log.warning("the graph of %s was built by %s, the model not answering for some chunk; its next ingest extracts it again",
                        document.document_id, graph.extractor)
        return dataclasses.replace(document, content_hash=secrets.token_hex(32))

    async def _recount(self) -> None:
        """After a batch of writes: the search policy's count of children (a hint for exact or
        HNSW search; on failure the last one stays)."""
        try:
            await self._vectors.refresh_count()
        except Exception:
            log.warning("counting the vector store's points failed; the search policy keeps the last count", exc_info=True)

    async def _document_graph(self, p: _Prepared) -> DocumentGraph | None:
        """The document's knowledge graph; a failed extraction leaves the document without one."""
        if self._graph is None:
            return None
        try:
            return await self._graph.extract(p.parents, p.children)
        except Exception:
            log.exception("graph extraction failed for %s; indexed without graph", p.document.document_id)
            return None

    @contextlib.asynccontextmanager
    async def _document_lock(self, document_id: str, *, wait: bool = True) -> AsyncIterator[bool]:
        """One write of a document at a time: in this process (the lock lives while someone uses
        it), then among the processes sharing the stores (the metadata store's write lock). Yields
        whether it is held: always when ``wait``; else False at once while a write holds it."""
        entry = self._locks.setdefault(document_id, _DocumentLock())
        entry.users += 1
        try:
            if not wait and entry.lock.locked():
                yield False
                return
            async with entry.lock, self._metadata.write_lock(document_id, wait=wait) as held:
                yield held
        finally:
            entry.users -= 1
            if not entry.users:
                del self._locks[document_id]

    async def _refused(self, document_id: str, writer: AccessFilter) -> str | None:
        """:func:`_refusal` of the stored version (read under the document's lock)."""
        if writer.reads_everything:
            return None
        return _refusal(await self._metadata.get_document(document_id), writer)

    async def _delete_one(self, document_id: str, writer: AccessFilter, begun: dict[str, float], deleted: list[str]) -> bool:
        """Under the document's lock: rows, then vectors; the intent's start goes into ``begun`` for
        :meth:`_settle` (not when the points could not be deleted: the intent stays, and they are
        deleted in the background), and the id, if it existed, into ``deleted`` (both even when the
        caller is cancelled meanwhile). False, as for a missing id, for a document ``writer`` may
        not read: that it exists is not theirs to learn either."""
        if await self._refused(document_id, writer):
            return False
        existed = await self._metadata.delete_document(document_id)
        try:
            await self._vectors.delete_document(document_id)
            started = await self._metadata.pending_since(document_id)
        except Exception:
            log.exception("deleting the points of %s failed; they are deleted in the background", document_id)
            self._cleanup_failing(document_id)
        else:
            if started is not None:
                begun[document_id] = started
        if existed:
            deleted.append(document_id)
            log.debug("document deleted", extra={"document_id": document_id})
        return existed

    async def reconcile(self, document_id: str) -> None:
        """Make the document's vectors match its committed rows, then, once synced, clear its pending write."""
        committed = (await self._metadata.document_versions([document_id])).get(document_id)
        if committed is None:
            await self._vectors.delete_document(document_id)
        else:
            await self._vectors.delete_document(document_id, keep_version=version_of(committed))
        await self._vectors.sync()
        await self._metadata.end_write(document_id)

    async def _reconcile_quietly(self, document_id: str) -> None:
        try:
            await self.reconcile(document_id)
        except Exception:
            log.exception("reconciling %s failed; it is tried again in the background", document_id)
            self._cleanup_failing(document_id)

    def _cleanup_failing(self, document_id: str) -> None:
        self._failed_cleanups[document_id] = time.time()
        self._cleanup_failed.set()

    async def _reconcile_abandoned(self, document_id: str, cutoff: float, lease_s: float | None = None) -> bool | None:
        """Reconcile the document if a write of it begun by ``cutoff`` (epoch seconds), or, with
        ``lease_s``, stamped more than that ahead of the clock (:meth:`recover`), is still pending:
        whether it was reconciled, or None while a write of it is in flight (its lock is held),
        which is left alone without waiting: a writer that hangs must not hold up the others'
        recovery, and the next round sees it again."""
        async with self._document_lock(document_id, wait=False) as held:
            if not held:
                return None
            # Once the lock is ours no write of it is in flight. One may have ended (the intent is
            # gone) or begun (it is new) since the caller looked: that write was not abandoned. Its
            # stamp is after the cutoff and before now: "ahead" is read now, not when listed.
            ahead = None if lease_s is None else time.time() + lease_s
            if not await self._metadata.has_pending_write(document_id, older_than=cutoff, or_after=ahead):
                return False
            await self.reconcile(document_id)
            return True

    async def recover(self, min_age_s: float = 0.0) -> list[str]:
        """Reconcile every write left pending (by a crash, or a store that failed mid-way) at least
        ``min_age_s`` ago, or stamped more than that ahead of the clock; the documents reconciled.
        With 0 (one writer per embedded folder, at its start), every one."""
        # An intent stamped ahead of the clock comes from a clock stepped back since (after a
        # kill -9): by its stamp alone it waited until the clock caught up, and a lease more. Taking
        # it is as safe as the lease is: the document's lock already keeps a write in flight from
        # being reconciled, and the lease guards a writer that lost its lock (its MySQL session
        # ended) only if the writers' clocks agree within it (one behind by more stamps intents
        # that look abandoned at once). Under that assumption no live write stamps an intent more
        # than a lease ahead.
        now = time.time()
        cutoff = now - min_age_s
        pending = await self._metadata.pending_writes(older_than=cutoff, or_after=now + min_age_s)
        done = [doc_id for doc_id in pending if await self._reconcile_abandoned(doc_id, cutoff, min_age_s)]
        if done:
            await self._recount()
            log.info("recovered interrupted writes", extra={"documents": len(done)})
        return done

    async def retry_failed_cleanups(self) -> None:
        """For as long as the process runs: reconcile the documents whose cleanup after a failed
        write failed too, once their stores are back. Without it their pending writes, and a failed
        replacement's points (which crowd stored documents out of searches), waited for a restart:
        the shared-storage sweep runs only with a Qdrant server, and only after a lease. Idle (no
        polling) until a cleanup fails; tries every such document, then waits longer after each
        round that leaves one, from CLEANUP_RETRY_FIRST_S up to CLEANUP_RETRY_MAX_S."""
        while True:
            await self._cleanup_failed.wait()
            self._cleanup_failed.clear()
            wait_s = CLEANUP_RETRY_FIRST_S
            while self._failed_cleanups:
                await asyncio.sleep(wait_s)
                wait_s = min(wait_s * 2, CLEANUP_RETRY_MAX_S)
                reconciled = 0
                for doc_id, failed_at in list(self._failed_cleanups.items()):
                    try:
                        outcome = await self._reconcile_abandoned(doc_id, failed_at)
                    except Exception as exc:
                        # The store is most likely still down: the others would fail alike.
                        log.warning("reconciling the %d documents whose cleanup failed is tried again in %.0f s: %s",
                                    len(self._failed_cleanups), wait_s, exc)
                        break
                    # A write in flight (None) may be refused before it touches the vectors: the
                    # document is tried again. One whose cleanup failed again meanwhile is too.
                    if outcome is not None and self._failed_cleanups.get(doc_id) == failed_at:
                        del self._failed_cleanups[doc_id]
                        reconciled += 1 if outcome else 0
                if reconciled:
                    await self._recount()
                    log.info("reconciled writes whose cleanup had failed", extra={"documents": reconciled})

    async def delete(
        self, document_ids: Sequence[str], *, writer: AccessFilter = AccessFilter.for_identity(LOCAL_OPERATOR),
        deleted: list[str] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Remove documents: rows first (queries stop seeing them), then their vectors. A document
        ``writer`` may not read is left stored and reported missing (:meth:`_delete_one`).
        ``deleted`` gets each id as it is deleted, for a caller cancelled part-way (as ``stored``
        in :meth:`ingest`).

        Once the rows are gone the document is deleted for every reader; if removing the vectors
        fails, the pending write left by :meth:`MetadataStore.delete_document` finishes the job later.
        """
        try:
            cleaned = [clean_identifier(d, "document_ids", MAX_DOCUMENT_ID_CHARS) for d in document_ids]
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        deleted = [] if deleted is None else deleted
        missing: list[str] = []
        begun: dict[str, float] = {}
        try:
            for doc_id in dict.fromkeys(cleaned):
                async with self._document_lock(doc_id):
                    if not await to_the_end(self._delete_one(doc_id, writer, begun, deleted)):
                        missing.append(doc_id)
        finally:
            await to_the_end(self._settle(begun))
        await self._recount()
        return deleted, missing


async def sweep_abandoned_writes(indexer: Indexer, lease_s: float, every_s: float | None = None) -> None:
    """With shared storage, reconcile the writes left pending longer than ``lease_s`` (a process
    killed mid-write), every ``every_s`` (default: half the lease), for as long as the process runs:
    start-up alone leaves a crash's intents to the next start at least a lease later."""
    interval = every_s if every_s is not None else max(lease_s / 2, 1.0)
    while True:
        await asyncio.sleep(interval)
        try:
            await indexer.recover(min_age_s=lease_s)
        except Exception:
            log.exception("reconciling abandoned writes failed; trying again in %.0f s", interval)
