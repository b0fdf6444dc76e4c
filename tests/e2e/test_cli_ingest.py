"""``retrieval-server ingest`` against a running server: batches within the server's limits, a
file the server refuses fails alone, ids that two files would share are caught before sending,
and the exit code says whether some files failed."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server import cli
from retrieval_server.config import load_settings
from retrieval_server.server import start_server
from tests.support.fake_client import FakeClient

pytestmark = pytest.mark.slow


def _text(words: str, size: int) -> bytes:
    """``words``, padded with spaces to ``size`` bytes: large on the wire, a few tokens to embed."""
    return (words + " " * size)[:size].encode()


async def test_a_folder_is_ingested_within_the_servers_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "alpha.txt").write_bytes(_text("Alpacas graze on high plateaus.", 800_000))
    (docs / "beta.txt").write_bytes(_text("Beavers build dams across streams.", 800_000))
    (docs / "gamma.txt").write_bytes(_text("Gannets dive for fish at sea.", 800_000))
    (docs / "huge.txt").write_bytes(_text("Hippos wallow in rivers.", 2_200_000))
    (docs / "sub" / "alpha.txt").write_bytes(b"Another alpha: the id the first one has.")
    # A message of 2 MiB, a document of at most 1 MiB: the least that fits in it with the request's room.
    settings = load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=tmp_path / "data", max_message_mb=2,
                             max_document_bytes=1_048_576)
    running = await start_server(settings)
    try:
        # The three 800 KB files are one batch by the client's count and bytes, and over the
        # server's 2 MiB: sent again one at a time, each lands; the 2.2 MB file alone is refused.
        code = await asyncio.to_thread(cli.main, ["ingest", str(docs), "--server", f"127.0.0.1:{running.port}", "--quiet"])
        stored = set(await running.app.metadata.get_documents(["alpha", "beta", "gamma", "huge"]))
    finally:
        await running.stop(1.0)
    out, err = capsys.readouterr()
    assert code == cli.SOME_FAILED and stored == {"alpha", "beta", "gamma"}
    assert f"FAILED    {docs / 'huge.txt'}: RESOURCE_EXHAUSTED" in err
    assert f"FAILED    {docs / 'sub' / 'alpha.txt'}: document_id 'alpha' is also {docs / 'alpha.txt'}'s" in err
    assert "3 documents indexed, 2 failed" in err and out.count("added") == 3


def test_batches_hold_at_most_their_files_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "BATCH_BYTES", 100)
    monkeypatch.setattr(cli, "BATCH_FILES", 3)
    sizes = [10, 10, 10, 10, 60, 50, 200, 1]
    files = []
    for i, size in enumerate(sizes):
        (f := tmp_path / f"f{i}.txt").write_bytes(b"x" * size)
        files.append(f)
    files.append(tmp_path / "missing.txt")
    assert [[f.name for f in b] for b in cli._batches(files)] == [
        ["f0.txt", "f1.txt", "f2.txt"], ["f3.txt", "f4.txt"], ["f5.txt"], ["f6.txt"], ["f7.txt", "missing.txt"],
    ]


def test_the_exit_code_says_whether_some_documents_failed(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._print_ingest([("a", 1, 1, "added")], []) == 0
    assert cli._print_ingest([("a", 1, 1, "added")], [("b.txt", "why")]) == cli.SOME_FAILED
    assert cli._print_ingest([], [("b.txt", "why")]) == 1
    # Stored without being listed (past the server's response limit): stored all the same.
    capsys.readouterr()
    assert cli._print_ingest([], [("b.txt", "why")], unlisted=5) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert "5 more stored, not listed by the server" in out and "5 documents indexed, 1 failed" in err


def test_the_report_s_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    # "unchanged" is 9 letters: its lines, and only those, had the id one column to the right.
    cli._print_ingest([("doc-a", 1, 3, "added"), ("doc-b", 2, 5, "replaced"), ("doc-c", 1, 2, "unchanged")],
                      [("b.txt", "why")], unlisted=4, errors_not_listed=2)
    out, err = capsys.readouterr()
    lines = out.splitlines() + err.splitlines()[:2]
    assert lines == ["added     doc-a  (1 parents, 3 children)", "replaced  doc-b  (2 parents, 5 children)",
                     "unchanged doc-c  (1 parents, 2 children)", "...       4 more stored, not listed by the server",
                     "FAILED    b.txt: why", "...       2 more errors"]


def test_ingest_waits_as_long_as_it_takes_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large file takes minutes to embed, and a deadline cut a batch short, losing it all: an
    ingest has no deadline unless ``--timeout`` sets one; the other commands keep 60 s. The
    client's default timeout does not bound an ingest or a delete, so theirs is given per call."""
    import retrieval_client

    asked: list[tuple[str, float | None]] = []

    class Client(FakeClient):
        def __init__(self, target: str, *, timeout: float | None = 60.0, **_: object) -> None:
            self.timeout = timeout

        def ingest(self, docs: list[object], *, timeout: float | None = None) -> pb.IngestDocumentsResponse:
            asked.append(("ingest", timeout))
            return pb.IngestDocumentsResponse()

        def delete(self, document_ids: list[str], *, timeout: float | None = None) -> pb.DeleteDocumentsResponse:
            asked.append(("delete", timeout))
            return pb.DeleteDocumentsResponse()

        def search(self, text: str, top_k: int) -> pb.SearchResponse:
            asked.append(("search", self.timeout))
            return pb.SearchResponse()

    monkeypatch.setattr(retrieval_client, "RetrievalClient", Client)
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    for argv in (["ingest", str(tmp_path / "a.txt")], ["ingest", str(tmp_path / "a.txt"), "--timeout", "5"], ["search", "x"],
                 ["search", "x", "--timeout", "0"], ["delete", "a"], ["delete", "a", "--timeout", "5"]):
        cli.main([*argv, "--quiet"] if argv[0] == "ingest" else argv)
    assert asked == [("ingest", None), ("ingest", 5.0), ("search", 60.0), ("search", 0), ("delete", 60.0), ("delete", 5.0)]


def _client(ingest: Callable[[list[pb.DocumentInput]], pb.IngestDocumentsResponse]) -> type:
    """retrieval_client.RetrievalClient as the command uses it, each ingest answered by ``ingest``."""

    class Client(FakeClient):
        def ingest(self, docs: list[pb.DocumentInput], *, timeout: float | None = None) -> pb.IngestDocumentsResponse:
            return ingest(docs)

    return Client


def _stored(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
    return pb.IngestDocumentsResponse(documents=[pb.IngestedDocument(document_id=Path(d.filename).stem) for d in docs])


def _recording(monkeypatch: pytest.MonkeyPatch, answer: Callable[[list[pb.DocumentInput]], pb.IngestDocumentsResponse] = _stored) -> list[str]:
    """The command's client replaced by one that answers each ingest with ``answer``; the file
    names it was sent, in order."""
    import retrieval_client

    sent: list[str] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.extend(d.filename for d in docs)
        return answer(docs)

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    return sent


class _Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_a_full_disk_stops_the_run_and_what_was_stored_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """RESOURCE_EXHAUSTED is one file's only when it is about the message's size: a full disk
    (DISK_FULL) stops the run instead of uploading every file alone. What earlier batches stored is
    listed before the error; and two names that the server cleans to one id (a zero-width space)
    are one id here too."""
    import retrieval_client

    monkeypatch.setattr(cli, "BATCH_FILES", 2)
    sent: list[list[str]] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.append([d.filename for d in docs])
        if len(sent) > 1:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk below the free-space floor (DISK_FULL), retry in 60 s")
        return _stored(docs)

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.txt").write_text("Aardvarks dig.")
    (tmp_path / "x" / "b.txt").write_text("Bees hum.")
    (tmp_path / "y").mkdir()
    hidden = tmp_path / "y" / "a\u200b.txt"  # a zero-width space, which the server trims
    hidden.write_text("Another aardvark.")
    for i in range(6):
        (tmp_path / "y" / f"c{i}.txt").write_text("Cats nap.")
    assert cli.main(["ingest", str(tmp_path / "x"), str(tmp_path / "y"), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert sent == [["a.txt", "b.txt"], ["c0.txt"]]  # the second batch (its other file refused here): stopped, nothing sent alone
    assert out.splitlines() == ["added     a  (0 parents, 0 children)", "added     b  (0 parents, 0 children)"]
    # A zero-width space is part of text (Thai and Khmer break lines with it): printed as it is.
    assert f"FAILED    {hidden}: document_id 'a' is also" in err
    assert "error: RESOURCE_EXHAUSTED: disk below the free-space floor" in err
    # The files it did not send, c0.txt (its batch refused) and the later batches', were neither
    # counted nor named: "2 documents indexed, 1 failed" read as the whole run.
    assert [line.removeprefix("NOT SENT ") for line in err.splitlines() if line.startswith("NOT SENT ")] == [
        str(tmp_path / "y" / f"c{i}.txt") for i in range(6)]
    assert "2 documents indexed, 1 failed, 6 files not sent (the run stopped)" in err


def test_a_run_stopped_by_a_read_only_server_counts_the_files_it_did_not_send_and_names_the_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A refusal in the middle of a batch resent a file at a time: the files sent alone before it
    are not among those not sent; past UNSENT_NAMED names, the rest are counted."""
    import retrieval_client

    monkeypatch.setattr(cli, "BATCH_FILES", 3)
    sent: list[list[str]] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.append([d.filename for d in docs])
        if len(docs) > 1:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "one of the files is too large")
        if docs[0].filename == "f01.txt":
            raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, "the server is read-only (RETRIEVAL_READ_ONLY)")
        return _stored(docs)

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    for i in range(cli.UNSENT_NAMED + 5):
        (tmp_path / f"f{i:02}.txt").write_text("Ferrets burrow.")
    assert cli.main(["ingest", str(tmp_path), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert sent == [["f00.txt", "f01.txt", "f02.txt"], ["f00.txt"], ["f01.txt"]]
    assert out.splitlines() == ["added     f00  (0 parents, 0 children)"]
    named = [line.removeprefix("NOT SENT ") for line in err.splitlines() if line.startswith("NOT SENT ")]
    assert named == [str(tmp_path / f"f{i:02}.txt") for i in range(1, cli.UNSENT_NAMED + 1)]
    assert "...       4 more not sent\n" in err and "1 documents indexed, 0 failed, 14 files not sent (the run stopped)" in err
    assert "error: FAILED_PRECONDITION: the server is read-only" in err


@pytest.mark.parametrize("stop", [_Refused(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), KeyboardInterrupt()])
def test_a_run_stopped_during_a_call_names_its_files_apart_from_those_not_sent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stop: BaseException) -> None:
    """A call past its deadline, or stopped by Ctrl-C, was received by the server, which may have
    stored its documents in part: its files were reported NOT SENT, as if sending them again were all."""
    import retrieval_client

    monkeypatch.setattr(cli, "BATCH_FILES", 2)
    sent: list[list[str]] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.append([d.filename for d in docs])
        if len(sent) > 1:
            raise stop
        return _stored(docs)

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("Ferrets burrow.")
    assert cli.main(["ingest", str(tmp_path), "--quiet"]) == 1
    _, err = capsys.readouterr()
    assert sent == [["f0.txt", "f1.txt"], ["f2.txt", "f3.txt"]]
    assert [line.removeprefix("SENT, OUTCOME UNKNOWN ") for line in err.splitlines() if line.startswith("SENT, OUTCOME UNKNOWN ")] == [
        str(tmp_path / "f2.txt"), str(tmp_path / "f3.txt")]
    assert [line.removeprefix("NOT SENT ") for line in err.splitlines() if line.startswith("NOT SENT ")] == [str(tmp_path / "f4.txt")]
    assert "2 documents indexed, 0 failed, 2 files sent, outcome unknown, 1 files not sent (the run stopped)" in err


def test_a_file_whose_name_is_not_utf8_fails_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Its name becomes lone surrogates, which a request refuses (and the local stores): the
    whole run stopped, nothing stored."""
    sent = _recording(monkeypatch)
    (tmp_path / "good.txt").write_text("Glaciers carve valleys.")
    (Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.txt"))).write_text("Coffee.")
    assert cli.main(["ingest", str(tmp_path), "--quiet"]) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert sent == ["good.txt"] and out.splitlines() == ["added     good  (0 parents, 0 children)"]
    assert f"FAILED    {tmp_path}/caf\\xe9.txt: its path is not UTF-8 text: rename it" in err  # its bytes, escaped


def _stored_rows(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
    """As the server answers: a .jsonl file's documents are its rows, each by its ``_id``."""
    import json

    ids = [json.loads(line)["_id"] if d.filename.endswith(".jsonl") else Path(d.filename).stem
           for d in docs for line in (d.content.decode().splitlines() if d.filename.endswith(".jsonl") else [""])]
    return pb.IngestDocumentsResponse(documents=[pb.IngestedDocument(document_id=i) for i in ids])


def test_a_jsonl_rows_id_is_taken_for_the_rest_of_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Only files' own ids were remembered: a file named as a row of an earlier request's JSONL
    replaced that row without a word, and the run exited 0. A row whose id an earlier request's file
    took cannot be seen before it is sent: it is reported as what replaced that file's document."""
    monkeypatch.setattr(cli, "BATCH_FILES", 1)  # as two files 33 apart in a folder
    sent = _recording(monkeypatch, _stored_rows)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (rows := tmp_path / "a" / "rows.jsonl").write_text('{"_id": "notes", "text": "A row."}\n{"_id": "other", "text": "B."}\n')
    (notes := tmp_path / "b" / "notes.txt").write_text("Notes.")
    assert cli.main(["ingest", str(tmp_path / "a"), str(tmp_path / "b"), "--quiet"]) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert sent == ["rows.jsonl"] and [line.split()[:2] for line in out.splitlines()] == [["added", "notes"], ["added", "other"]]
    assert f"FAILED    {notes}: document_id 'notes' is also {rows}'s" in err and "2 documents indexed, 1 failed" in err

    sent.clear()
    assert cli.main(["ingest", str(tmp_path / "b"), str(tmp_path / "a"), "--quiet"]) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert sent == ["notes.txt", "rows.jsonl"]
    assert f"FAILED    {rows} (notes): document_id 'notes' is also {notes}'s, stored before in this run, which this row replaced" in err


def test_a_folder_walk_reports_what_it_cannot_read_and_skips_hidden_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A folder it could not list, a link to nothing and a link to a folder were skipped without a
    word, and .git's files were ingested. Links to folders are followed, each folder read once
    (a link may loop); a hidden file named is read."""
    import retrieval_client

    sent: list[str] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.extend(d.source for d in docs)
        return _stored(docs)

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    for folder in (docs / "sub", docs / ".git", docs / "locked", outside):
        folder.mkdir(parents=True)
    for f in (docs / "a.txt", docs / ".draft.txt", docs / ".git" / "HEAD.txt", docs / "sub" / "b.md", docs / "locked" / "l.txt",
              outside / "c.txt"):
        f.write_text(f"The text of {f.name}.")
    (docs / "linked").symlink_to(outside)
    (docs / "sub" / "loop").symlink_to(docs)
    (docs / "broken.txt").symlink_to(tmp_path / "missing.txt")
    scandir = os.scandir

    def locked(path: str) -> object:  # as chmod 000 does for anyone but root
        if str(path) == str(docs / "locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", locked)
    assert cli.main(["ingest", str(docs), str(docs / ".draft.txt"), "--quiet"]) == cli.SOME_FAILED
    _, err = capsys.readouterr()
    assert sent == [str(docs / "a.txt"), str(docs / "linked" / "c.txt"), str(docs / "sub" / "b.md"), str(docs / ".draft.txt")]
    assert f"FAILED    {docs / 'broken.txt'}: a symbolic link to {tmp_path / 'missing.txt'}, which does not exist" in err
    assert f"FAILED    {docs / 'locked'}: Permission denied" in err and "4 documents indexed, 2 failed" in err


def test_a_file_reached_twice_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Named and found in a folder named too (``ingest docs docs/owls.txt``), or named by two
    paths: it was reported as taking its own id, and the run exited 3. Another file of that id
    still is."""
    sent = _recording(monkeypatch)
    (docs := tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "owls.txt").write_text("Owls hunt at night.")
    (docs / "owls.txt").write_text("Another file of the same id.")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ingest", "docs/owls.txt", str(tmp_path / "docs"), "./docs/owls.txt", "--quiet"]) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert sent == ["owls.txt"] and out.splitlines() == ["added     owls  (0 parents, 0 children)"]
    assert err.count("FAILED") == 1 and f"FAILED    {docs / 'owls.txt'}: document_id 'owls' is also docs/owls.txt's" in err

def test_a_run_that_finds_nothing_to_ingest_fails_and_says_what_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """It exited 0, "0 documents indexed, 0 failed"."""
    import retrieval_client

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(_stored))
    (tmp_path / "report.docx").write_bytes(b"PK")
    (tmp_path / ".notes.txt").write_text("Hidden.")
    assert cli.main(["ingest", str(tmp_path), "--quiet"]) == 1
    _, err = capsys.readouterr()
    assert f"no file to ingest in {tmp_path}: a folder's files are read when their names end in .htm, .html, .jsonl, .markdown, .md, .pdf, .txt" in err


def test_a_file_too_large_or_not_regular_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A 1 GB file took 1.3 GB of memory before the server refused it, and a FIFO's read waited for
    a writer. Both are refused by what stat says: the FIFO is not opened (its writer, here, is let
    go at the end, by a reader held open until it is done), the large file not read (sparse: its
    size costs no disk)."""
    import threading

    sent = _recording(monkeypatch)
    (tmp_path / "ok.txt").write_text("Otters float.")
    huge = tmp_path / "huge.txt"
    huge.touch()
    os.truncate(huge, 256 * 1024 * 1024 + 1)
    os.mkfifo(pipe := tmp_path / "pipe.txt")

    def write() -> None:
        with open(pipe, "wb") as w:  # waits for a reader
            w.write(b"Text a reader of the FIFO gets.")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert cli.main(["ingest", str(tmp_path), "--quiet"]) == cli.SOME_FAILED
    finally:
        reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(reader)
    _, err = capsys.readouterr()
    assert sent == ["ok.txt"]
    assert (f"FAILED    {huge}: its size, 268435457 bytes, is over the limit of 268435456 bytes (the largest request this client sends)"
            in err)
    assert f"FAILED    {pipe}: not a regular file (a FIFO)" in err


def test_a_local_run_stopped_by_ctrl_c_lists_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C once a document is written: the run said "0 documents indexed" and NOT SENT for every
    file of the batch, with documents stored. Now what it wrote is listed, a file of rows some of
    which were written is named apart, and only the files none of whose documents were are NOT SENT."""
    import signal
    import sqlite3

    from retrieval_server.backends.metadata_store import MetadataStore

    replace_document = MetadataStore.replace_document

    async def interrupted(self: MetadataStore, doc: object, *args: object, **kwargs: object) -> bool:
        replaced = await replace_document(self, doc, *args, **kwargs)  # type: ignore[arg-type]
        if doc.document_id == "r1":  # type: ignore[attr-defined]
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: asyncio.run cancels the command
        return replaced

    monkeypatch.setattr(MetadataStore, "replace_document", interrupted)
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(data := tmp_path / "data"))
    monkeypatch.setenv("RETRIEVAL_UPSERT_BATCH_SIZE", "1")  # a write per document, as in a long run
    (docs := tmp_path / "docs").mkdir()
    ids = {"a.txt": {"a"}, "b.txt": {"b"}, "rows.jsonl": {"r1", "r2", "r3"}, "z.txt": {"z"}}
    (docs / "a.txt").write_text("Aardvarks dig burrows at night.")
    (docs / "b.txt").write_text("Beavers build dams across streams.")
    (docs / "rows.jsonl").write_text("".join(f'{{"_id": "{i}", "text": "Row {i} is about rivers and their deltas."}}\n'
                                             for i in sorted(ids["rows.jsonl"])))
    (docs / "z.txt").write_text("Zebras graze on the savanna.")
    assert cli.main(["ingest", "--local", "--quiet", str(docs)]) == 1
    out, err = capsys.readouterr()
    with contextlib.closing(sqlite3.connect(data / "metadata.sqlite3")) as db:
        stored = {row[0] for row in db.execute("SELECT document_id FROM documents")}
    assert {"a", "b", "r1"} <= stored and "z" not in stored
    assert {line.split()[1] for line in out.splitlines()} == stored
    assert f"{len(stored)} documents indexed, 0 failed, 1 files stored in part, 1 files not sent (the run stopped)" in err
    assert [line for line in err.splitlines() if line.startswith(("NOT SENT", "STORED IN PART"))] == [
        f"STORED IN PART {docs / 'rows.jsonl'}", f"NOT SENT {docs / 'z.txt'}"]
    assert err.splitlines()[-1] == "error: ingest interrupted"


def test_a_local_run_stopped_by_ctrl_c_reports_finished_files_as_they_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C right after a file of rows' last row was written: it was reported STORED IN PART, and
    a file the batch had already refused (no text) NOT SENT with "0 failed", its failure known only
    to the report a stopped run never gets. Each is reported as it ended."""
    import signal

    from retrieval_server.backends.metadata_store import MetadataStore

    replace_document = MetadataStore.replace_document

    async def interrupted(self: MetadataStore, doc: object, *args: object, **kwargs: object) -> bool:
        replaced = await replace_document(self, doc, *args, **kwargs)  # type: ignore[arg-type]
        if doc.document_id == "r3":  # type: ignore[attr-defined]
            signal.raise_signal(signal.SIGINT)
        return replaced

    monkeypatch.setattr(MetadataStore, "replace_document", interrupted)
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RETRIEVAL_UPSERT_BATCH_SIZE", "1")
    (docs := tmp_path / "docs").mkdir()
    (docs / "a.txt").write_text("Aardvarks dig burrows at night.")
    (docs / "b.html").write_text("")
    (docs / "rows.jsonl").write_text("".join(f'{{"_id": "r{i}", "text": "Row {i} is about rivers."}}\n' for i in (1, 2, 3)))
    (docs / "z.txt").write_text("Zebras graze on the savanna.")
    assert cli.main(["ingest", "--local", "--quiet", str(docs)]) == 1
    out, err = capsys.readouterr()
    assert [line.split()[1] for line in out.splitlines()] == ["a", "r1", "r2", "r3"]
    assert [line for line in err.splitlines() if line.startswith(("FAILED", "NOT SENT", "STORED IN PART"))] == [
        f"FAILED    {docs / 'b.html'}: no text to index", f"NOT SENT {docs / 'z.txt'}"]
    assert "4 documents indexed, 1 failed, 1 files not sent (the run stopped)" in err


def test_a_server_that_cannot_be_reached_was_sent_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """UNAVAILABLE was always read as a call that may have stored some of its files: a wrong port
    reported every file of the first batch SENT, OUTCOME UNKNOWN. A call no connection took was not sent."""
    import socket

    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("Ferrets burrow.")
    with socket.socket() as closed:  # bound, never listening: a connection is refused, and no other test takes the port
        closed.bind(("127.0.0.1", 0))
        code = cli.main(["ingest", str(tmp_path), "--server", f"127.0.0.1:{closed.getsockname()[1]}", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 1 and "SENT, OUTCOME UNKNOWN" not in err
    assert [line.removeprefix("NOT SENT ") for line in err.splitlines() if line.startswith("NOT SENT ")] == [
        str(tmp_path / f"f{i}.txt") for i in range(3)]
    assert "0 documents indexed, 0 failed, 3 files not sent (the run stopped)" in err
    assert "error: UNAVAILABLE: failed to connect to all addresses" in err


def test_a_failure_the_server_names_by_file_name_is_reported_with_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The server names a failure by the file's name: two folders' corpus.jsonl, in one request,
    both failed as "corpus.jsonl:line 2", and nothing told which. Files of one name go
    in separate requests, and each failure is printed with its path."""
    calls: list[list[str]] = []

    def answer(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        calls.append([d.filename for d in docs])
        return pb.IngestDocumentsResponse(errors=[pb.IngestError(source=f"{d.filename}:line 2", reason="invalid JSON") for d in docs]
                                          + [pb.IngestError(source=d.filename, reason="1 more rows could not be stored") for d in docs])

    _recording(monkeypatch, answer)
    for year in ("2019", "2020"):
        (tmp_path / year).mkdir()
        (tmp_path / year / "corpus.jsonl").write_text('{"_id": "a", "text": "A."}\n{not json\n')
        (tmp_path / year / "notes.jsonl").write_text('{"_id": "n", "text": "N."}\n')
    assert cli.main(["ingest", str(tmp_path / "2019"), str(tmp_path / "2020"), "--quiet"]) == 1
    _, err = capsys.readouterr()
    assert calls == [["corpus.jsonl", "notes.jsonl"], ["corpus.jsonl", "notes.jsonl"]]
    assert [line for line in err.splitlines() if line.startswith("FAILED")] == [
        f"FAILED    {tmp_path / year / name}{line}: {reason}" for year in ("2019", "2020")
        for line, reason in ((":line 2", "invalid JSON"), ("", "1 more rows could not be stored")) for name in ("corpus.jsonl", "notes.jsonl")]


def test_a_local_runs_failures_are_reported_with_their_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path / "data"))
    for year in ("2019", "2020"):
        (tmp_path / year).mkdir()
        (tmp_path / year / "corpus.jsonl").write_text(f'{{"_id": "{year}", "text": "Rivers flood in {year}."}}\n{{not json\n')
    assert cli.main(["ingest", "--local", "--quiet", str(tmp_path / "2019"), str(tmp_path / "2020")]) == cli.SOME_FAILED
    _, err = capsys.readouterr()
    assert [line.split(": ")[0] for line in err.splitlines() if line.startswith("FAILED")] == [
        f"FAILED    {tmp_path / year / 'corpus.jsonl'}:line 2" for year in ("2019", "2020")]


def _failing_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, *, interrupt: bool = False) -> Path:
    """A JSONL file of ``rows`` rows, each of which fails to embed, in a ``--local`` run listing 2
    errors a batch; ``interrupt``: Ctrl-C as the embedding fails."""
    import signal

    from retrieval_server.ingest import indexer

    async def broken(*args: object) -> object:
        if interrupt:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: asyncio.run cancels the command
        raise RuntimeError("model crashed")

    monkeypatch.setattr(indexer.Indexer, "_embed", broken)
    monkeypatch.setattr(indexer, "MAX_REPORTED_ERRORS", 2)
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path / "data"))
    (path := tmp_path / "rows.jsonl").write_text("".join(f'{{"_id": "r{i}", "text": "Row {i} is about rivers."}}\n' for i in range(rows)))
    return path


def test_a_local_run_counts_the_failures_it_does_not_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The line counting the errors past those listed was counted as one failure itself: 3,000 rows
    that failed were summed up as "0 documents indexed, 1001 failed"."""
    rows = _failing_rows(tmp_path, monkeypatch, 5)
    assert cli.main(["ingest", "--local", "--quiet", str(rows)]) == 1
    _, err = capsys.readouterr()
    assert len([line for line in err.splitlines() if line.startswith("FAILED")]) == 2
    assert "...       3 more errors" in err.splitlines() and "0 documents indexed, 5 failed" in err.splitlines()


def test_a_local_run_stopped_by_ctrl_c_lists_as_many_failures_as_a_finished_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Failures are listed as they happen, so that a stopped run lists them: it listed every one of
    them, where a finished run lists a batch's first MAX_REPORTED_ERRORS and counts the rest."""
    rows = _failing_rows(tmp_path, monkeypatch, 5, interrupt=True)
    assert cli.main(["ingest", "--local", "--quiet", str(rows)]) == 1
    _, err = capsys.readouterr()
    assert len([line for line in err.splitlines() if line.startswith("FAILED")]) == 2
    assert "...       3 more errors" in err.splitlines() and "0 documents indexed, 5 failed" in err
    assert err.splitlines()[-1] == "error: ingest interrupted"


def test_a_run_counts_the_failures_the_server_does_not_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    def answer(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        return pb.IngestDocumentsResponse(errors=[pb.IngestError(source=f"{d.filename}:line {n}", reason="embedding failed") for d in docs
                                                  for n in (1, 2)] + [pb.IngestError(source="", reason="3 more errors")])

    _recording(monkeypatch, answer)
    (tmp_path / "rows.jsonl").write_text("".join(f'{{"_id": "r{i}", "text": "Row {i}."}}\n' for i in range(5)))
    assert cli.main(["ingest", str(tmp_path / "rows.jsonl"), "--quiet"]) == 1
    _, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith(("FAILED", "..."))] == [
        f"FAILED    {tmp_path / 'rows.jsonl'}:line 1: embedding failed", f"FAILED    {tmp_path / 'rows.jsonl'}:line 2: embedding failed",
        "...       3 more errors"]
    assert "0 documents indexed, 5 failed" in err.splitlines()


def test_a_file_is_sent_by_its_normalized_path_reported_as_given_and_unchanged_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The source was the path as typed, and then the absolute path, which put the host's folders in
    every hit; and one found unchanged was reported "replaced"."""
    import retrieval_client

    sent: list[str] = []

    def ingest(docs: list[pb.DocumentInput]) -> pb.IngestDocumentsResponse:
        sent.extend(d.source for d in docs)
        return pb.IngestDocumentsResponse(
            documents=[pb.IngestedDocument(document_id="a", replaced=True, unchanged=True)],
            errors=[pb.IngestError(source="b.jsonl:line 2", reason="invalid JSON")])

    monkeypatch.setattr(retrieval_client, "RetrievalClient", _client(ingest))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Aardvarks dig.")
    (tmp_path / "docs" / "b.jsonl").write_text('{"_id": "b", "text": "Badgers dig."}\n{broken\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ingest", "./docs/a.txt", "docs/../docs/b.jsonl", "--quiet"]) == cli.SOME_FAILED
    out, err = capsys.readouterr()
    assert sent == ["docs/a.txt", "docs/b.jsonl"]
    assert out.splitlines() == ["unchanged a  (0 parents, 0 children)"]
    assert "FAILED    docs/../docs/b.jsonl:line 2: invalid JSON" in err


def test_a_local_file_sent_again_by_another_path_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Its source was the path as typed, in what finds a document unchanged: ./docs/a.txt after
    docs/a.txt chunked and embedded the file again, and was reported "replaced". Its absolute path
    is another source, which is written without embedding the file again."""
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Aardvarks dig burrows at night.")
    monkeypatch.chdir(tmp_path)
    lines = []
    for path in ("docs/a.txt", "./docs/a.txt", "docs/../docs/a.txt", str(tmp_path / "docs" / "a.txt")):
        assert cli.main(["ingest", "--local", "--quiet", path]) == 0
        lines += capsys.readouterr().out.splitlines()[:1]
    assert [line.split()[0] for line in lines] == ["added", "unchanged", "unchanged", "replaced"], lines


def test_the_same_tree_synced_to_another_folder_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The source was the absolute path: the same corpus ingested from another checkout (a CI
    workspace, a second operator) was chunked and embedded again, file by file."""
    monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path / "data"))
    lines = []
    for checkout in ("build-41", "build-42"):
        (tmp_path / checkout / "docs").mkdir(parents=True)
        (tmp_path / checkout / "docs" / "a.txt").write_text("Aardvarks dig burrows at night.")
        monkeypatch.chdir(tmp_path / checkout)
        assert cli.main(["ingest", "--local", "--quiet", "docs/a.txt"]) == 0
        lines += capsys.readouterr().out.splitlines()[:1]
    assert [line.split()[0] for line in lines] == ["added", "unchanged"], lines
