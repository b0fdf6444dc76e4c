"""Metadata store: documents, parent chunks and grants.

:class:`MetadataStore` holds every query once; the SQLite (embedded) and MySQL/MariaDB
(production) implementations only supply a connection, a transaction and their DDL.
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from retrieval_server.backends.metadata_store.graph import GraphQueries
from retrieval_server.backends.metadata_store.sql import IN_CHUNK, in_chunks as _chunks
from retrieval_server.backends.metadata_store.sql import readable_clause
from retrieval_server.domain import Access, AccessFilter, Document, Identity, ParentChunk, WrongModel, version_of
from retrieval_server.identifiers import UNSPACED_CHAR, without_break_hints
from retrieval_server.knowledge import DocumentGraph
from retrieval_server.stopwords import STOPWORDS


class Tx(Protocol):
    """What a transaction offers the shared queries (``?`` placeholders)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


T = TypeVar("T")
#: the index_info key of the model the index's vectors are embedded with
EMBEDDING_MODEL = "embedding_model"
_DOC_COLUMNS = "document_id, title, url, source, access, owner_id, metadata, content_hash"
_ACCESS = {a.value: a for a in Access}
#: the characters counted as words each
_UNSPACED = re.compile(UNSPACED_CHAR)


def _terms(query: str, limit: int = 16, *, keep_stopwords: bool = False) -> list[str]:
    """Search terms: lower-cased words of 2+ characters (or one Han or kana character), deduplicated, in query order, stopwords
    left out unless ``keep_stopwords`` or the query has nothing else.

    A stopword barely moves a title's score, yet every title holding it is a match to score:
    "of" alone matches thousands of titles. (MariaDB's full-text index is made without InnoDB's
    own list, so that both stores match the same words: see the MySQL store.)"""
    # Words first, then lower-cased: "İ".lower() is "i" and a combining dot, which \w does not
    # match, so "İstanbul" became "stanbul". Without the dot: the title is indexed "istanbul".
    lowered = (w.lower().replace("i\u0307", "i") for w in re.findall(r"\w+", without_break_hints(query)))
    # A Han or kana character alone is a word of those scripts (猫, "cat"), not an initial.
    words = list(dict.fromkeys(w for w in lowered if len(w) >= 2 or _UNSPACED.fullmatch(w)))
    content = words if keep_stopwords else [w for w in words if w not in STOPWORDS]
    return (content or words)[:limit]


def searched_fields(doc: Document) -> str:
    """The title and the metadata values, as the document gives them."""
    return " ".join([doc.title, *doc.metadata.values()])


def search_text(doc: Document) -> str:
    """What metadata search matches: :func:`searched_fields` as the words they show are searched.
    The indexer's fingerprint tells the two apart, so both read the fields from here."""
    return without_break_hints(searched_fields(doc))


def _begun_outside(older_than: float, or_after: float | None) -> tuple[str, list[float]]:
    """The condition (and its parameters) on a pending write's start: by ``older_than``, or after
    ``or_after`` when given."""
    if or_after is None:
        return "started_at <= ?", [older_than]
    return "(started_at <= ? OR started_at > ?)", [older_than, or_after]


class MetadataStore(GraphQueries, ABC):
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    def snapshot(self) -> AbstractAsyncContextManager[Tx]:
        """Reads only: a consistent view that never takes a write lock (by default a transaction)."""
        return self.transaction()

    async def read_by_key(self, rows: int, read: Callable[[Tx], Awaitable[T]], *, one_statement: bool = False) -> T:
        """``read`` in a snapshot, for reads of about ``rows`` rows by primary key (a store may answer
        small ones more cheaply: see the SQLite store). ``one_statement``: ``read`` runs a single
        statement, consistent by itself."""
        async with self.snapshot() as tx:
            return await read(tx)

    async def read_statement(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement, which is consistent by itself (a store may skip the
        transaction around it: see the SQLite store)."""
        async with self.snapshot() as tx:
            return await tx.fetchall(sql, params)

    def generation(self) -> int | None:
        """A number that changes whenever anything is committed to the store, by this process or
        another; ``None`` when the store cannot tell cheaply (then nothing may be reused on it)."""
        return None

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        """A transaction: committed on normal exit, rolled back on an exception."""

    @abstractmethod
    def _fulltext(self, terms: list[str]) -> tuple[str, str, list[Any]]:
        """Dialect hook: (FROM/JOIN clause, score expression, parameters) matching ``terms``."""

    @abstractmethod
    async def _index_text(self, tx: Tx, doc: Document) -> None:
        """Dialect hook: make ``doc``'s title and metadata searchable."""

    async def search_documents(
        self, query: str, limit: int, access: AccessFilter, document_ids: Sequence[str] = (), *, keep_stopwords: bool = False
    ) -> list[tuple[str, float]]:
        """Full-text search over titles and metadata: ``[(document_id, score)]`` best first.

        The access rule is part of the query: public documents, plus owned or granted ones, or
        everything for SUPER_ADMIN.
        """
        statement = self.search_statement(query, limit, access, document_ids, keep_stopwords=keep_stopwords)
        if statement is None:
            return []
        return [(r[0], float(r[1])) for r in await self.read_statement(*statement)]

    def search_statement(
        self, query: str, limit: int, access: AccessFilter, document_ids: Sequence[str] = (), *, keep_stopwords: bool = False
    ) -> tuple[str, list[Any]] | None:
        """The SQL and parameters of :meth:`search_documents` (None: nothing to search for)."""
        terms = _terms(query, keep_stopwords=keep_stopwords)
        if not terms or limit <= 0:
            return None
        source, score, params = self._fulltext(terms)
        where, wparams = readable_clause(access, document_ids)
        sql = f"SELECT d.document_id, {score} AS s {source}"
        if where:
            sql += (" AND " if " WHERE " in source else " WHERE ") + " AND ".join(where)
        sql += " ORDER BY s DESC, d.document_id LIMIT ?"
        return sql, [*params, *wparams, limit]

    async def ping(self) -> None:
        async with self.snapshot() as tx:
            await tx.fetchall("SELECT 1")

    async def _documents(self, tx: Tx, ids: Sequence[str]) -> dict[str, Document]:
        rows: list[tuple[Any, ...]] = []
        grants: dict[str, list[str]] = {}
        for part in _chunks(list(dict.fromkeys(ids))):
            marks = ",".join("?" * len(part))
            rows += await tx.fetchall(f"SELECT {_DOC_COLUMNS} FROM documents WHERE document_id IN ({marks})", part)
            for doc_id, user_id in await tx.fetchall(
                f"SELECT document_id, user_id FROM grants WHERE document_id IN ({marks}) ORDER BY user_id", part
            ):
                grants.setdefault(doc_id, []).append(user_id)
        # Built for every document of an answer, a hundred at top_k 100: a lookup table instead of
        # the Enum call, and no JSON parse of the usual empty metadata, take the conversion of a
        # hundred rows from 0.5-0.7 to 0.3 ms.
        return {
            r[0]: Document(
                document_id=r[0],
                title=r[1] or "",
                url=r[2] or "",
                source=r[3] or "",
                access=_ACCESS[r[4]],
                owner_id=r[5] or "",
                metadata=json.loads(r[6]) if r[6] and r[6] != "{}" else {},
                content_hash=r[7] or "",
                granted_user_ids=tuple(grants.get(r[0], ())),
            )
            for r in rows
        }

    async def reads_private(self, identity: Identity) -> bool:
        """Whether the caller may read at least one private document (then public answers don't fit them)."""
        if not identity.principals and not identity.reads_everything:
            return False
        where, params = readable_clause(AccessFilter.for_identity(identity))
        sql = "SELECT 1 FROM documents d WHERE d.access = 'private'" + "".join(f" AND {w}" for w in where)
        async with self.snapshot() as tx:
            return bool(await tx.fetchall(sql + " LIMIT 1", params))

    async def document_versions(self, ids: Sequence[str]) -> dict[str, str]:
        """The committed content hash of each stored document among ``ids`` (see :attr:`Document.version`)."""
        if not ids:
            return {}
        unique = list(dict.fromkeys(ids))

        async def read(tx: Tx) -> dict[str, str]:
            out: dict[str, str] = {}
            for part in _chunks(unique):
                marks = ",".join("?" * len(part))
                for doc_id, content_hash in await tx.fetchall(
                    f"SELECT document_id, content_hash FROM documents WHERE document_id IN ({marks})", part
                ):
                    out[doc_id] = content_hash or ""
            return out

        return await self.read_by_key(len(unique), read, one_statement=len(unique) <= IN_CHUNK)

    async def get_documents(self, ids: Sequence[str]) -> dict[str, Document]:
        if not ids:
            return {}
        return await self.read_by_key(len(ids), lambda tx: self._documents(tx, ids))

    async def get_document(self, document_id: str) -> Document | None:
        return (await self.get_documents([document_id])).get(document_id)

    async def replace_document(
        self, doc: Document, parents: Sequence[ParentChunk], graph: DocumentGraph | None = None, *, model: str | None = None
    ) -> bool:
        """Store ``doc`` with exactly ``parents`` (and its knowledge ``graph``); return whether a document was replaced.

        ``model``: the embedding model of the document's vectors, recorded as the index's
        (``embedding_model``) if it has none. Unless the index records it, nothing is stored and
        :class:`WrongModel` is raised: checked in the write's transaction, so that no writer adds
        vectors of another model to an index, whatever the index recorded when the writer started."""
        async with self.transaction() as tx:
            if model is not None:
                # Read first: inserting at every write would lock the row, one writer at a time on MySQL.
                rows = await tx.fetchall("SELECT info_value FROM index_info WHERE info_key = ?", [EMBEDDING_MODEL])
                recorded = rows[0][0] if rows else await self._add_info(tx, EMBEDDING_MODEL, model)
                if recorded != model:
                    raise WrongModel(
                        f"the index records embedding model {recorded}, but this process embeds with {model}: restart it "
                        "to take the index's model, with the RETRIEVAL_MODEL_DIR and RETRIEVAL_MODEL the index was built with"
                    )
            replaced = bool(await tx.fetchall("SELECT 1 FROM documents WHERE document_id = ?", [doc.document_id]))
            shown_before = await self._graph_shown(tx, doc.document_id) if replaced else ()
            # Children and graph rows of the old version go with the document row (ON DELETE CASCADE).
            await tx.execute("DELETE FROM documents WHERE document_id = ?", [doc.document_id])
            await tx.execute(
                f"INSERT INTO documents ({_DOC_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    doc.document_id,
                    doc.title,
                    doc.url,
                    doc.source,
                    doc.access.value,
                    doc.owner_id,
                    json.dumps(doc.metadata, sort_keys=True),
                    doc.content_hash,
                    time.time(),
                ],
            )
            if doc.granted_user_ids:
                await tx.executemany(
                    "INSERT INTO grants (document_id, user_id) VALUES (?, ?)",
                    [(doc.document_id, u) for u in sorted(set(doc.granted_user_ids))],
                )
            await self._index_text(tx, doc)
            if parents:
                await tx.executemany(
                    "INSERT INTO parent_chunks (parent_chunk_id, document_id, chunk_index, content, tokens, page)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(p.parent_chunk_id, p.document_id, p.chunk_index, p.content, p.tokens, p.page) for p in parents],
                )
            await self._write_graph(tx, doc.document_id, graph, shown_before=shown_before)
        return replaced

    async def relocate_document(self, doc: Document, stored_hash: str) -> bool:
        """Store ``doc``'s url, source and content hash over its row whose content hash is
        ``stored_hash``, the rest (its fields, chunks, grants and graph) as they are; return whether
        that row was there. Its version must be the stored one's: the points are left as they are."""
        if version_of(doc.content_hash) != version_of(stored_hash):
            raise ValueError(f"{doc.document_id}: a new version ({version_of(doc.content_hash)}) needs its points written")
        async with self.transaction() as tx:
            return await tx.execute(
                "UPDATE documents SET url = ?, source = ?, content_hash = ?, updated_at = ? WHERE document_id = ? AND content_hash = ?",
                [doc.url, doc.source, doc.content_hash, time.time(), doc.document_id, stored_hash],
            ) > 0

    async def delete_document(self, document_id: str) -> bool:
        """Delete the rows; the same transaction records a pending write until the vectors are gone too."""
        async with self.transaction() as tx:
            await self._record_pending(tx, document_id)
            had_graph = await self._has_graph(tx, document_id)
            deleted = await tx.execute("DELETE FROM documents WHERE document_id = ?", [document_id]) > 0
            if had_graph:
                await self._graph_changed(tx)
            return deleted

    @abstractmethod
    def write_lock(self, document_id: str, *, wait: bool = True) -> AbstractAsyncContextManager[bool]:
        """Held while the document's rows and vectors are written or reconciled, against every
        process writing through this store (shared storage): two writers interleaving their steps
        leave one's rows with the other's points. Waits for the holder (cancellably), or with
        ``wait`` false yields False at once while another holds it; yields True once held. A
        holder that dies (its process, or its connection) lets it go. Callers in one process
        serialize first: the lock is not reentrant."""

    # Write-ahead intents: a document whose vectors may disagree with its rows (a write in flight, or
    # one a crash interrupted). Recovery makes the vectors match the committed rows, then clears it.

    async def begin_write(self, document_id: str) -> float:
        """Record the intent; returns its start, which :meth:`end_write` takes to clear this one only."""
        async with self.transaction() as tx:
            return await self._record_pending(tx, document_id)

    async def end_write(self, document_id: str, begun: float | None = None) -> None:
        """Clear the document's intent; with ``begun`` (its start), only while it is that one: a writer
        that clears its intents after letting the document's lock go (once its vectors are synced)
        must not clear the intent of a write begun since, which may be in flight or abandoned."""
        sql, params = "DELETE FROM pending_writes WHERE document_id = ?", [document_id]
        if begun is not None:
            sql, params = sql + " AND started_at = ?", [document_id, begun]
        async with self.transaction() as tx:
            await tx.execute(sql, params)

    async def pending_since(self, document_id: str) -> float | None:
        """When the document's pending write began (what :meth:`end_write` takes); None without one."""
        async with self.snapshot() as tx:
            rows = await tx.fetchall("SELECT started_at FROM pending_writes WHERE document_id = ?", [document_id])
        return float(rows[0][0]) if rows else None

    async def has_pending_write(self, document_id: str, older_than: float | None = None, or_after: float | None = None) -> bool:
        """Whether the document's vectors may disagree with its rows (a write in flight, or one left
        unfinished); only a write begun before ``older_than`` (epoch seconds), or after
        ``or_after``, when given."""
        sql, params = "SELECT 1 FROM pending_writes WHERE document_id = ?", [document_id]
        if older_than is not None:
            begun, bounds = _begun_outside(older_than, or_after)
            sql, params = f"{sql} AND {begun}", [document_id, *bounds]
        async with self.snapshot() as tx:
            return bool(await tx.fetchall(sql, params))

    async def pending_writes(self, older_than: float | None = None, or_after: float | None = None) -> list[str]:
        """Documents with a pending write, oldest first; only those begun before ``older_than``
        (epoch seconds), or after ``or_after``, when given."""
        sql, params = "SELECT document_id FROM pending_writes", []
        if older_than is not None:
            begun, params = _begun_outside(older_than, or_after)
            sql = f"{sql} WHERE {begun}"
        async with self.snapshot() as tx:
            return [r[0] for r in await tx.fetchall(sql + " ORDER BY started_at, document_id", params)]

    @staticmethod
    async def _record_pending(tx: Tx, document_id: str) -> float:
        started = time.time()
        await tx.execute("DELETE FROM pending_writes WHERE document_id = ?", [document_id])
        await tx.execute("INSERT INTO pending_writes (document_id, started_at) VALUES (?, ?)", [document_id, started])
        return started

    async def get_parents_and_documents(self, parent_ids: Sequence[str]) -> tuple[dict[str, ParentChunk], dict[str, Document]]:
        """The requested parents and their documents, read in one snapshot.

        Read apart, a replacement committing between the two reads pairs the old version's parent
        text with the new version's document: its version (which the new points' hits match) and
        its access (a document made public would carry its private text to everyone)."""
        if not parent_ids:
            return {}, {}
        unique = list(dict.fromkeys(parent_ids))

        async def read(tx: Tx) -> tuple[dict[str, ParentChunk], dict[str, Document]]:
            parents: dict[str, ParentChunk] = {}
            for part in _chunks(unique):
                marks = ",".join("?" * len(part))
                for r in await tx.fetchall(
                    "SELECT parent_chunk_id, document_id, chunk_index, content, tokens, page"
                    f" FROM parent_chunks WHERE parent_chunk_id IN ({marks})",
                    part,
                ):
                    parents[r[0]] = ParentChunk(r[0], r[1], int(r[2]), r[3], int(r[4]), int(r[5] or 0))
            return parents, await self._documents(tx, [p.document_id for p in parents.values()])

        # Sized by the parents: they have at most as many documents.
        return await self.read_by_key(len(unique), read)

    async def count_documents(self) -> int:
        async with self.snapshot() as tx:
            return int((await tx.fetchall("SELECT COUNT(*) FROM documents"))[0][0])

    async def list_document_ids(self) -> list[str]:
        async with self.snapshot() as tx:
            return [r[0] for r in await tx.fetchall("SELECT document_id FROM documents ORDER BY document_id")]

    async def get_info(self, key: str) -> str | None:
        async with self.snapshot() as tx:
            rows = await tx.fetchall("SELECT info_value FROM index_info WHERE info_key = ?", [key])
        return rows[0][0] if rows else None

    async def set_info(self, key: str, value: str) -> None:
        async with self.transaction() as tx:
            await tx.execute(self.UPSERT_INFO, [key, value])

    async def add_info(self, key: str, value: str) -> str:
        """Record ``value`` unless ``key`` has one already; the value recorded, this one or the
        earlier. The first writer wins: of processes starting at once, each learns what the
        others see, where reading then writing let the last one win unknown to the others."""
        async with self.transaction() as tx:
            return await self._add_info(tx, key, value)

    async def _add_info(self, tx: Tx, key: str, value: str) -> str:
        await tx.execute(self.INSERT_INFO, [key, value])
        return str((await tx.fetchall(self.READ_INFO_NOW, [key]))[0][0])
