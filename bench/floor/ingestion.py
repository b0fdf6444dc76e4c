"""Ingestion beside the raw encoder, on the same chunks, in one run.

The service ingests ``documents`` of the dataset (one IngestDocuments call of a .jsonl, as
bench.quality does) into a fresh data directory; the floor is the encoder alone embedding the
same child chunks (loaded and chunked in-process with the service's loader and chunker, the same
batch size and threads), which is what ingestion cannot go below.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.beir import BeirDataset
from bench.server_process import running_server
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from retrieval_server.backends.embedder import resolve_model
from retrieval_server.config import Settings
from retrieval_server.domain import DocumentSource
from retrieval_server.ingest.chunker import Chunker, ChunkSizes
from retrieval_server.ingest.loaders import load
from scoring_core.encoders import BiEncoder


@dataclass(frozen=True, slots=True)
class IngestionFloor:
    documents: int
    chunks: int
    service_s: float
    encoder_s: float

    @property
    def ratio(self) -> float:
        """Encoder time / service time: 1.0 means ingestion costs nothing beyond the model."""
        return round(self.encoder_s / self.service_s, 2) if self.service_s else float("nan")

    def line(self) -> str:
        return (f"ingest {self.documents} documents ({self.chunks} chunks): service {self.service_s:.1f} s "
                f"({self.chunks / self.service_s:.1f} chunks/s), raw encoder {self.encoder_s:.1f} s "
                f"({self.chunks / self.encoder_s:.1f} chunks/s): {self.ratio:.2f} of the encoder's rate")


def measure(dataset: BeirDataset, settings: Mapping[str, str], model_dir: Path | None, documents: int, threads: int, log: Path) -> IngestionFloor:
    _, payload = next(dataset.corpus_batches(documents))
    with tempfile.TemporaryDirectory() as tmp:
        server_settings = {**settings, "RETRIEVAL_DATA_DIR": str(Path(tmp) / "data"), "RETRIEVAL_PROCESSES": "1",
                           "RETRIEVAL_EMBED_THREADS": str(threads)}
        with running_server(server_settings, log) as server, RetrievalClient(server.target, role="ADMIN", timeout=3600) as client:
            t0 = time.perf_counter()
            resp = client.ingest([pb.DocumentInput(filename=f"{dataset.name}.jsonl", content=payload)])
            service_s = time.perf_counter() - t0
        if resp.errors:
            raise RuntimeError(f"ingestion failed: {resp.errors[0].reason}")
    s = Settings()
    model = resolve_model(model_dir)
    chunker = Chunker(str(model.tokenizer_path), ChunkSizes(s.parent_chunk_tokens, s.child_chunk_tokens, s.child_overlap_tokens))
    texts: list[list[str]] = []
    for loaded in load(DocumentSource(filename=f"{dataset.name}.jsonl", content=payload)):
        _, children = chunker.chunk(loaded.document_id, [(p.number, p.text) for p in loaded.pages])
        texts.append([c.content for c in children])
    encoder = BiEncoder(model.model_path, model.tokenizer_path, max_length=s.max_seq_length, batch_size=s.embed_batch_size, threads=threads)
    encoder.encode(["warm up"])
    t0 = time.perf_counter()
    encoder.encode([c for chunks in texts for c in chunks])  # the encoder's best: full batches across documents
    encoder_s = time.perf_counter() - t0
    return IngestionFloor(len(texts), sum(map(len, texts)), round(service_s, 2), round(encoder_s, 2))
