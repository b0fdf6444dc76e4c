"""Backends under test: every implementation of an interface runs the same assertions."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.backends.vector_store import IndexFeatures, SearchPolicy, VectorStore
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource
from tests.support.mariadb import mariadb_server
from tests.support.redis_server import HEALTHY_REDIS_S, redis_server

DIM = 8


@pytest.fixture(scope="session")
def mariadb_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mariadb_server(tmp_path_factory.mktemp("mariadb")) as dsn:
        yield dsn



@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


#: opens an Application, its corpus ingested, with the cache the test runs against
AppWithCorpus = Callable[[Sequence[DocumentSource]], Awaitable[Application]]


@pytest_asyncio.fixture(params=["memory", "redis"])
async def app_on_each_cache(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AppWithCorpus]:
    """An Application with the in-process cache, then with a real redis-server's (a key prefix of
    its own, as the server is shared by the module's tests)."""
    opened: list[Application] = []

    async def open_app(corpus: Sequence[DocumentSource]) -> Application:
        extra: dict[str, object] = {}
        if request.param == "redis":
            extra = {"cache_backend": "redis", "redis_url": request.getfixturevalue("redis_url"),
                     "redis_key_prefix": f"t{os.urandom(4).hex()}", "cache_timeout_s": HEALTHY_REDIS_S}
        application = Application(load_settings(data_dir=tmp_path, **extra))
        await application.open()
        opened.append(application)
        assert not (await application.ingest(list(corpus))).errors
        return application

    yield open_app
    for application in opened:
        await application.close()

@pytest.fixture(scope="session")
def executor() -> Iterator[BlockingExecutor]:
    ex = BlockingExecutor(2)
    yield ex
    ex.shutdown()


def make_vector_store(
    kind: str, path: Path, executor: BlockingExecutor, dim: int = DIM, policy: SearchPolicy | None = None,
    features: IndexFeatures = IndexFeatures(parent_vectors=True, title_field=True),
) -> VectorStore:
    """A store of each kind; by default with every vector the service can index, so each is tested."""
    if kind == "edge":
        return EdgeVectorStore(path / "edge", dim, executor, policy, features=features)
    return QdrantVectorStore("chunks", dim, path=str(path / "qdrant-local"), policy=policy, features=features)


@pytest_asyncio.fixture(params=["edge", "qdrant-local"])
async def vector_store(request: pytest.FixtureRequest, tmp_path: Path, executor: BlockingExecutor) -> AsyncIterator[VectorStore]:
    store = make_vector_store(request.param, tmp_path, executor)
    await store.open()
    yield store
    await store.close()


async def _reset_mysql(dsn: str) -> None:
    store = MysqlMetadataStore(dsn)
    await store.open()
    async with store.transaction() as tx:
        for table in ("grants", "parent_chunks", "documents", "index_info"):
            await tx.execute(f"DELETE FROM {table}")
    await store.close()


@pytest_asyncio.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
async def metadata_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MetadataStore]:
    if request.param == "sqlite":
        store: MetadataStore = SqliteMetadataStore(tmp_path / "meta.sqlite3")
    else:
        dsn = request.getfixturevalue("mariadb_dsn")
        await _reset_mysql(dsn)
        store = MysqlMetadataStore(dsn)
    await store.open()
    yield store
    await store.close()
