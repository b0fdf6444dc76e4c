"""A store that lets its timeout pass is not asked again within the request; one that refuses at
once is (it may be back a moment later); waiting for a pooled connection is bounded by the same
timeout. Against a real MariaDB: frozen (SIGSTOP), stopped, and with every connection busy."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from retrieval_server.app import Application
from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, Identity, QueryOptions, Role, Strategy, TimedOut, Unavailable
from tests.support.mariadb import MariaDb

pytestmark = pytest.mark.mariadb

ALICE = Identity("alice", Role.USER)  # a caller with a user id: her access is read from the store


def _retries(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]


async def test_a_frozen_store_times_out_once_and_a_refusing_one_is_asked_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = MariaDb(tmp_path / "mariadb")
    server.start(setup=True)
    app = Application(load_settings(data_dir=tmp_path / "data", mysql_dsn=server.dsn, mysql_timeout_s=1.0, store_retries=2,
                                    store_backoff_s=0.001, cache_backend="none"))
    try:
        await app.open()
        assert not (await app.ingest([DocumentSource("a.txt", b"Tides follow the moon.", document_id="tides")])).errors
        ask = QueryOptions("what moves the tides", 3, strategy=Strategy.KEYWORD, identity=ALICE)
        assert [c.document.document_id for c in (await app.pipeline.query(ask)).contexts] == ["tides"]

        server.freeze()
        try:
            with caplog.at_level(logging.DEBUG, logger="retrieval_server.workflow.nodes"), pytest.raises(TimedOut):
                await app.pipeline.query(ask)
        finally:
            server.thaw()
        assert _retries(caplog) == []

        caplog.clear()
        server.stop()
        with caplog.at_level(logging.DEBUG, logger="retrieval_server.workflow.nodes"), pytest.raises(Unavailable) as refused:
            await app.pipeline.query(ask)
        assert not isinstance(refused.value, TimedOut)
        assert len(_retries(caplog)) == 2  # STORE_RETRIES
    finally:
        await app.close()
        server.stop()


async def test_waiting_for_a_busy_pool_ends_after_the_timeout(mariadb_dsn: str) -> None:
    """Every connection busy (here the pool's two, held by transactions that are still open): a
    caller waits MYSQL_TIMEOUT_S for one, as it would for an answer, is told why (it was told
    "MySQL at host:port is unavailable: ", the timeout's empty message), and the pool stays whole."""
    store = MysqlMetadataStore(mariadb_dsn, pool_size=2, timeout_s=1.0)
    await store.open()
    held, release = [asyncio.Event(), asyncio.Event()], asyncio.Event()

    async def hold(taken: asyncio.Event) -> None:
        async with store.transaction() as tx:
            await tx.execute("SELECT 1")
            taken.set()
            await release.wait()

    holders = [asyncio.create_task(hold(taken)) for taken in held]
    try:
        for taken in held:
            await taken.wait()
        # 60 s only turns a wait that never ends into a failure; the call is expected to end after 1 s.
        busy = r"^no MySQL connection free within 1 s: all 2 pooled connections are busy \(RETRIEVAL_MYSQL_POOL_SIZE"
        with pytest.raises(TimedOut, match=busy):
            await asyncio.wait_for(store.get_document("anything"), 60)
        assert not any(h.done() for h in holders)
        release.set()
        await asyncio.gather(*holders)
        assert await store.get_document("anything") is None  # the connections went back to the pool
    finally:
        release.set()
        await asyncio.gather(*holders)
        await store.close()
