"""A setting of the query workflow that cannot work is refused before anything is opened."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path

import pytest

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.server import start_server


async def test_a_workflow_that_cannot_be_built_is_refused_before_the_application_opens(tmp_path: Path,
                                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    glossary = tmp_path / "glossary.txt"
    glossary.write_bytes(b"db = database\n")
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path / "data", glossary_path=glossary,
                             graph_enabled=False)
    glossary.write_bytes(b"db = data\xffbase\n")  # no longer UTF-8 once the settings were read: only the query analysis reads it here
    opened: list[Application] = []
    real_open = Application.open

    async def open_(self: Application, **kwargs: bool) -> None:
        opened.append(self)
        await real_open(self, **kwargs)

    monkeypatch.setattr(Application, "open", open_)
    with pytest.raises(UnicodeDecodeError):
        await start_server(settings)
    assert opened == []  # no store, thread or model to close, no model chosen or timed


async def test_a_start_cancelled_after_the_stores_opened_closes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve cancels the start-up on SIGTERM: past open()'s own cleanup (its last step reads the
    keyword statistics), start_server closes what opened."""
    from retrieval_server.workflow.adaptive import TermStatistics

    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path)
    reading, never = asyncio.Event(), asyncio.Event()
    closed: list[Application] = []
    real_close = Application.close

    async def held(self: TermStatistics, *args: object) -> None:
        reading.set()
        await never.wait()

    async def close(self: Application) -> None:
        closed.append(self)
        await real_close(self)

    monkeypatch.setattr(TermStatistics, "refresh", held)
    monkeypatch.setattr(Application, "close", close)
    starting = asyncio.ensure_future(start_server(settings))
    await reading.wait()
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert len(closed) == 1


async def test_a_read_only_start_cancelled_while_copying_the_index_leaves_nothing_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy and the shard opened on a thread after the cancellation are closed and removed:
    abandoned, the job went on and left both, open and on disk."""
    import qdrant_edge as qe

    import retrieval_server.app as app_module

    data = tmp_path / "data"
    writer = Application(load_settings(data_dir=data))
    await writer.open()
    await writer.close()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the read-only copy goes
    copied, go_on, loaded = threading.Event(), threading.Event(), threading.Event()
    shards: list[_Recorded] = []
    real_copy, real_shards = app_module.copy_for_reading, qe.EdgeShard

    def held(source: Path, floor_mb: int) -> Path:  # a large index, whose copy takes a while
        target = real_copy(source, floor_mb)
        copied.set()
        go_on.wait()
        return target

    class Shards:
        @staticmethod
        def load(*args: object) -> _Recorded:
            shards.append(_Recorded(real_shards.load(*args)))
            loaded.set()
            return shards[-1]

    monkeypatch.setattr(app_module, "copy_for_reading", held)
    monkeypatch.setattr(qe, "EdgeShard", Shards)
    starting = asyncio.ensure_future(start_server(load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=data, read_only=True)))
    await asyncio.to_thread(copied.wait)
    starting.cancel()
    go_on.set()  # the copy ends on its thread after the cancellation, and the shard is loaded
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert await asyncio.to_thread(loaded.wait, 60)  # the bound only turns a job that never loads into a failure
    assert [s.closed for s in shards] == [True] and list(scratch.iterdir()) == []


class _Recorded:
    """A shard that says whether it was closed."""

    def __init__(self, shard: object) -> None:
        self._shard, self.closed = shard, False

    def __getattr__(self, name: str) -> object:
        return getattr(self._shard, name)

    def close(self) -> None:
        self.closed = True
        self._shard.close()  # type: ignore[attr-defined]


async def test_an_ipv6_address_is_served(tmp_path: Path) -> None:
    """"::1" made the target "::1:PORT", which gRPC cannot read; "[::1]" failed in the sockets."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    running = await start_server(load_settings(host="[::1]", port=0, metrics_enabled=False, data_dir=tmp_path / "data"))
    try:
        async with grpc.aio.insecure_channel(f"[::1]:{running.port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await running.stop(0)


@pytest.mark.parametrize(("settings", "said", "unsaid"), [
    ({"read_only": True}, "read-only (RETRIEVAL_READ_ONLY=true)", "Qdrant"),
    ({"read_only": True, "processes": 2, "qdrant_url": "http://127.0.0.1:1", "cache_backend": "none"},
     "read-only (RETRIEVAL_READ_ONLY=true)", "Qdrant"),
    # A worker of RETRIEVAL_PROCESSES > 1 over embedded storage, as the supervisor makes it
    ({"read_only": True, "processes": 2}, "it runs 2 processes over embedded storage", "RETRIEVAL_READ_ONLY"),
])
async def test_a_read_only_servers_refusal_says_why_it_is_read_only(settings: dict[str, object], said: str, unsaid: str,
                                                                      tmp_path: Path) -> None:
    """RETRIEVAL_READ_ONLY's refusal gave the advice for RETRIEVAL_PROCESSES > 1: ingest through a
    single-process server, or run the processes against a Qdrant server."""
    from retrieval_server.domain import ReadOnly

    app = Application(load_settings(data_dir=tmp_path / "data", **settings))
    for write in (app.ingest([]), app.delete(["x"])):
        with pytest.raises(ReadOnly) as refused:
            await write
        assert said in str(refused.value) and unsaid not in str(refused.value)


async def test_a_writer_and_a_reader_of_copies_never_share_a_vector_folder(tmp_path: Path) -> None:
    """A read-only server (and each worker of RETRIEVAL_PROCESSES > 1) reads a copy made at start:
    an ingest beside it succeeded, and the copies, behind SQLite, left every replaced document out."""
    from retrieval_server.domain import Unavailable

    data = tmp_path / "data"
    writer = Application(load_settings(data_dir=data))
    await writer.open()
    try:
        with pytest.raises(Unavailable, match="open in another process"):
            await Application(load_settings(data_dir=data, read_only=True)).open()
    finally:
        await writer.close()
    readers = [Application(load_settings(data_dir=data, read_only=True)) for _ in range(2)]
    for reader in readers:
        await reader.open()  # readers share it
    try:
        with pytest.raises(Unavailable, match="open in another process"):
            await Application(load_settings(data_dir=data)).open()
    finally:
        for reader in readers:
            await reader.close()
    again = Application(load_settings(data_dir=data))
    await again.open()  # once they are gone
    await again.close()


async def test_a_metrics_port_in_use_leaves_no_grpc_server_behind(tmp_path: Path) -> None:
    """/metrics binds after the gRPC port was added: its failure closed the application alone, and
    the grpc.aio server, never stopped, kept the gRPC port."""
    import socket

    from retrieval_server.config import bind_error

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        grpc_port = free.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = load_settings(host="127.0.0.1", port=grpc_port, metrics_port=taken.getsockname()[1], data_dir=tmp_path / "data")
        with pytest.raises(OSError, match="cannot serve metrics on"):
            await start_server(settings)
    assert bind_error("127.0.0.1", grpc_port) is None
    # Again on the same port: nothing of the first attempt holds it.
    running = await start_server(settings.model_copy(update={"metrics_enabled": False}))
    try:
        assert running.port == grpc_port
    finally:
        await running.stop(1.0)


@pytest.mark.parametrize("cancelled", ["the gRPC server's", "the health port's"])
async def test_a_start_cancelled_while_a_server_starts_is_cancelled_and_frees_every_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                         cancelled: str) -> None:
    """grpc.aio's start cancelled halfway leaves a server whose stop() raises InvalidStateError: the
    clean-up raised it in place of the cancellation (serve, stopped while starting, ended with its
    traceback), and stopped none of the servers after it (the gRPC port stayed bound)."""
    import socket

    import grpc

    from retrieval_server.config import bind_error

    ports = []
    for _ in range(2):
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            ports.append(free.getsockname()[1])
    settings = load_settings(host="127.0.0.1", port=ports[0], health_port=ports[1], metrics_enabled=False, data_dir=tmp_path / "data")
    starts = 0
    real_start = grpc.aio._server.Server.start

    async def start(self: grpc.aio.Server) -> None:
        nonlocal starts
        starts += 1
        if starts == (1 if cancelled == "the gRPC server's" else 2):
            # Delivered at the first await of grpc's own start, as a SIGTERM's cancellation may be.
            asyncio.get_running_loop().call_soon(asyncio.current_task().cancel)  # type: ignore[union-attr]
        await real_start(self)

    monkeypatch.setattr(grpc.aio._server.Server, "start", start)
    with pytest.raises(asyncio.CancelledError):
        await start_server(settings)
    assert [bind_error("127.0.0.1", port) for port in ports] == [None, None]
