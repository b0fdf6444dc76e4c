"""Start-up runs without cyclic collection; once a command has started, collection resumes and
no longer traverses what start-up built."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

from retrieval_server import startup_gc
from tests.support.paths import inherited_env


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_keeps_start_up_objects_and_collects_what_comes_after() -> None:
    try:
        startup_gc.defer_collection()
        assert not gc.isenabled()
        before = _cycle()
        startup_gc.settle()
        assert gc.isenabled()
        after = _cycle()
        gc.collect()
        # Start-up garbage stays (the price of not collecting it); later garbage is collected.
        assert before() is not None
        assert after() is None
    finally:
        gc.unfreeze()
        gc.enable()
        gc.collect()
    assert before() is None


def test_settle_freezes_nothing_where_collection_was_not_deferred() -> None:
    """``cli.main`` called in-process: the caller's objects stay collectable."""
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    startup_gc.settle()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_ingest_local_starts_up_without_collection_and_ingests_with_it(tmp_path: Path) -> None:
    """Through the console script's entry (``cli.run``), as a user runs the command."""
    (tmp_path / "a.txt").write_text("Tides are caused by the gravitational pull of the moon.")
    (tmp_path / "b.txt").write_text("Sourdough rises because wild yeast ferments the dough.")
    seen = tmp_path / "seen.json"
    script = (
        "import gc, json, sys\n"
        "from retrieval_server import cli\n"
        "from retrieval_server.app import Application\n"
        "record = {}\n"
        "open_, ingest = Application.open, Application.ingest\n"
        "async def opening(self, **kw):\n"
        "    record['opening'] = gc.isenabled()\n"
        "    return await open_(self, **kw)\n"
        "async def ingesting(self, *a, **kw):\n"
        "    record['ingesting'] = gc.isenabled()\n"
        "    record['frozen'] = gc.get_freeze_count()\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps(record))\n"
        "    return await ingest(self, *a, **kw)\n"
        "Application.open, Application.ingest = opening, ingesting\n"
        f"sys.argv = ['retrieval-server', 'ingest', '--local', '--quiet', {str(tmp_path / 'a.txt')!r}, {str(tmp_path / 'b.txt')!r}]\n"
        "cli.run()\n"
    )
    _run(script, tmp_path)
    record = json.loads(seen.read_text())
    assert record["opening"] is False
    assert record["ingesting"] is True
    assert record["frozen"] > 10_000  # the modules, classes and schemas start-up built


def _run(script: str, tmp_path: Path) -> str:
    """``script`` in a new interpreter with a fresh data folder; its stdout."""
    env = inherited_env()
    env.update(RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_METRICS_ENABLED="false")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


_FAKE_SERVE = (
    "import gc, json, sys\n"
    "from retrieval_server import server\n"
    "record = {}\n"
    "async def serve(settings, on_ready=None, on_stopping=None):\n"
    "    record['starting'] = gc.isenabled()\n"
    "    if on_ready is not None:\n"
    "        on_ready()\n"
    "    record['ready'] = gc.isenabled()\n"
    "    record['frozen'] = gc.get_freeze_count()\n"
    "server.serve = serve  # what serving does is not the point: when collection resumes is\n"
)


def _printed_record(script: str, tmp_path: Path) -> dict[str, object]:
    record: dict[str, object] = json.loads(_run(script, tmp_path).splitlines()[-1])
    return record


def test_serve_starts_up_without_collection_and_serves_with_it(tmp_path: Path) -> None:
    script = _FAKE_SERVE + (
        "from retrieval_server import cli\n"
        "sys.argv = ['retrieval-server', 'serve']\n"
        "try:\n"
        "    cli.run()\n"
        "finally:\n"
        "    print(json.dumps(record))\n"
    )
    record = _printed_record(script, tmp_path)
    assert record["starting"] is False and record["ready"] is True
    assert isinstance(record["frozen"], int) and record["frozen"] > 10_000


def test_a_worker_starts_up_without_collection_and_reports_ready_with_it(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()  # the worker's own temporary folder, which the supervisor makes
    script = _FAKE_SERVE + (
        "import pathlib\n"
        "from multiprocessing import Pipe\n"
        "from retrieval_server import supervisor\n"
        "from retrieval_server.config import load_settings\n"
        "receiver, sender = Pipe(duplex=False)\n"
        f"supervisor._run_worker(load_settings(), 0, sender, pathlib.Path({str(tmp_path / 'scratch')!r}))\n"
        "record['report'] = receiver.recv()\n"
        "print(json.dumps(record))\n"
    )
    record = _printed_record(script, tmp_path)
    assert record["starting"] is False and record["ready"] is True and record["report"] == "ready"
    assert isinstance(record["frozen"], int) and record["frozen"] > 10_000
