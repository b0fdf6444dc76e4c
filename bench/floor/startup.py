"""Start-up and command overheads, each beside what it cannot go below, in one run.

* ``serve`` to SERVING: from the process's start to a Health answer of SERVING (the index opened,
  the model loaded, numba's kernels loaded from its cache), beside a bare Python start and the
  model's own load (an ONNX session made in a new process, as the server makes its first);
* each client command (``health``, ``search``, ``query``): the command's wall time beside the same
  RPC made from a warm in-process client: the difference is the command's own overhead
  (interpreter, imports, argument parsing, channel);
* ``ingest --local`` of two small files: the wall time beside the model's part (its session load
  and the embedding of the same chunks, in a new process) and the imports of that path (a process that
  imports the application and exits): the command should be dominated by the model.

The project's own modules are byte-compiled first (:func:`compile_project`), as ``pip install``
leaves them: an editable checkout on a machine with ``PYTHONDONTWRITEBYTECODE`` set otherwise
compiles them again at every start (about 80 ms here), which no installed service pays.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.server_process import service_env
from retrieval_client import RetrievalClient


@dataclass(slots=True)
class StartupReport:
    python_ms: float = 0.0
    serve_to_serving_ms: float = 0.0
    model_load_ms: float = 0.0
    #: command -> (wall ms, the same RPC from a warm client ms)
    commands: dict[str, tuple[float, float]] = field(default_factory=dict)
    ingest_local_ms: float = 0.0
    ingest_model_ms: float = 0.0
    ingest_imports_ms: float = 0.0

    def lines(self) -> list[str]:
        out = [
            f"python start                      {self.python_ms:8.0f} ms",
            f"serve to SERVING                  {self.serve_to_serving_ms:8.0f} ms  (model session load {self.model_load_ms:.0f} ms, "
            f"python start {self.python_ms:.0f} ms)",
        ]
        for name, (wall, rpc) in self.commands.items():
            out.append(f"retrieval-server {name:16s} {wall:8.0f} ms  (the RPC itself {rpc:.1f} ms: own overhead {wall - rpc:.0f} ms)")
        if self.ingest_local_ms:
            share = self.ingest_model_ms / self.ingest_local_ms
            out.append(f"ingest --local, two small files   {self.ingest_local_ms:8.0f} ms  (model load + embedding {self.ingest_model_ms:.0f} ms: "
                       f"{share:.0%}; python start + imports {self.ingest_imports_ms:.0f} ms)")
        return out


def _median_wall_ms(argv: Sequence[str], env: Mapping[str, str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=dict(env), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def compile_project() -> None:
    """Byte-compile the packages a server and the CLI import, as an install does."""
    import retrieval
    import retrieval_client
    import retrieval_server
    import scoring_core

    for package in (retrieval_server, scoring_core, retrieval_client, retrieval):
        if not compileall.compile_dir(Path(package.__file__).parent, quiet=1):
            # A read-only checkout: the rows then include compiling, and say so here.
            print(f"could not byte-compile all of {package.__name__}: the start-up rows include compiling it", flush=True)


def python_start_ms(repeat: int = 5) -> float:
    return _median_wall_ms([sys.executable, "-c", "pass"], os.environ, repeat)


def serve_to_serving_ms(settings: Mapping[str, str], log: Path, timeout_s: float = 300.0) -> float:
    """One cold start of ``retrieval-server serve``: process start to the first SERVING health answer."""
    from bench.server_process import free_port, wait_healthy

    port = free_port()
    env = service_env({**settings, "RETRIEVAL_PORT": str(port), "RETRIEVAL_METRICS_PORT": "0"})
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "retrieval_server.cli", "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            # Polled often: at the default 0.3 s the start-up was measured in steps of about 300 ms.
            wait_healthy(f"127.0.0.1:{port}", proc, timeout_s, log, poll_s=0.01)
            return (time.perf_counter() - t0) * 1e3
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def _in_new_process(function: str, env: Mapping[str, str], *args: str) -> float:
    """``function(*args)`` of this module in a new process: the milliseconds it returns.

    A model's part is measured where a command pays it, in a process that has made no session
    yet: the first one also starts onnxruntime, and the first run of it warms up. In one process
    the second load took 72-92 ms against 128-132 for the first, the second embedding of the same
    texts 290 against 320-332 ms.
    """
    code = f"import sys; from bench.floor import startup; print(startup.{function}(*sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *args], env=dict(env), check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def model_load_ms(model_dir: Path | None) -> float:
    """An ONNX session of the model, as a starting server makes it (in a new process)."""
    return _in_new_process("model_load_here", service_env({}), str(model_dir or ""))


def model_load_here(model_dir: str) -> float:
    from retrieval_server.backends.embedder import resolve_model
    from scoring_core.encoders import BiEncoder

    files = resolve_model(Path(model_dir) if model_dir else None)
    t0 = time.perf_counter()
    BiEncoder(files.model_path, files.tokenizer_path)
    return (time.perf_counter() - t0) * 1e3


def command_overheads(target: str, query: str, repeat: int = 3) -> dict[str, tuple[float, float]]:
    """Each client command's wall time, beside the same RPC from a warm in-process client."""
    cli = [sys.executable, "-m", "retrieval_server.cli"]
    env = service_env({})
    out: dict[str, tuple[float, float]] = {}
    with RetrievalClient(target, timeout=120) as client:
        rpcs = {
            "health": (["health"], lambda: client.health()),
            "search": (["search", query], lambda: client.search(query)),
            "query": (["query", query, "--strategy", "hybrid"], lambda: client.query(query, strategy="hybrid")),
        }
        for name, (args, rpc) in rpcs.items():
            rpc()
            t0 = time.perf_counter()
            for _ in range(repeat):
                rpc()
            rpc_ms = (time.perf_counter() - t0) * 1e3 / repeat
            wall = _median_wall_ms([*cli, *args, "--server", target], env, repeat)
            out[name] = (round(wall, 1), round(rpc_ms, 2))
    return out


def ingest_imports_ms(repeat: int = 3) -> float:
    """What ``ingest --local`` imports before it does anything: the command's module and the
    application, with collection deferred as the command defers it (``cli.run``). The process then
    leaves as the command does, without the interpreter's teardown, which would add the freeing of
    every imported module (about 55 ms) to a row about importing."""
    code = ("import os, retrieval_server.cli; from retrieval_server import startup_gc; startup_gc.defer_collection(); "
            "import retrieval_server.app; os._exit(0)")
    return _median_wall_ms([sys.executable, "-c", code], service_env({}), repeat)


def ingest_local(settings: Mapping[str, str], model_dir: Path | None, texts: Sequence[str], repeat: int = 5) -> tuple[float, float]:
    """``ingest --local`` of one file per text into a fresh folder; and the model's part of it,
    in a new process: a session load plus embedding the texts the indexer embeds (each
    document's children, and its parents where the index holds parent vectors). Each is the
    median of ``repeat`` runs, one of each in turn: a single pair moved by 10-20 % from one run of
    the benchmark to the next, as the host's load does within seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, text in enumerate(texts):
            f = Path(tmp) / f"doc{i}.txt"
            f.write_text(text)
            files.append(str(f))
        walls, models = [], []
        for run in range(repeat):
            env = service_env({**settings, "RETRIEVAL_DATA_DIR": str(Path(tmp) / f"data{run}")})
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "retrieval_server.cli", "ingest", "--local", "--quiet", *files], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls.append((time.perf_counter() - t0) * 1e3)
            models.append(_in_new_process("ingest_model_here", service_env(settings), str(model_dir or ""), *files))
        return statistics.median(walls), statistics.median(models)


def ingest_model_here(model_dir: str, *files: str) -> float:
    from bench.floor.ingestion import embedded_texts_of, settings_of
    from retrieval_server.backends.embedder import resolve_model
    from retrieval_server.domain import DocumentSource
    from retrieval_server.ingest.chunker import Chunker, ChunkSizes
    from scoring_core.encoders import BiEncoder

    s = settings_of(os.environ)
    model = resolve_model(Path(model_dir) if model_dir else None)
    chunker = Chunker(str(model.tokenizer_path), ChunkSizes(s.parent_chunk_tokens, s.child_chunk_tokens, s.child_overlap_tokens))
    kids, parents, _ = embedded_texts_of([DocumentSource(filename=Path(f).name, content=Path(f).read_bytes()) for f in files], s, chunker)
    t0 = time.perf_counter()
    encoder = BiEncoder(model.model_path, model.tokenizer_path, max_length=s.max_seq_length, batch_size=s.embed_batch_size)
    encoder.encode(kids + parents)  # one command's documents, embedded together as its indexer does
    return (time.perf_counter() - t0) * 1e3
