"""A store that lets its timeout pass is not asked again within the request; one that refuses at
once is (it may be back a moment later). Against a real MariaDB, frozen (SIGSTOP) and stopped."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from retrieval_server.app import Application
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
            with caplog.at_level(logging.WARNING, logger="retrieval_server.workflow.nodes"), pytest.raises(TimedOut):
                await app.pipeline.query(ask)
        finally:
            server.thaw()
        assert _retries(caplog) == []

        caplog.clear()
        server.stop()
        with caplog.at_level(logging.WARNING, logger="retrieval_server.workflow.nodes"), pytest.raises(Unavailable) as refused:
            await app.pipeline.query(ask)
        assert not isinstance(refused.value, TimedOut)
        assert len(_retries(caplog)) == 2  # STORE_RETRIES
    finally:
        await app.close()
        server.stop()
