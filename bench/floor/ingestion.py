"""Ingestion beside the raw encoder on the same chunks, and queries beside an ingest, in one run.

* **throughput**: the service ingests ``documents`` of the dataset (one IngestDocuments call of a
  .jsonl, as bench.quality does) into a fresh data directory; the floor is the encoder alone
  embedding the same child chunks (loaded and chunked in-process with the service's loader and
  chunker, the same batch size and threads, in batches across documents), which is what
  ingestion cannot go below. The two alternate for ``rounds`` rounds (the machine's load drifts),
  each round ingesting the same documents under new ids; the ratio is reported as the median and
  the spread of the rounds.
* **queries during an ingest**: Search at c=1 (embedding + dense search) on the same server, first
  alone, then while one more round is ingested: queries have priority over ingestion, so an ingest
  should not raise their p50 or p95 by more than 2×.

``python -m bench.floor.ingestion`` runs this row alone; with ``--baseline-code`` (another
checkout, e.g. main's worktree) it alternates that checkout's server with this one's, so the two
are compared in the same run (``--help``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.beir import BeirDataset, open_dataset, shared_dir
from bench.load.settings import available_cores
from bench.quality import index as bench_index
from bench.server_process import parse_set, running_server
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from retrieval_server.backends.embedder import resolve_model
from retrieval_server.config import Settings
from retrieval_server.domain import DocumentSource
from retrieval_server.ingest.chunker import Chunker, ChunkSizes
from retrieval_server.ingest.indexer import children_title, embedded_texts
from retrieval_server.ingest.loaders import load
from scoring_core.encoders import BiEncoder

QUERY_TOP_K = 5


@dataclass(frozen=True, slots=True)
class IngestionRound:
    service_s: float
    encoder_s: float

    @property
    def ratio(self) -> float:
        """Encoder time / service time: 1.0 means ingestion costs nothing beyond the model."""
        return round(self.encoder_s / self.service_s, 3) if self.service_s else float("nan")


@dataclass(frozen=True, slots=True)
class IngestionFloor:
    documents: int
    chunks: int
    rounds: tuple[IngestionRound, ...]
    #: Search p50 at c=1 on the same server, nothing else running / while a round is ingested
    query_alone_ms: float = 0.0
    query_during_ingest_ms: float = 0.0
    queries_during_ingest: int = 0
    #: the same, p95
    query_alone_p95_ms: float = 0.0
    query_during_ingest_p95_ms: float = 0.0
    #: how long that round's ingest took while the queries ran (what queries' priority costs it)
    ingest_during_s: float = 0.0

    @property
    def ratio(self) -> float:
        # As precise as the rounds' own ratios: rounded coarser, the median of close rounds could
        # fall outside their spread.
        return round(statistics.median(r.ratio for r in self.rounds), 3) if self.rounds else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        return (min(r.ratio for r in self.rounds), max(r.ratio for r in self.rounds)) if self.rounds else (float("nan"),) * 2

    @property
    def query_ratio(self) -> float:
        """How many times slower a query is while an ingest runs (goal: at most 2)."""
        return round(self.query_during_ingest_ms / self.query_alone_ms, 2) if self.query_alone_ms else float("nan")

    @property
    def query_p95_ratio(self) -> float:
        """The same for the p95 (goal: at most 2)."""
        return round(self.query_during_ingest_p95_ms / self.query_alone_p95_ms, 2) if self.query_alone_p95_ms else float("nan")

    def lines(self) -> list[str]:
        service = statistics.median(r.service_s for r in self.rounds)
        encoder = statistics.median(r.encoder_s for r in self.rounds)
        lo, hi = self.spread
        out = [f"ingest {self.documents} documents ({self.chunks} chunks), {len(self.rounds)} rounds: service {service:.1f} s "
               f"({self.chunks / service:.1f} chunks/s), raw encoder {encoder:.1f} s ({self.chunks / encoder:.1f} chunks/s): "
               f"{self.ratio:.2f} of the encoder's rate (median; rounds {lo:.2f}-{hi:.2f})"]
        if self.queries_during_ingest:
            out.append(f"Search c=1 p50: alone {self.query_alone_ms:.1f} ms, during an ingest {self.query_during_ingest_ms:.1f} ms "
                       f"({self.queries_during_ingest} queries): {self.query_ratio:.2f}x; p95 {self.query_alone_p95_ms:.1f} / "
                       f"{self.query_during_ingest_p95_ms:.1f} ms: {self.query_p95_ratio:.2f}x; that ingest took {self.ingest_during_s:.1f} s "
                       f"({self.chunks / self.ingest_during_s:.1f} chunks/s)")
        return out

    def as_dict(self) -> dict[str, object]:
        return {"documents": self.documents, "chunks": self.chunks, "rounds": [{"service_s": r.service_s, "encoder_s": r.encoder_s,
                "ratio": r.ratio} for r in self.rounds], "ratio": self.ratio, "spread": list(self.spread),
                "query_alone_ms": self.query_alone_ms, "query_during_ingest_ms": self.query_during_ingest_ms,
                "queries_during_ingest": self.queries_during_ingest, "query_ratio": self.query_ratio,
                "query_alone_p95_ms": self.query_alone_p95_ms, "query_during_ingest_p95_ms": self.query_during_ingest_p95_ms,
                "query_p95_ratio": self.query_p95_ratio, "ingest_during_s": self.ingest_during_s}


def _renamed(suffix: str) -> Callable[[str], str]:
    """The same document under another id: the same chunks are ingested again, not skipped as unchanged."""
    def rename(line: str) -> str:
        doc = json.loads(line)
        doc["_id"] = f"{doc['_id']}~{suffix}"
        return json.dumps(doc) + "\n"

    return rename


def _searches(target: str, queries: list[str], stop: threading.Event, warmed: threading.Event, count: int = 0) -> list[float]:
    """Search at c=1, once warm (``warmed`` is set then), until ``stop`` is set (at least one call)
    or ``count`` calls were made: each call's latency, ms."""
    latencies: list[float] = []
    with RetrievalClient(target, timeout=600) as client:
        for q in queries[:3]:  # the first calls pay for the connection and first-use costs
            client.search(q, top_k=QUERY_TOP_K)
        warmed.set()
        i = 0
        while not (latencies and stop.is_set()) and (not count or i < count):
            t0 = time.perf_counter()
            client.search(queries[i % len(queries)], top_k=QUERY_TOP_K)
            latencies.append((time.perf_counter() - t0) * 1e3)
            i += 1
    return latencies


def settings_of(environment: Mapping[str, str]) -> Settings:
    """The settings the server reads: its environment's RETRIEVAL_ variables over this process's."""
    fields = {name.removeprefix("RETRIEVAL_").lower(): value for name, value in environment.items() if name.startswith("RETRIEVAL_")}
    return Settings(**{k: v for k, v in fields.items() if k in Settings.model_fields})


def embedded_texts_of(sources: Iterable[DocumentSource], s: Settings, chunker: Chunker) -> tuple[list[str], list[str], int]:
    """The texts the server embeds for ``sources``: every child, and (with parent vectors, the
    default) every parent; and how many documents they hold."""
    kids: list[str] = []
    parents: list[str] = []
    documents = 0
    for source in sources:
        for loaded in load(source).documents:
            documents += 1
            p, c = chunker.chunk(loaded.document_id, [(page.number, page.text) for page in loaded.pages])
            k, coarse = embedded_texts(loaded.title, p, c, child_title=s.child_title, parent_vectors=s.parent_leg or s.document_leg,
                                       children_title=children_title(chunker, loaded.title, s.max_seq_length))
            kids += k
            parents += coarse
    return kids, parents, documents


def measure(dataset: BeirDataset, settings: Mapping[str, str], model_dir: Path | None, documents: int, threads: int, log: Path,
            *, rounds: int = 3, queries: list[str] | None = None, alone_queries: int = 100, code: Path | None = None) -> IngestionFloor:
    """``rounds`` of (raw encoder, service) on the same chunks; with ``queries``, Search p50 at c=1
    alone and during one more round. ``code``: the checkout whose server to run (default: this one)."""
    _, payload = next(dataset.corpus_batches(documents))
    s = settings_of(settings)
    model = resolve_model(model_dir)
    chunker = Chunker(str(model.tokenizer_path), ChunkSizes(s.parent_chunk_tokens, s.child_chunk_tokens, s.child_overlap_tokens))
    texts, parent_texts, documents_loaded = embedded_texts_of([DocumentSource(filename=f"{dataset.name}.jsonl", content=payload)], s, chunker)
    embedded = (len(texts), len(parent_texts))
    texts += parent_texts
    encoder = BiEncoder(model.model_path, model.tokenizer_path, max_length=s.max_seq_length, batch_size=s.embed_batch_size, threads=threads)
    encoder.encode(["warm up"])

    def encode_s() -> float:
        t0 = time.perf_counter()
        encoder.encode(texts)  # the encoder's best: batches across documents, in order of length
        return time.perf_counter() - t0

    done: list[IngestionRound] = []
    during_s = 0.0
    alone: list[float] = []
    during: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        server_settings = {**settings, "RETRIEVAL_DATA_DIR": str(Path(tmp) / "data"), "RETRIEVAL_PROCESSES": "1",
                           "RETRIEVAL_EMBED_THREADS": str(threads), "RETRIEVAL_CACHE_BACKEND": "none"}
        with running_server(server_settings, log, code=code) as server, RetrievalClient(server.target, role="ADMIN") as client:

            def ingest(suffix: str) -> float:
                _, renamed = next(dataset.corpus_batches(documents, transform=_renamed(suffix)))
                t0 = time.perf_counter()
                resp = client.ingest([pb.DocumentInput(filename=f"{dataset.name}.jsonl", content=renamed)], timeout=3600)
                if resp.errors:
                    raise RuntimeError(f"ingestion failed: {resp.errors[0].reason}")
                if resp.documents_not_listed:
                    raise RuntimeError(f"{resp.documents_not_listed} documents stored past the answer's size limit, their chunks not counted: use fewer --documents")
                stored = (sum(d.child_chunks for d in resp.documents), sum(d.parent_chunks for d in resp.documents) if embedded[1] else 0)
                if stored != embedded:
                    raise RuntimeError(f"the server stored {stored} (children, embedded parents) where the encoder embeds {embedded}: not the same texts")
                return time.perf_counter() - t0

            for r in range(rounds):
                encoder_s = encode_s()
                done.append(IngestionRound(round(ingest(str(r)), 2), round(encoder_s, 2)))
            if queries:
                alone = _searches(server.target, queries, threading.Event(), threading.Event(), count=alone_queries)
                stop, warmed = threading.Event(), threading.Event()

                def search_during() -> None:
                    try:
                        during.extend(_searches(server.target, queries, stop, warmed))
                    finally:
                        warmed.set()  # a failed worker does not leave the ingest waiting

                worker = threading.Thread(target=search_during)
                worker.start()
                try:
                    warmed.wait()
                    during_s = round(ingest("during"), 2)
                finally:
                    stop.set()
                    worker.join()

    def pct(latencies: list[float], q: int) -> float:
        return round(float(np.percentile(latencies, q)), 2) if latencies else 0.0

    return IngestionFloor(documents_loaded, len(texts), tuple(done), pct(alone, 50), pct(during, 50), len(during), pct(alone, 95),
                          pct(during, 95), during_s)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.floor.ingestion", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=shared_dir() / "datasets" / "scifact", help="BEIR folder (corpus and query texts)")
    p.add_argument("--model-dir", type=Path, help="embedding model (default: as bench.quality)")
    p.add_argument("--documents", type=int, default=200, help="documents per ingested round (default 200)")
    p.add_argument("--rounds", type=int, default=3, help="ingestion rounds beside the raw encoder, per server (default 3)")
    p.add_argument("--alone-queries", type=int, default=100,
                   help="Search calls measured with nothing else running (default 100); 0 skips the queries' rows")
    p.add_argument("--baseline-code", type=Path, help="another checkout whose server alternates with this one's")
    p.add_argument("--repeat", type=int, default=1, help="with --baseline-code: how many times the pair runs (default 1)")
    p.add_argument("--set", action="append", default=[], metavar="RETRIEVAL_X=Y", help="extra server setting (repeatable)")
    p.add_argument("--output", type=Path, help="write the results as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (dataset := open_dataset(args.dataset, hint=" (set --dataset, or RETRIEVAL_SHARED_DIR)")) is None:
        return 2
    model_dir = args.model_dir or bench_index.default_model_dir()
    try:
        extra = parse_set(args.set)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    settings = {"RETRIEVAL_LOG_LEVEL": "WARNING", **({"RETRIEVAL_MODEL_DIR": str(model_dir.resolve())} if model_dir else {}), **extra}
    queries = list(dataset.queries().values())
    codes: list[tuple[str, Path | None]] = [("this checkout", None)]
    if args.baseline_code:
        codes.insert(0, (f"baseline {args.baseline_code}", args.baseline_code.resolve()))
    log_dir = bench_index.RESULTS / "floor-logs"
    results: dict[str, list[dict[str, object]]] = {name: [] for name, _ in codes}
    for i in range(args.repeat if args.baseline_code else 1):
        for name, code in codes:
            row = measure(dataset, settings, model_dir, args.documents, available_cores(), log_dir / "ingest-row.log", rounds=args.rounds,
                          queries=queries if args.alone_queries > 0 else None, alone_queries=args.alone_queries, code=code)
            results[name].append(row.as_dict())
            print(f"[{i + 1}] {name}:\n  " + "\n  ".join(row.lines()), flush=True)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
