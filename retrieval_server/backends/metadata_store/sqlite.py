"""Embedded default: SQLite in the data directory (WAL mode, foreign keys on)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from retrieval_server.backends.metadata_store import MetadataStore, Tx, _terms, search_text
from retrieval_server.backends.metadata_store.file_lock import file_lock
from retrieval_server.backends.metadata_store.sql import readable_clause
from retrieval_server.backends.metadata_store.wal_index import WalIndexHeader
from retrieval_server.domain import AccessFilter, Document, ReadOnly, Unavailable
from retrieval_server.stale_runs import own_folder

T = TypeVar("T")

#: a private copy of the database and its WAL in the temporary directory: this, the pid, "-", a random part
READ_COPY_PREFIX = "retrieval-readonly-metadata-"
#: full-text matches wanted from the ranking before the access filter, per result (see search_documents)
RANK_AHEAD = 4
#: the ranking fetches this many times the matches wanted: room for a tie at the cut (see exact_prefix)
TIE_ROOM = 2
#: primary-key reads of at most this many rows run on the event loop's own connection (see
#: read_by_key): enough for what ``enrich`` reads at the default top_k_max (100 parents, then their
#: documents). Each row is built into Python objects under the GIL wherever it is read, so a reader
#: thread spares the loop only SQLite's own part, and costs hops and GIL hand-overs: on the 2-core
#: machine 100 parents took 2.2-3.9 ms through a reader against 1.3-1.5 ms here (pages in the OS
#: cache, as a serving index's are). The bound keeps one read's stall of the loop to a
#: millisecond or two.
INLINE_MAX_ROWS = 128


def exact_prefix(ranked: Sequence[Sequence[Any]], wanted: int) -> tuple[Sequence[Sequence[Any]], bool]:
    """The rows of :meth:`SqliteMetadataStore.ranked_search_statement` (``(document_id, score,
    ...)``, in its order: score descending, then document id; ``wanted`` asked for) that are in
    their place in the order of every match, and whether they are every match.

    The fetch was cut by score and rowid: rows tied with its last score may have been left out,
    and one of them may sort before a fetched one by document id. Rows scoring above the last
    score are all fetched, and they precede every row left out. The extra rows (``TIE_ROOM``)
    leave room for ties: in the first 600 queries of SciFact and of NFCorpus no tie reached past
    them. A tie that does makes the caller fall back to the plain statement, one more statement."""
    if len(ranked) < TIE_ROOM * wanted:
        return ranked, True
    last = ranked[-1][1]
    return [r for r in ranked if r[1] > last], False


def exact_answer(ranked: Sequence[Sequence[Any]], limit: int) -> list[tuple[str, float]] | None:
    """The plain search's answer from the rows of :meth:`SqliteMetadataStore.ranked_search_statement`,
    or None when they do not settle it. Readable rows outside their sure prefix rank below all of
    it, so at least ``limit`` readable rows in it (or every match in it) are the answer."""
    sure, complete = exact_prefix(ranked, RANK_AHEAD * limit)
    kept = [(r[0], float(r[1])) for r in sure if r[2]]
    return kept[:limit] if len(kept) >= limit or complete else None


#: A document's full-text row goes with it (a replace inserts the new version's): by rowid, a
#: lookup. A row an earlier release wrote (after a rollback, or beside this one during an update)
#: has no fts_rowid: it is found by a scan, as that release found it; without this, its text stayed
#: searchable under the document's id after a replace, and for good after a delete.
FTS_DELETE_TRIGGER = """CREATE TRIGGER IF NOT EXISTS documents_fts_delete AFTER DELETE ON documents BEGIN
  DELETE FROM documents_fts WHERE rowid = old.fts_rowid;
  DELETE FROM documents_fts WHERE old.fts_rowid IS NULL AND document_id = old.document_id;
END"""

DDL = """
CREATE TABLE IF NOT EXISTS documents (
  document_id TEXT PRIMARY KEY,
  title TEXT NOT NULL DEFAULT '',
  url TEXT NOT NULL DEFAULT '',
  source TEXT NOT NULL DEFAULT '',
  access TEXT NOT NULL,
  owner_id TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  content_hash TEXT NOT NULL DEFAULT '',
  updated_at REAL NOT NULL,
  -- The rowid of the document's row of documents_fts, which is deleted by it: found by document_id
  -- (a column FTS5 cannot index) it took a scan of every title on every replace and delete. A
  -- column of its own: VACUUM may renumber the implicit rowid of a table keyed by text.
  fts_rowid INTEGER
);
CREATE TABLE IF NOT EXISTS parent_chunks (
  parent_chunk_id TEXT PRIMARY KEY,
  document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
  chunk_index INTEGER NOT NULL,
  content TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  page INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS parent_chunks_document ON parent_chunks(document_id);
CREATE TABLE IF NOT EXISTS grants (
  document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
  user_id TEXT NOT NULL,
  PRIMARY KEY (document_id, user_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
  document_id UNINDEXED, text, tokenize = 'porter unicode61'
);
""" + FTS_DELETE_TRIGGER + """;
CREATE TABLE IF NOT EXISTS index_info (
  info_key TEXT PRIMARY KEY,
  info_value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_writes (
  document_id TEXT PRIMARY KEY,
  started_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_owner ON documents(owner_id);
-- Whether a document is readable, without a read of its row: every access-filtered join of the
-- graph reads it once per row joined (a thousand for a common entity).
CREATE INDEX IF NOT EXISTS documents_readable ON documents(document_id, access, owner_id);
CREATE INDEX IF NOT EXISTS grants_user ON grants(user_id);
CREATE TABLE IF NOT EXISTS graph_entities (
  document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
  entity_key TEXT NOT NULL,
  name TEXT NOT NULL,
  entity_type TEXT NOT NULL,
  mentions INTEGER NOT NULL,
  PRIMARY KEY (document_id, entity_key)
);
CREATE INDEX IF NOT EXISTS graph_entities_key ON graph_entities(entity_key);
CREATE TABLE IF NOT EXISTS graph_mentions (
  document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
  entity_key TEXT NOT NULL,
  chunk_id TEXT NOT NULL,
  mentions INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (document_id, entity_key, chunk_id)
);
-- An entity's mentions in the order graph_chunks reads them (most first), so that it reads only
-- the few it keeps; by its first column, it also serves every look-up by key.
CREATE INDEX IF NOT EXISTS graph_mentions_rank ON graph_mentions(entity_key, mentions DESC, document_id, chunk_id);
DROP INDEX IF EXISTS graph_mentions_key;
CREATE TABLE IF NOT EXISTS graph_edges (
  document_id TEXT NOT NULL REFERENCES documents(document_id) ON DELETE CASCADE,
  source_key TEXT NOT NULL,
  target_key TEXT NOT NULL,
  relation TEXT NOT NULL,
  weight REAL NOT NULL,
  evidence TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (document_id, source_key, target_key, relation)
);
CREATE INDEX IF NOT EXISTS graph_edges_source ON graph_edges(source_key);
CREATE INDEX IF NOT EXISTS graph_edges_target ON graph_edges(target_key);
"""


async def _begin(conn: aiosqlite.Connection, statement: str) -> None:
    """Start a transaction, ending one that a cancelled caller left open.

    A task cancelled while awaiting BEGIN still has its BEGIN run on the connection's thread, so
    the next caller can find a transaction open. It was never committed: rolling it back loses
    nothing, and checking here (in statement order) cannot race with the cancelled statements.
    """
    try:
        await conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if "within a transaction" not in str(exc):
            raise
        await conn.execute("ROLLBACK")
        await conn.execute(statement)


class _SqliteTx:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cur = await self._conn.execute(sql, params)
        return cur.rowcount

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # One hop to the connection's thread instead of two (execute, then fetch).
        return [tuple(r) for r in await self._conn.execute_fetchall(sql, params)]


class _InlineTx:
    """Reads on a connection of the event loop's thread: each statement runs to completion at once."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise ReadOnly("an inline read does not write")

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise ReadOnly("an inline read does not write")

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._conn.execute(sql, params).fetchall()]


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is not a database, or a damaged one (not busy, not locked)."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


class SqliteMetadataStore(MetadataStore):
    UPSERT_INFO = "INSERT INTO index_info (info_key, info_value) VALUES (?, ?) ON CONFLICT (info_key) DO UPDATE SET info_value = excluded.info_value"
    INSERT_INFO = "INSERT INTO index_info (info_key, info_value) VALUES (?, ?) ON CONFLICT (info_key) DO NOTHING"
    # A write transaction holds the database: what it reads is what is committed.
    READ_INFO_NOW = "SELECT info_value FROM index_info WHERE info_key = ?"

    def __init__(self, path: Path | str, readers: int = 2, read_only: bool = False) -> None:
        self._path = path
        self._read_only = read_only
        self._conn: aiosqlite.Connection | None = None
        # One writer connection: transactions take turns instead of interleaving on it.
        self._lock = asyncio.Lock()
        # Reads go to their own connections: under WAL they neither wait for a writer nor take
        # the write lock (which, with several server processes on one file, would serialize them).
        self._reader_count = readers
        self._readers: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._all_readers: list[aiosqlite.Connection] = []
        self._inline: sqlite3.Connection | None = None
        self._wal_index: WalIndexHeader | None = None
        #: the private copy a read-only store on a read-only volume reads from, when it has a WAL
        self._copy_dir: Path | None = None

    async def open(self) -> None:
        source = self._path  # a read-only copy takes its place as it opens
        try:
            try:
                await self._open()
            except sqlite3.Error as exc:
                if not _damaged(exc):
                    raise
                # SQLite names no file: "file is not a database" alone left the folder to guess.
                raise Unavailable(f"the metadata file {source} is not a SQLite database, or is damaged ({exc}): "
                                  "use a new RETRIEVAL_DATA_DIR for the service to create its index in") from exc
        except BaseException:
            await self.close()  # no connection thread may outlive a failed open
            raise

    async def _open(self) -> None:
        if self._read_only:
            await self._open_readers(self._read_only_uri(), uri=True)
            return
        if isinstance(self._path, Path):
            self._path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = await aiosqlite.connect(str(self._path), isolation_level=None)
        await self._conn.execute("PRAGMA journal_mode=WAL")
        await self._conn.execute("PRAGMA foreign_keys=ON")
        await self._conn.execute("PRAGMA busy_timeout=5000")
        await self._conn.executescript(DDL)
        await self._add_fts_rowids(self._conn)
        if str(self._path) != ":memory:":  # a second connection to :memory: would be another database
            await self._open_readers(str(self._path), uri=False)

    async def _fts_current(self, conn: aiosqlite.Connection | Tx) -> bool:
        """Whether documents has ``fts_rowid`` and the delete trigger is this release's."""
        fetch = conn.execute_fetchall if isinstance(conn, aiosqlite.Connection) else conn.fetchall
        columns = await fetch("PRAGMA table_info(documents)")
        trigger = await fetch("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'documents_fts_delete'")
        return any(c[1] == "fts_rowid" for c in columns) and [r[0] for r in trigger] == [FTS_DELETE_TRIGGER.replace(" IF NOT EXISTS", "")]

    async def _add_fts_rowids(self, conn: aiosqlite.Connection) -> None:
        """A database made before ``documents.fts_rowid`` gets it: the rowids are read in one pass
        over documents_fts (a look-up by document id there is a scan), and the trigger deletes by
        them; an older trigger is replaced."""
        if await self._fts_current(conn):
            return
        async with self.transaction() as tx:
            # Again inside the write lock: another process opening the same file may have just done it.
            if await self._fts_current(tx):
                return
            if not any(c[1] == "fts_rowid" for c in await tx.fetchall("PRAGMA table_info(documents)")):
                await tx.execute("ALTER TABLE documents ADD COLUMN fts_rowid INTEGER")
                rows = await tx.fetchall("SELECT rowid, document_id FROM documents_fts")
                await tx.executemany("UPDATE documents SET fts_rowid = ? WHERE document_id = ?", rows)
            await tx.execute("DROP TRIGGER IF EXISTS documents_fts_delete")
            await tx.execute(FTS_DELETE_TRIGGER)

    def _read_only_uri(self) -> str:
        path = Path(self._path).absolute()
        if not path.is_file():
            raise Unavailable(f"no index at {path.parent} to serve read-only: ingest into it first")
        if os.access(path.parent, os.W_OK):
            return f"{path.as_uri()}?mode=ro"
        # On a read-only volume SQLite cannot create the WAL's shared-memory file, and so cannot read
        # the WAL. Without one (a writer that closed checkpointed it) nothing can change the file
        # there, and it is opened as immutable; with one (a writer stopped uncleanly), its commits
        # are only there: the database and its WAL are read from a private copy. Immutable, the
        # server had served an older state, or no tables at all.
        wal = path.with_name(path.name + "-wal")
        if not (wal.is_file() and wal.stat().st_size):
            return f"{path.as_uri()}?mode=ro&immutable=1"
        self._copy_dir = own_folder(READ_COPY_PREFIX)
        try:
            for source in (path, wal):
                shutil.copyfile(source, self._copy_dir / source.name)
        except OSError as exc:
            raise Unavailable(f"cannot copy {path} and its write-ahead log to read them: {exc.strerror or exc}") from None
        self._path = self._copy_dir / path.name
        return f"{self._path.as_uri()}?mode=ro"

    async def _open_readers(self, database: str, uri: bool) -> None:
        for _ in range(self._reader_count):
            reader = await aiosqlite.connect(database, isolation_level=None, uri=uri)
            self._all_readers.append(reader)
            self._readers.put_nowait(reader)
            await reader.execute("PRAGMA query_only=ON")
            await reader.execute("PRAGMA busy_timeout=5000")
        # Never waits for a lock (busy_timeout 0): the event loop must not block. Under WAL a reader
        # is refused only in rare moments (recovery, a writer in exclusive mode); then the read
        # goes to a reader thread instead.
        self._inline = sqlite3.connect(database, isolation_level=None, uri=uri)
        self._inline.execute("PRAGMA query_only=ON")
        self._inline.execute("PRAGMA busy_timeout=0")
        # A read, so that this process's SQLite has mapped the wal-index before it is looked for;
        # refused (busy_timeout 0: another process recovering the database), the PRAGMA serves.
        try:
            self._inline.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error as exc:
            if _damaged(exc):
                raise  # the first read of a read-only store: served, every query would fail
            return
        self._wal_index = WalIndexHeader.open(Path(self._path).absolute())

    async def close(self) -> None:
        if self._wal_index is not None:
            wal_index, self._wal_index = self._wal_index, None
            wal_index.close()
        if self._inline is not None:
            inline, self._inline = self._inline, None
            inline.close()
        readers, self._all_readers = self._all_readers, []
        for _ in readers:
            await (await self._readers.get()).close()  # waits for reads in flight to hand theirs back
        if self._conn is not None:
            conn, self._conn = self._conn, None
            async with self._lock:
                await conn.close()
        if self._copy_dir is not None:
            copy_dir, self._copy_dir = self._copy_dir, None
            shutil.rmtree(copy_dir, ignore_errors=True)

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Tx]:
        if not self._all_readers:
            async with self.transaction() as tx:
                yield tx
            return
        reader = await self._readers.get()
        try:
            await _begin(reader, "BEGIN")  # deferred: a consistent view across statements, no lock taken
            try:
                yield _SqliteTx(reader)
            finally:
                await reader.execute("COMMIT")
        finally:
            self._readers.put_nowait(reader)

    async def read_by_key(self, rows: int, read: Callable[[Tx], Awaitable[T]], *, one_statement: bool = False) -> T:
        """Small primary-key reads on the event loop's own connection: a thread hop to a reader
        costs more than the lookup itself (a cache hit's version check is one). ``read`` only
        fetches, so it completes without suspending: nothing can interleave on the connection.
        A single statement needs no transaction around it (it is one by itself)."""
        conn = self._inline
        if conn is None or rows > INLINE_MAX_ROWS:
            return await super().read_by_key(rows, read, one_statement=one_statement)
        try:
            if one_statement:
                return await read(_InlineTx(conn))
            conn.execute("BEGIN")
            try:
                return await read(_InlineTx(conn))
            finally:
                conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return await super().read_by_key(rows, read, one_statement=one_statement)

    def generation(self) -> int | None:
        """Changes whenever any connection (this process's writer, or another process's) commits:
        the wal-index header in shared memory where it can be read (see
        :mod:`~retrieval_server.backends.metadata_store.wal_index`), else SQLite's ``PRAGMA
        data_version`` on the event loop's connection (a read transaction: two ``fcntl`` calls)."""
        if self._inline is None:
            return None
        if self._wal_index is not None:
            return self._wal_index.read()
        try:
            return int(self._inline.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            return None

    def ranked_search_statement(
        self, query: str, limit: int, access: AccessFilter, *, keep_stopwords: bool = False
    ) -> tuple[str, list[Any]] | None:
        """The best ``RANK_AHEAD x limit`` full-text matches by score alone, readable or not, and
        more (``TIE_ROOM`` times as many in all), each as ``(document_id, score, readable by the
        caller)``, ordered by score and document id; None when there is nothing to search for.
        :func:`exact_answer` reads the answer from them.

        They are ranked by score and rowid, and only the ones kept get their document id: the id
        is a column of the full-text table, read from its content table row by row, and reading
        it for every match (thousands when a query has a common word) was 40 % of the search
        (SciFact's queries: 13.2 against 7.9 ms)."""
        terms = _terms(query, keep_stopwords=keep_stopwords)
        if not terms or limit <= 0:
            return None
        _, score, params = self._fulltext(terms)
        where, access_params = readable_clause(access)
        readable = " AND ".join(["d.document_id = f.document_id", *where])
        best = f"SELECT rowid AS id, {score} AS s FROM documents_fts WHERE documents_fts MATCH ? ORDER BY s DESC, rowid LIMIT ?"
        return (
            f"SELECT f.document_id, b.s, EXISTS (SELECT 1 FROM documents d WHERE {readable})"
            f" FROM ({best}) b JOIN documents_fts f ON f.rowid = b.id ORDER BY b.s DESC, f.document_id",
            [*access_params, *params, TIE_ROOM * RANK_AHEAD * limit],  # in the order of the ?s in the text
        )

    async def search_documents(
        self, query: str, limit: int, access: AccessFilter, document_ids: Sequence[str] = (), *, keep_stopwords: bool = False
    ) -> list[tuple[str, float]]:
        """The same answer as the plain search (the base class's one statement), cheaper: the best
        matches by score alone, each with whether the caller may read it
        (:meth:`ranked_search_statement`). FTS5 scores every match either way (thousands of
        titles when a query has common words); the join and the access check of each are what
        this saves (a quarter of the search on SciFact). When they do not settle the answer
        (:func:`exact_answer`), the plain search gives it."""
        statement = None if document_ids else self.ranked_search_statement(query, limit, access, keep_stopwords=keep_stopwords)
        if statement is not None:
            answer = exact_answer(await self.read_statement(*statement), limit)
            if answer is not None:
                return answer
        return await super().search_documents(query, limit, access, document_ids, keep_stopwords=keep_stopwords)

    async def read_statement(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """On a reader with no transaction around it: one hop to the reader's thread instead of a
        snapshot's three (BEGIN, the statement, COMMIT). Each hop waits for the GIL, which
        qdrant-edge holds through a whole search (a HYBRID query's full-text search and graph
        reads run beside its vector searches)."""
        if not self._all_readers:
            async with self.snapshot() as tx:
                return await tx.fetchall(sql, params)
        reader = await self._readers.get()
        try:
            if reader.in_transaction:  # left open by a snapshot whose caller was cancelled (see _begin)
                # Seen from the event loop, not in statement order: that snapshot's COMMIT may still
                # be queued on the reader's thread and end it first.
                with contextlib.suppress(sqlite3.OperationalError):
                    await reader.execute("ROLLBACK")
            return [tuple(r) for r in await reader.execute_fetchall(sql, params)]
        finally:
            self._readers.put_nowait(reader)

    def _fulltext(self, terms: list[str]) -> tuple[str, str, list[Any]]:
        # FTS5 bm25() is lower-is-better; OR over quoted terms never hits FTS query syntax.
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        source = "FROM documents_fts f JOIN documents d ON d.document_id = f.document_id WHERE documents_fts MATCH ?"
        return source, "-bm25(documents_fts)", [match]

    async def _index_text(self, tx: Tx, doc: Document) -> None:
        # The old version's row went with its documents row (FTS_DELETE_TRIGGER).
        await tx.execute("INSERT INTO documents_fts (document_id, text) VALUES (?, ?)", [doc.document_id, search_text(doc)])
        await tx.execute("UPDATE documents SET fts_rowid = last_insert_rowid() WHERE document_id = ?", [doc.document_id])

    @asynccontextmanager
    async def write_lock(self, document_id: str, *, wait: bool = True) -> AsyncIterator[bool]:
        # Server processes on one host can share the file (a Qdrant server holding the vectors).
        if self._read_only:
            raise ReadOnly("the metadata store is open read-only")
        if str(self._path) == ":memory:":  # a database of one connection: one process
            yield True
            return
        # Beside the file itself, however it is reached (a link, a relative path).
        async with file_lock(Path(f"{Path(self._path).resolve()}.write-lock"), document_id, wait=wait) as held:
            yield held

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        if self._read_only:
            raise ReadOnly("the metadata store is open read-only")
        if self._conn is None:
            raise Unavailable("metadata store is not open")
        async with self._lock:
            await _begin(self._conn, "BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._conn)
            except BaseException:
                # SQLite ends the transaction itself on some errors (a full disk, an I/O error): a
                # ROLLBACK then fails, and its error would take the place of the one that ended it.
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise
            else:
                await self._conn.execute("COMMIT")
