"""kill -9 at random points of an ingest or a delete loses nothing committed and leaves nothing half-written.

Regression test for issue #9 defect 4 (orphan points after a crash). Each round re-ingests every
document with new text (so every document is replaced) through the CLI (`ingest --local`) or the
IngestDocuments RPC of a `serve` process, and kills the process with SIGKILL after a random number
of documents were stored plus a random jitter, so the kill lands anywhere in a document's write
sequence. Then the data folder is opened (which runs recovery) and checked: every stored
document has exactly its committed version's points (children, and a parent point per parent
row), no deleted or uncommitted document has a point left, no write is pending, and Search finds what is stored. A last, uninterrupted ingest
must leave every document with the right counts. Deletes are killed the same way, after a random
number of documents were deleted: every document is then either deleted (no row, no point) or whole.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from bench.server_process import free_port, wait_healthy
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, Identity
from tests.support.paths import inherited_env

CLI = [sys.executable, "-m", "retrieval_server.cli"]
DOCS = 24
WORDS = ["glacier", "harbour", "lantern", "meadow", "orchard", "quarry", "saddle", "thicket", "valley", "willow", "anchor", "bakery",
         "canyon", "dolphin", "engine", "falcon", "granite", "hammock", "island", "jungle", "kettle", "lighthouse", "marble", "nectar"]


def _text(i: int, revision: int) -> str:
    topic = WORDS[i]
    sentences = [f"Document {topic} revision {revision:02d} describes item {j} of the {topic} survey in plain words." for j in range(40)]
    return " ".join(sentences)


def _write_corpus(folder: Path, revision: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(DOCS):
        (folder / f"doc{i:02d}.txt").write_text(_text(i, revision))


def _env(data: Path, **extra: str) -> dict[str, str]:
    env = inherited_env()
    env.update(RETRIEVAL_DATA_DIR=str(data), RETRIEVAL_LOG_FORMAT="json", RETRIEVAL_LOG_LEVEL="DEBUG", RETRIEVAL_METRICS_PORT="0",
               RETRIEVAL_UPSERT_BATCH_SIZE="32", **extra)
    return env


def _kill_after_stored(proc: subprocess.Popen[str], stored: int, jitter_s: float, event_name: str = "document stored") -> int:
    """Read the process's JSON log until ``stored`` documents were stored (or deleted: ``event_name``),
    wait ``jitter_s``, SIGKILL it.

    Returns how many were stored when the signal was sent (the process may have ended first).
    """
    seen = 0
    assert proc.stderr is not None
    for line in proc.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("msg") == event_name:
            seen += 1
            if seen >= stored:
                break
    time.sleep(jitter_s)  # where the kill lands in the next document's write sequence, not a wait for anything
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)
    return seen


async def _check(data: Path, expected_children: dict[str, int]) -> set[str]:
    """Open the folder (recovery runs) and check its invariants; return the stored document ids."""
    app = Application(load_settings(data_dir=data))
    await app.open()
    try:
        assert await app.metadata.pending_writes() == [], "recovery left a pending write"
        stored = set(await app.metadata.list_document_ids())
        assert app.vectors.features.parent_vectors
        total = total_parents = 0
        for i in range(DOCS):
            doc_id = f"doc{i:02d}"
            points = await app.vectors.count(doc_id)
            parent_points = await app.vectors.count(doc_id, parents=True)
            doc = await app.metadata.get_document(doc_id)
            if doc is None:
                assert points == 0, f"{doc_id}: {points} orphan points without a document row"
                assert parent_points == 0, f"{doc_id}: {parent_points} orphan parent points without a document row"
                continue
            current = await app.vectors.count(doc_id, doc.version)
            assert current == points, f"{doc_id}: {points - current} points of an uncommitted version"
            assert current == expected_children[doc_id], f"{doc_id}: half-written ({current} of {expected_children[doc_id]} points)"
            total += current
            # Every parent row has a child here, so a parent point each (its children are at most
            # the document's, as are its parents).
            rows, _ = await app.metadata.get_parents_and_documents([f"{doc_id}#p{p}" for p in range(expected_children[doc_id])])
            current_parents = await app.vectors.count(doc_id, doc.version, parents=True)
            assert current_parents == parent_points, f"{doc_id}: {parent_points - current_parents} parent points of an uncommitted version"
            assert current_parents == len(rows) > 0, f"{doc_id}: {current_parents} parent points for {len(rows)} parent rows"
            total_parents += current_parents
        assert await app.vectors.count() == total
        assert await app.vectors.count(parents=True) == total_parents
        for doc_id in stored:
            i = int(doc_id[3:])
            results = await app.pipeline.search(f"the {WORDS[i]} survey", 1, Identity())
            assert [r.document_id for r in results] == [doc_id]
        return stored
    finally:
        await app.close()


async def _expected_children(tmp_path: Path) -> dict[str, int]:
    folder = tmp_path / "reference-corpus"
    _write_corpus(folder, 0)
    app = Application(load_settings(data_dir=tmp_path / "reference"))
    await app.open()
    try:
        sources = [DocumentSource(filename=f.name, content=f.read_bytes()) for f in sorted(folder.iterdir())]
        report = await app.ingest(sources)
    finally:
        await app.close()
    return {d.document_id: d.child_chunks for d in report.documents}


def _ingest_local(data: Path, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "ingest", "--local", "--quiet", str(folder)], env=_env(data),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _serving(data: Path, call: Callable[[RetrievalClient], object]) -> subprocess.Popen[str]:
    """A ``serve`` process on ``data``, and ``call`` made to it on a thread (the process gets killed mid-call)."""
    port = free_port()
    server = subprocess.Popen([*CLI, "serve"], env=_env(data, RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_healthy(f"127.0.0.1:{port}", server, timeout_s=180)

    def send() -> None:
        with RetrievalClient(f"127.0.0.1:{port}", role="ADMIN", timeout=600) as client:
            try:
                call(client)
            except grpc.RpcError:
                pass  # the server is killed mid-call

    threading.Thread(target=send, daemon=True).start()
    return server


def _ingest_rpc(data: Path, folder: Path) -> subprocess.Popen[str]:
    docs = [pb.DocumentInput(filename=f.name, content=f.read_bytes()) for f in sorted(folder.iterdir())]
    return _serving(data, lambda client: client.ingest(docs))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["local", "rpc"])
async def test_kill_9_during_ingest_leaves_no_orphan_and_no_half_document(tmp_path: Path, how: str) -> None:
    expected = await _expected_children(tmp_path)
    assert len(expected) == DOCS
    data, folder = tmp_path / "data", tmp_path / "corpus"
    rng = random.Random(f"crash-{how}")
    start = _ingest_local if how == "local" else _ingest_rpc
    rounds = 4
    for revision in range(1, rounds + 1):
        _write_corpus(folder, revision)
        proc = start(data, folder)
        _kill_after_stored(proc, rng.randrange(0, DOCS - 4), rng.uniform(0.0, 0.3))
        await _check(data, expected)
    # An uninterrupted run completes what the crashes left: every document, at the right counts.
    _write_corpus(folder, rounds + 1)
    done = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(folder)], env=_env(data), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert await _check(data, expected) == set(expected)


@pytest.mark.slow
async def test_kill_9_during_delete_leaves_every_document_deleted_or_whole(tmp_path: Path) -> None:
    expected = await _expected_children(tmp_path)
    data, folder = tmp_path / "data", tmp_path / "corpus"
    rng = random.Random("crash-delete")
    for revision in range(1, 4):
        _write_corpus(folder, revision)
        done = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(folder)], env=_env(data), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        everything = [f"doc{i:02d}" for i in range(DOCS)]
        proc = _serving(data, lambda client: client.delete(everything))
        deleted = _kill_after_stored(proc, rng.randrange(1, DOCS - 4), rng.uniform(0.0, 0.05), "document deleted")
        stored = await _check(data, expected)
        # The deletes go in order: those logged before the kill are gone, the last few stay whole.
        assert not stored & set(everything[:deleted])
