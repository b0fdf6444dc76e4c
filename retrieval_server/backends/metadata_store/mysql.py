"""Production: MySQL or MariaDB through an asyncmy connection pool."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncmy
from asyncmy import errors

from retrieval_server.backends.metadata_store import MetadataStore, Tx, search_text
from retrieval_server.domain import Document, ReadOnly, TimedOut, Unavailable

log = logging.getLogger(__name__)

DDL = (
    """CREATE TABLE IF NOT EXISTS documents (
  document_id VARCHAR(255) NOT NULL PRIMARY KEY,
  title TEXT NOT NULL,
  url TEXT NOT NULL,
  source TEXT NOT NULL,
  access VARCHAR(16) NOT NULL,
  owner_id VARCHAR(255) NOT NULL DEFAULT '',
  metadata LONGTEXT NOT NULL,
  content_hash VARCHAR(64) NOT NULL DEFAULT '',
  updated_at DOUBLE NOT NULL,
  search_text TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci,
  KEY documents_owner (owner_id),
  FULLTEXT KEY documents_search (search_text)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS parent_chunks (
  parent_chunk_id VARCHAR(255) NOT NULL PRIMARY KEY,
  document_id VARCHAR(255) NOT NULL,
  chunk_index INT NOT NULL,
  content MEDIUMTEXT NOT NULL,
  tokens INT NOT NULL,
  page INT NOT NULL DEFAULT 0,
  KEY parent_chunks_document (document_id),
  CONSTRAINT fk_parent_document FOREIGN KEY (document_id) REFERENCES documents(document_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS grants (
  document_id VARCHAR(255) NOT NULL,
  user_id VARCHAR(255) NOT NULL,
  PRIMARY KEY (document_id, user_id),
  KEY grants_user (user_id),
  CONSTRAINT fk_grant_document FOREIGN KEY (document_id) REFERENCES documents(document_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS pending_writes (
  document_id VARCHAR(255) NOT NULL PRIMARY KEY,
  started_at DOUBLE NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS index_info (
  info_key VARCHAR(255) NOT NULL PRIMARY KEY,
  info_value TEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS graph_entities (
  document_id VARCHAR(255) NOT NULL,
  entity_key VARCHAR(191) NOT NULL,
  name VARCHAR(255) NOT NULL,
  entity_type VARCHAR(32) NOT NULL,
  mentions INT NOT NULL,
  PRIMARY KEY (document_id, entity_key),
  KEY graph_entities_key (entity_key),
  CONSTRAINT fk_graph_entity_document FOREIGN KEY (document_id) REFERENCES documents(document_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS graph_mentions (
  document_id VARCHAR(255) NOT NULL,
  entity_key VARCHAR(191) NOT NULL,
  chunk_id VARCHAR(255) NOT NULL,
  mentions INT NOT NULL DEFAULT 1,
  PRIMARY KEY (document_id, entity_key, chunk_id),
  KEY graph_mentions_rank (entity_key, mentions DESC, document_id, chunk_id),
  CONSTRAINT fk_graph_mention_document FOREIGN KEY (document_id) REFERENCES documents(document_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
    """CREATE TABLE IF NOT EXISTS graph_edges (
  document_id VARCHAR(255) NOT NULL,
  source_key VARCHAR(191) NOT NULL,
  target_key VARCHAR(191) NOT NULL,
  relation VARCHAR(32) NOT NULL,
  weight DOUBLE NOT NULL,
  evidence TEXT NOT NULL,
  PRIMARY KEY (document_id, source_key, target_key, relation),
  KEY graph_edges_source (source_key),
  KEY graph_edges_target (target_key),
  CONSTRAINT fk_graph_edge_document FOREIGN KEY (document_id) REFERENCES documents(document_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin""",
)


def _sql(sql: str) -> str:
    # The shared queries use '?'; asyncmy takes the 'format' paramstyle. None of them has a literal '%' or '?'.
    return sql.replace("?", "%s")


class _MysqlTx:
    def __init__(self, cursor: Any) -> None:
        self._cur = cursor

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(await self._cur.execute(_sql(sql), tuple(params)))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._cur.executemany(_sql(sql), [tuple(r) for r in rows])

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        await self._cur.execute(_sql(sql), tuple(params))
        return [tuple(r) for r in await self._cur.fetchall()]


def parse_dsn(dsn: str) -> dict[str, Any]:
    """``mysql://user:pass@host:port/db[?ssl_ca=/path/ca.pem]`` as asyncmy connection arguments.
    With ``ssl_ca``, TLS: the server's certificate and name are verified with that PEM CA bundle."""
    u = urlsplit(dsn)
    if not u.path.strip("/"):
        raise ValueError("mysql_dsn needs a database name: mysql://user:pass@host:port/db")
    # A parameter not known here was dropped without a word (?ssl=true connected in plaintext).
    # Named, never quoted with its value: the DSN holds the password.
    # Percent-decoded only: read as a form (parse_qsl), a '+' in ssl_ca's path became a space.
    fields = [field.partition("=") for field in u.query.split("&") if field]
    query = [(unquote(name), unquote(value)) for name, _, value in fields]
    if unknown := sorted({name for name, _ in query} - {"ssl_ca"}):
        raise ValueError(f"mysql_dsn has query parameters it does not know: {', '.join(unknown)} "
                         "(the one it knows: ssl_ca=/path/to/ca.pem, for TLS)")
    options = dict(query)
    if len(options) < len(query):
        raise ValueError("mysql_dsn gives ssl_ca more than once")
    args: dict[str, Any] = {
        "host": u.hostname or "127.0.0.1",
        "port": u.port or 3306,
        "user": unquote(u.username or "root"),
        "password": unquote(u.password or ""),
        "db": u.path.strip("/"),
    }
    if "ssl_ca" in options:
        # An empty cafile would load the system's CAs instead of failing.
        if not (ca := options["ssl_ca"]):
            raise ValueError("mysql_dsn's ssl_ca is empty: give the path of the PEM CA bundle that signed the server's certificate")
        try:
            args["ssl"] = ssl.create_default_context(cafile=ca)
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"mysql_dsn's ssl_ca '{ca}' cannot be read as a PEM CA bundle: {exc}") from None
    return args


def _timed_out(exc: BaseException) -> bool:
    """Whether the server let a timeout pass: asyncmy reports its read and connect timeouts as
    errors whose message says so ("Lost connection to MySQL server during query (read timeout)")."""
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError and socket.timeout are aliases of it
        return True
    message = str(exc).lower()
    return "timeout" in message or "timed out" in message


#: how often a held write lock's session is used (kept from proxies' idle timeouts, and checked)
LOCK_KEEPALIVE_S = 30.0
#: the idle timeout of the sessions that hold write locks (the server's maximum is a year)
LOCK_SESSION_IDLE_S = 7 * 24 * 3600
#: what a call that could not reach the server raises
_CONNECTION_ERRORS = (errors.OperationalError, errors.InterfaceError, OSError, asyncio.TimeoutError)


async def _ask_lock_session(conn: Any, sql: str, name: str, document_id: str) -> Any:
    """The one value ``sql`` answers about the lock ``name`` on the session holding it; None when
    the session cannot answer (it ended: a restart, a network failure, an idle timeout)."""
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql, (name,))
            (value,) = await cur.fetchone()
        return value
    except Exception:
        log.debug("the session of the write lock of %s did not answer", document_id, exc_info=True)
        return None


class MysqlMetadataStore(MetadataStore):
    UPSERT_INFO = "INSERT INTO index_info (info_key, info_value) VALUES (?, ?) ON DUPLICATE KEY UPDATE info_value = VALUES(info_value)"
    # Not INSERT IGNORE, which would pass over any other error of the row (a value too long) as well.
    INSERT_INFO = "INSERT INTO index_info (info_key, info_value) VALUES (?, ?) ON DUPLICATE KEY UPDATE info_value = info_value"
    READ_INFO_NOW = "SELECT info_value FROM index_info WHERE info_key = ? FOR UPDATE"

    def __init__(self, dsn: str, pool_size: int = 8, read_only: bool = False, timeout_s: float = 10.0) -> None:
        # A server that stops answering (frozen, partitioned) must fail a call, not hang it: asyncmy
        # closes a connection whose read times out, and the pool drops it.
        self._args = {**parse_dsn(dsn), "connect_timeout": timeout_s, "read_timeout": timeout_s}
        self._timeout_s = timeout_s
        self._pool_size = pool_size
        self._read_only = read_only
        self._pool: Any = None
        #: connections that hold the documents' write locks (a lock lives as long as its session)
        self._lock_pool: Any = None
        self._lock_slots: asyncio.Semaphore | None = None
        #: whether writes run at READ COMMITTED (not where the binary log records statements)
        self._read_committed = True

    async def open(self) -> None:
        try:
            # Snapshots need REPEATABLE READ, which a server may not default to (READ COMMITTED
            # is a common setting): there a read of parents and then their documents paired an old
            # private text with a new public document. Writes lower it per transaction.
            self._pool = await asyncmy.create_pool(
                minsize=1, maxsize=self._pool_size, autocommit=False, charset="utf8mb4",
                init_command="SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", **self._args,
            )
        except Exception as exc:
            raise Unavailable(f"MySQL is unreachable at {self._args['host']}:{self._args['port']}: {exc}") from exc
        if self._read_only:
            return  # a read-only account cannot create tables; the schema is the writer's job
        async with self.snapshot() as tx:
            [(binary_log, log_format)] = await tx.fetchall("SELECT @@log_bin, @@binlog_format")
        if binary_log and str(log_format).upper() == "STATEMENT":
            # Such a log refuses writes at READ COMMITTED (error 1665): they stay at REPEATABLE READ.
            self._read_committed = False
            log.warning("MySQL logs statements (binlog_format=STATEMENT): writes run at REPEATABLE READ, where writers of new"
                        " documents at once can deadlock each other; MIXED or ROW lets them run at READ COMMITTED")
        async with self.transaction() as tx:
            # The server notes each thing that already exists, and asyncmy logs every note as a
            # warning: ten lines on each open. Notes are off for these statements only; warnings stay.
            await tx.execute("SET @retrieval_sql_notes = @@session.sql_notes, SESSION sql_notes = 0")
            # The full-text index is created without InnoDB's stopword list, which holds words such
            # as "com", "und" and "www" that SQLite's finds: the terms searched leave out stopwords
            # of their own (``_terms``). An index keeps the list it was created with, whatever the
            # sessions that write and read it later.
            await tx.execute("SET @retrieval_ft_stopword = @@session.innodb_ft_enable_stopword, SESSION innodb_ft_enable_stopword = 0")
            try:
                for stmt in DDL:
                    await tx.execute(stmt)
                await self._migrate_indexes(tx)
            finally:
                await tx.execute("SET SESSION sql_notes = @retrieval_sql_notes, SESSION innodb_ft_enable_stopword = @retrieval_ft_stopword")
        # Apart from the transactions' pool: writers holding every connection of one pool while
        # their transactions wait for another would deadlock it. At most ``pool_size`` documents
        # are written at once by this process. A held lock's session must outlive the server's
        # idle timeout (8 h by default, often less), whatever the write takes.
        self._lock_pool = await asyncmy.create_pool(
            minsize=0, maxsize=self._pool_size, autocommit=True, charset="utf8mb4",
            init_command=f"SET SESSION wait_timeout = {LOCK_SESSION_IDLE_S}", **self._args,
        )
        self._lock_slots = asyncio.Semaphore(self._pool_size)

    @staticmethod
    async def _migrate_indexes(tx: Tx) -> None:
        """Tables created before the ranked mentions index get it (and lose the one it replaces)."""
        present = {r[0] for r in await tx.fetchall(
            "SELECT index_name FROM information_schema.statistics"
            " WHERE table_schema = DATABASE() AND table_name = 'graph_mentions'"
        )}
        # IF [NOT] EXISTS still: another process may be opening the same database.
        if "graph_mentions_rank" not in present:
            await tx.execute(
                "CREATE INDEX IF NOT EXISTS graph_mentions_rank ON graph_mentions (entity_key, mentions DESC, document_id, chunk_id)"
            )
        if "graph_mentions_key" in present:
            await tx.execute("DROP INDEX IF EXISTS graph_mentions_key ON graph_mentions")

    async def close(self) -> None:
        if self._lock_pool is not None:
            # Its sessions are closed even if a lock were still held: a lock must not outlive the
            # store (the application waits for its writes before closing it).
            locks, self._lock_pool = self._lock_pool, None
            locks.terminate()
            await locks.wait_closed()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()
            await pool.wait_closed()

    def _fulltext(self, terms: list[str]) -> tuple[str, str, list[Any]]:
        # Natural-language mode ranks by relevance; the same string goes to MATCH twice.
        text = " ".join(terms)
        return (
            "FROM documents d WHERE MATCH(d.search_text) AGAINST (? IN NATURAL LANGUAGE MODE)",
            "MATCH(d.search_text) AGAINST (? IN NATURAL LANGUAGE MODE)",
            [text, text],
        )

    async def _index_text(self, tx: Tx, doc: Document) -> None:
        await tx.execute("UPDATE documents SET search_text = ? WHERE document_id = ?", [search_text(doc), doc.document_id])

    def _lock_name(self, document_id: str) -> str:
        # Names are server-wide and at most 64 characters: the database's writers, one per document.
        key = hashlib.sha256(f"{self._args['db']}\0{document_id}".encode()).hexdigest()[:40]
        return f"retrieval:{key}"

    @asynccontextmanager
    async def write_lock(self, document_id: str, *, wait: bool = True) -> AsyncIterator[bool]:
        # GET_LOCK: the server lets it go with the session, so a writer killed mid-write does not
        # leave it taken (a host cut off keeps its session until TCP gives up on it).
        if self._read_only:
            raise ReadOnly("the metadata store is open read-only")
        if self._lock_pool is None or self._lock_slots is None:
            raise Unavailable("metadata store is not open")
        pool, name, slots = self._lock_pool, self._lock_name(document_id), self._lock_slots
        if not wait and slots.locked():
            yield False  # every slot is a write in flight (or one waiting for another process)
            return
        # A write waits for a free slot of the lock pool without a bound, as for the lock itself;
        # taking a connection then is bounded like a transaction's (the pool opens connections one
        # at a time holding its lock: against a frozen server, writes would queue behind each other's timeouts).
        async with slots:
            conn = None
            try:
                conn = await self._acquire(pool)
                held = await self._take(conn, name, document_id, wait)
            except BaseException as exc:
                if conn is not None:
                    conn.close()  # a lock granted as the wait failed or was cancelled goes with the session
                    pool.release(conn)
                if isinstance(exc, _CONNECTION_ERRORS):
                    raise self._unavailable(exc) from exc
                raise
            if not held:
                pool.release(conn)
                yield False
                return
            stop = asyncio.Event()
            keeping = asyncio.create_task(self._keep(conn, name, document_id, stop))
            try:
                yield True
            finally:
                stop.set()
                try:
                    await asyncio.gather(keeping, return_exceptions=True)
                except BaseException:
                    # Cancelled again while the check ended: the session, and the lock, go now.
                    keeping.cancel()
                    conn.close()
                    pool.release(conn)
                    raise
                await self._release_lock(pool, conn, name, document_id)

    async def _take(self, conn: Any, name: str, document_id: str, wait: bool) -> bool:
        """GET_LOCK on ``conn``: whether it is held (always, when ``wait``). The server waits in
        whole seconds (MySQL rounds the timeout), each wait ending before the connection's read
        timeout; under 2 s of timeout, the waiting is done here between tries."""
        server_wait, pause = int(self._timeout_s / 2), 0.0
        async with conn.cursor() as cur:
            for attempt in itertools.count():
                await cur.execute("SELECT GET_LOCK(%s, %s)", (name, server_wait if attempt else 0))
                (got,) = await cur.fetchone()
                if got == 1:
                    return True
                if got is None:
                    raise Unavailable(f"MySQL refused the write lock of {document_id!r}")
                if not wait:
                    return False
                if not attempt:
                    log.info("waiting for another writer's lock", extra={"lock": document_id})
                if not server_wait:
                    pause = min(2 * pause, self._timeout_s / 2) if pause else 0.01
                    await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    @staticmethod
    async def _keep(conn: Any, name: str, document_id: str, stop: asyncio.Event) -> None:
        """While a write holds the lock: its session is kept busy (an idle one is closed by a
        proxy's idle timeout, and the lock with it), and a lock lost meanwhile is said at once."""
        while True:
            try:
                await asyncio.wait_for(stop.wait(), LOCK_KEEPALIVE_S)
                return
            except TimeoutError:
                pass
            if await _ask_lock_session(conn, "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", name, document_id) != 1:
                log.error("the write lock of %s was lost while its write ran", document_id)
                return

    @staticmethod
    async def _release_lock(pool: Any, conn: Any, name: str, document_id: str) -> None:
        held = None
        try:
            held = await _ask_lock_session(conn, "SELECT RELEASE_LOCK(%s)", name, document_id)
        finally:
            if held != 1:
                conn.close()  # whatever the session may still hold goes with it
            pool.release(conn)
        if held != 1:
            # The session ended at some point of the write (a restart, a network failure), and
            # another writer may have interleaved with it: recovery, or writing it again, repairs that.
            log.error("the write lock of %s may have been lost before its write ended", document_id)

    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        """A write, at READ COMMITTED. At InnoDB's REPEATABLE READ, deleting a row that is not
        there yet (a new document's, its pending write's) locks the gap where it would be, and two
        writers of new documents in one gap then deadlocked on their inserts: 56 of 80 such writes,
        8 at a time, failed. Writes of one document are serialized by its write lock anyway. (Not
        on a server whose binary log records statements, which refuses such writes.)"""
        return self._transaction(read_committed=self._read_committed)

    def snapshot(self) -> AbstractAsyncContextManager[Tx]:
        """Reads: one consistent view across statements, at the REPEATABLE READ every pooled
        session is set to (whatever the server's default)."""
        return self._transaction(read_committed=False)

    @asynccontextmanager
    async def _transaction(self, *, read_committed: bool) -> AsyncIterator[Tx]:
        if self._pool is None:
            raise Unavailable("metadata store is not open")
        try:
            conn = await self._acquire(self._pool)
            try:
                if read_committed:
                    async with conn.cursor() as cur:  # for the next transaction only
                        await cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
                await conn.begin()
                try:
                    async with conn.cursor() as cur:
                        yield _MysqlTx(cur)
                except BaseException:
                    if conn.connected:
                        await conn.rollback()
                    raise
                else:
                    await conn.commit()
            finally:
                self._pool.release(conn)
        except _CONNECTION_ERRORS as exc:
            raise self._unavailable(exc) from exc

    async def _acquire(self, pool: Any) -> Any:
        """A connection of ``pool``, waited for like an answer: the pool opens new connections one
        at a time, holding its lock, so with a frozen server (or every connection busy) callers
        would otherwise queue behind each other's timeouts."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await pool.acquire()
        except TimeoutError:
            # The timeout's own error says nothing ("unavailable: "): what was waited for is.
            if pool.size - pool.freesize >= pool.maxsize:
                raise TimedOut(
                    f"no MySQL connection free within {self._timeout_s:g} s: all {pool.maxsize} pooled connections are"
                    " busy (RETRIEVAL_MYSQL_POOL_SIZE sets how many)"
                ) from None
            raise TimedOut(
                f"MySQL at {self._args['host']}:{self._args['port']} gave no connection within {self._timeout_s:g} s"
            ) from None

    def _unavailable(self, exc: BaseException) -> Unavailable:
        """The server is down, restarting, frozen or unreachable: the request cannot be answered now."""
        kind = TimedOut if _timed_out(exc) else Unavailable
        return kind(f"MySQL at {self._args['host']}:{self._args['port']} is unavailable: {exc}")
