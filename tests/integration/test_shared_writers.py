"""Writers sharing the stores (several server processes, a Qdrant server): a document is written
by one of them at a time, recovery never reconciles a write in flight, and a writer that dies lets
go of its lock.

Two indexers over one vector store, each with its own connections to the metadata store, stand for
two processes: the cross-process lock is the metadata store's (MySQL's GET_LOCK, a file lock beside
a SQLite file), and each indexer serializes only its own writes. The last test uses a real second
process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.backends.metadata_store import MetadataStore, mysql
from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, QueryOptions
from retrieval_server.ingest.indexer import Indexer
from tests.support.intercept import Intercepted

REPO = Path(__file__).resolve().parents[2]
LONG = " ".join(f"Paragraph sentence {i} describes the history of glaciers and ice sheets." for i in range(30))
WAITING = "waiting for another writer's lock"


@dataclass
class Writers:
    app: Application
    #: the other process's connections to the metadata store
    other_store: MetadataStore
    #: the store's kind and where it is, as the subprocess of the last test opens it
    where: tuple[str, str]

    def other(self, around_begin: Callable[..., Awaitable[Any]] | None = None) -> Indexer:
        """The other process's indexer, its ``begin_write`` seen through ``around_begin``."""
        store = Intercepted(self.other_store, "begin_write", around_begin) if around_begin else self.other_store
        a = self.app
        return Indexer(a.chunker, a.embedder, a.sparse, a.vectors, store, a.executor, child_title=a.indexer.child_title)


@pytest_asyncio.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
async def writers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Writers]:
    dsn = request.getfixturevalue("mariadb_dsn") if request.param == "mariadb" else None
    app = Application(load_settings(data_dir=tmp_path, parent_chunk_tokens=64, child_chunk_tokens=24, child_overlap_tokens=8, mysql_dsn=dsn))
    sqlite_path = tmp_path / "metadata.sqlite3"
    await app.open()
    other: MetadataStore = MysqlMetadataStore(dsn) if dsn else SqliteMetadataStore(sqlite_path)
    await other.open()
    try:
        yield Writers(app, other, ("mysql", dsn) if dsn else ("sqlite", str(sqlite_path)))
    finally:
        await other.close()
        await app.close()


@pytest.fixture
def lock_waits(caplog: pytest.LogCaptureFixture) -> Iterator[asyncio.Event]:
    """Set when a writer finds a document's lock taken and waits for it."""
    caplog.set_level(logging.INFO, logger="retrieval_server.backends.metadata_store")
    seen = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == WAITING:
                seen.set()

    handler = Watch()
    logger = logging.getLogger("retrieval_server.backends.metadata_store")
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)


def _txt(doc_id: str, text: str) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode())


def _held_before_commit(app: Application, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Holds the app's next write after its new points are written and before its rows commit:
    (set once it is held, set it to let it go on)."""
    replace, held, resume = app.metadata.replace_document, asyncio.Event(), asyncio.Event()

    async def slow_commit(*args: Any, **kwargs: Any) -> bool:
        held.set()
        await resume.wait()
        return await replace(*args, **kwargs)

    monkeypatch.setattr(app.metadata, "replace_document", slow_commit)
    return held, resume


async def _first(*events: asyncio.Event | asyncio.Task[Any]) -> None:
    waits = [e if isinstance(e, asyncio.Task) else asyncio.ensure_future(e.wait()) for e in events]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        if w not in events:
            w.cancel()


async def _searchable(app: Application, doc_id: str) -> int:
    """The document's points, checked to be all of its stored version's (0 if it has none)."""
    stored = await app.metadata.get_document(doc_id)
    assert stored is not None
    points = await app.vectors.count(doc_id)
    assert points == await app.vectors.count(doc_id, stored.version)
    return points


async def test_two_writers_of_one_document_take_turns(writers: Writers, lock_waits: asyncio.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interleaved, the second writer's commit and cleanup would run between the first's points and
    its rows: the first's cleanup then removes the second's points, and the first's rows point at
    points the second removed. The document would be stored and unsearchable."""
    app, doc = writers.app, f"shared-{uuid.uuid4().hex[:8]}"
    held, resume = _held_before_commit(app, monkeypatch)
    began = asyncio.Event()

    async def begin(method: Callable[..., Awaitable[None]], *args: Any) -> None:
        began.set()
        await method(*args)

    first = asyncio.create_task(app.ingest([_txt(doc, LONG)]))
    await held.wait()
    second = asyncio.create_task(writers.other(begin).ingest([_txt(doc, LONG.replace("glaciers", "moraines"))]))
    try:
        await _first(lock_waits, began, second)
        took_turns = lock_waits.is_set() and not began.is_set()
    finally:
        resume.set()
        reports = await asyncio.gather(first, second)
    assert took_turns, "the second writer went ahead while the first was writing"
    assert all(not r.errors for r in reports)
    assert await _searchable(app, doc) == reports[1].documents[0].child_chunks > 0
    assert await app.metadata.pending_writes() == []
    found = await app.pipeline.query(QueryOptions("history of moraines and ice sheets", 1))
    assert "moraines" in found.contexts[0].parent.content


async def test_recovery_leaves_a_write_in_flight_and_goes_on_to_the_abandoned_ones(
    writers: Writers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's recovery lists the write's intent while the write is between its points and
    its rows. Reconciled then, its new points would go (no rows yet), and the rows committed after
    would have none. Recovery leaves it without waiting for it (a writer that hangs must not hold
    up the rest), and reconciles the abandoned write listed after it."""
    app, doc, abandoned = writers.app, f"shared-{uuid.uuid4().hex[:8]}", f"abandoned-{uuid.uuid4().hex[:8]}"
    await app.ingest([_txt(abandoned, "Orphaned points outlive their rows.")])
    held, resume = _held_before_commit(app, monkeypatch)
    write = asyncio.create_task(app.ingest([_txt(doc, LONG)]))
    try:
        await held.wait()
        await app.metadata.delete_document(abandoned)  # the rows went, a kill came before the points did
        assert [d for d in await app.metadata.pending_writes() if d in (doc, abandoned)] == [doc, abandoned]
        reconciled = await writers.other().recover(min_age_s=0.0)
    finally:
        resume.set()
        report = await write
    assert abandoned in reconciled and doc not in reconciled, "recovery reconciled a write in flight"
    assert await app.vectors.count(abandoned) == 0
    assert await _searchable(app, doc) == report.documents[0].child_chunks > 0


_HOLDER = """
import asyncio, os, sys, traceback
from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore

async def main() -> None:
    kind, where, doc = sys.argv[1:]
    store = SqliteMetadataStore(where) if kind == "sqlite" else MysqlMetadataStore(where)
    await store.open()
    async with store.write_lock(doc):
        print("held", flush=True)
        await asyncio.Event().wait()

try:
    asyncio.run(main())
except BaseException:
    traceback.print_exc()
finally:
    os._exit(1)  # whatever failed: the store's threads must not keep the process (and the test) waiting
"""


@contextlib.asynccontextmanager
async def _held_elsewhere(writers: Writers, doc: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A real second process holding the document's lock until it is killed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = await asyncio.create_subprocess_exec(sys.executable, "-c", _HOLDER, *writers.where, doc, env=env, stdout=asyncio.subprocess.PIPE)
    try:
        assert await holder.stdout.readline() == b"held\n", "the holder did not take the lock"  # type: ignore[union-attr]
        yield holder
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()


async def test_a_writer_killed_while_holding_the_lock_lets_it_go(writers: Writers, lock_waits: asyncio.Event) -> None:
    """A real second process takes a document's lock and is killed (-9) with it: the lock is held
    against this process while that process lives, and let go when it dies."""
    doc = f"shared-{uuid.uuid4().hex[:8]}"
    async with _held_elsewhere(writers, doc) as holder:
        taken = asyncio.Event()

        async def take() -> None:
            async with writers.other_store.write_lock(doc):
                taken.set()

        taking = asyncio.create_task(take())
        await _first(lock_waits, taking)
        assert lock_waits.is_set() and not taken.is_set(), "the lock was taken while another process held it"
        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        await taking
        assert taken.is_set()


async def test_an_ingest_waiting_for_another_writer_can_be_cancelled(writers: Writers, lock_waits: asyncio.Event) -> None:
    """Nothing is written while it waits, so a client's cancel (or a shutdown) ends it at once; its
    write used to run to its end once the other process let go, and the shutdown waited for that."""
    app, doc = writers.app, f"shared-{uuid.uuid4().hex[:8]}"
    async with _held_elsewhere(writers, doc) as holder:
        call = asyncio.create_task(app.ingest([_txt(doc, LONG)]))
        await _first(lock_waits, call)
        assert lock_waits.is_set() and not call.done()
        call.cancel()
        holder.kill()  # the lock comes free: a write that outlived its cancel would now go ahead
        await holder.wait()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert await app.metadata.get_document(doc) is None and doc not in await app.metadata.pending_writes()
    assert await app.vectors.count(doc) == 0


@pytest.mark.mariadb
async def test_a_write_lock_lost_while_held_is_reported_at_once(mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MySQL: the lock's session ended midway (killed here; a restart, a network failure, an idle
    timeout): the writer hears of it from the session's periodic use, not only when it lets go."""
    monkeypatch.setattr(mysql, "LOCK_KEEPALIVE_S", 0.01)
    lost = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "was lost while its write ran" in record.getMessage():
                lost.set()

    handler, logger = Watch(), logging.getLogger(mysql.__name__)
    logger.addHandler(handler)
    store, admin = MysqlMetadataStore(mariadb_dsn), MysqlMetadataStore(mariadb_dsn)
    await store.open()
    await admin.open()
    try:
        doc = f"shared-{uuid.uuid4().hex[:8]}"
        async with store.write_lock(doc):
            async with admin.transaction() as tx:
                [(holder,)] = await tx.fetchall("SELECT IS_USED_LOCK(?)", [store._lock_name(doc)])
                await tx.execute(f"KILL CONNECTION {int(holder)}")
            await lost.wait()
        async with admin.write_lock(doc) as held:  # the killed session's lock goes with it (KILL ends it soon after)
            assert held
    finally:
        logger.removeHandler(handler)
        await admin.close()
        await store.close()


@pytest.mark.mariadb
async def test_a_write_lock_cancelled_twice_still_lets_go(mariadb_dsn: str) -> None:
    """A second cancellation (a client's cancel, then the deadline or a shutdown) landing while the
    lock's periodic check ends: the lock's session is closed all the same. It used to stay out of
    the pool holding the lock, for every writer of the document and for a week, and the store's
    close waited for it for ever."""
    store = MysqlMetadataStore(mariadb_dsn)
    await store.open()
    try:
        entered, doc = asyncio.Event(), f"shared-{uuid.uuid4().hex[:8]}"

        async def write() -> None:
            async with store.write_lock(doc):
                entered.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(write())
        await entered.wait()
        task.cancel()
        await asyncio.sleep(0)  # the task runs to its release, and waits there for the check to end
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pool = store._lock_pool
        assert pool.size == pool.freesize, "a lock connection was left out of the pool"
        async with store.write_lock(doc) as held:
            assert held
    finally:
        await store.close()
