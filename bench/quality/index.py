"""A benchmark index: the corpus ingested through the service's IngestDocuments RPC, reused when unchanged."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from bench.beir import BeirDataset, shared_dir
from retrieval.v1 import retrieval_pb2 as pb
from bench.transport import PLAINTEXT, Transport
from retrieval_client import RetrievalClient
from retrieval_server.backends.file_digest import sha256_hex
from retrieval_server.backends.sparse import TERMS_REVISION
from retrieval_server.backends.vector_store.edge import saved_features
from retrieval_server.ingest.chunker import CHUNKER_REVISION
from retrieval_server.ingest.graph_extraction import RULES_REVISION

MARKER = "bench-index.json"
RESULTS = Path(__file__).resolve().parents[1] / "results"
#: server settings that change what the index holds
INDEX_SETTINGS = (
    "RETRIEVAL_PARENT_CHUNK_TOKENS", "RETRIEVAL_CHILD_CHUNK_TOKENS", "RETRIEVAL_CHILD_OVERLAP_TOKENS", "RETRIEVAL_MAX_SEQ_LENGTH",
    "RETRIEVAL_TITLE_WEIGHT",
    # An index stores the parents' vectors only when it is built with the parent leg on.
    "RETRIEVAL_PARENT_LEG",
    # Contextual children: the title is part of every child's embedded text.
    "RETRIEVAL_CHILD_TITLE",
    # The entities and relations extracted at ingestion, and the glossary's expansions among them.
    "RETRIEVAL_GRAPH_ENABLED", "RETRIEVAL_GLOSSARY_PATH",
)
#: what the service writes per chunk; an index of an older layout is rebuilt
#: (2: parent vectors and the BM25F title field)
LAYOUT = 2


def default_model_dir() -> Path | None:
    """The fp32 all-MiniLM-L6-v2 of ../shared (the model MTEB scored) when present."""
    d = shared_dir() / "models" / "all-MiniLM-L6-v2"
    return d if (d / "model.onnx").is_file() else None


#: index-shaping settings whose default is spelled out, so that "unset" and "the default" share an index
INDEX_DEFAULTS = {"RETRIEVAL_PARENT_LEG": "true", "RETRIEVAL_GRAPH_ENABLED": "true"}


def _by_content(settings: dict[str, str], digits: int = 64) -> dict[str, str]:
    """``settings`` with the glossary named by its content: the same path may hold another glossary
    later, and a copy of it elsewhere builds the same index."""
    path = settings.get("RETRIEVAL_GLOSSARY_PATH")
    if path is None:
        return settings
    if not Path(path).is_file():
        raise ValueError(f"RETRIEVAL_GLOSSARY_PATH '{path}' is not a file")
    rest = {k: v for k, v in settings.items() if k != "RETRIEVAL_GLOSSARY_PATH"}
    return {**rest, "RETRIEVAL_GLOSSARY_SHA256": sha256_hex(Path(path))[:digits]}


def default_index_dir(dataset: BeirDataset, suffix: str = "", shaping: dict[str, str] | None = None,
                      baseline: dict[str, str] = INDEX_DEFAULTS) -> Path:
    """The folder of ``dataset``'s index. ``shaping``: the index-shaping settings in force; each
    that differs from ``baseline`` names the folder too, so that building an index another way
    (``--parent-leg off``) leaves the default one in place instead of replacing it."""
    shaped = sorted((k, v) for k, v in _by_content(shaping or {}, digits=12).items() if baseline.get(k) != v)
    named = "".join(f"-{k.removeprefix('RETRIEVAL_').lower()}={v}" for k, v in shaped)
    return RESULTS / "quality-index" / f"{dataset.name}{suffix}{named}"


def index_settings(environ: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The index-shaping settings in force: from the environment, overridden by ``--set``."""
    merged = {**INDEX_DEFAULTS, **environ, **extra}
    return {k: merged[k] for k in INDEX_SETTINGS if k in merged}


@dataclass(frozen=True, slots=True)
class IndexReport:
    documents: int
    parent_chunks: int
    child_chunks: int
    errors: list[str]
    seconds: float
    reused: bool


def model_fingerprint(model_dir: Path | None) -> str:
    """Identity of the embedding model: the bundled default, or the model file's size and head."""
    if model_dir is None:
        return "bundled-default"
    onnx = model_dir / "model.onnx"
    with onnx.open("rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()[:16]
    return f"{model_dir.resolve()}:{onnx.stat().st_size}:{head}"


def index_key(dataset: BeirDataset, index_settings: dict[str, str], model_dir: Path | None, truncate_tokens: int = 0) -> dict[str, object]:
    """Everything that changes what the index holds; equal keys mean the index can be reused."""
    key: dict[str, object] = {
        "corpus_sha256": dataset.corpus_sha256(),
        "settings": dict(sorted(_by_content(index_settings).items())),
        "model": model_fingerprint(model_dir),
        # The rules' latest revision, not each text's (rules_revision_for, as a stored document's
        # fingerprint has it): an index is built whole, and one built before a revision is built again.
        "layout": LAYOUT, "graph_rules": RULES_REVISION, "chunker": CHUNKER_REVISION,
        # An index keeps the keyword terms it was built with: one of older terms would be measured as the current tokenizer.
        "terms": TERMS_REVISION,
    }
    if truncate_tokens:
        key["truncate_tokens"] = truncate_tokens
    return key


def terms_revision(index_dir: Path) -> int:
    """The keyword terms revision the index in ``index_dir`` was built with (what its queries are encoded by)."""
    return saved_features(index_dir / "vectors").terms


def existing(index_dir: Path, key: dict[str, object]) -> IndexReport | None:
    marker = index_dir / MARKER
    if not marker.is_file():
        return None
    saved = json.loads(marker.read_text())
    # An index built with errors lacks documents: rebuilt, never measured again as the corpus's.
    if saved.get("key") != key or saved["report"].get("errors"):
        return None
    return IndexReport(**{**saved["report"], "reused": True})


def prepare_fresh(index_dir: Path) -> None:
    """A changed corpus or model starts from an empty folder: re-ingesting would keep removed documents."""
    if index_dir.exists():
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True)


def ensure(dataset: BeirDataset, index_dir: Path, settings: dict[str, str], model_dir: Path | None, *, batch: int, progress: bool,
           log: Path, truncate_tokens: int = 0, transport: Transport = PLAINTEXT) -> IndexReport:
    """The index in ``index_dir``: reused when its key matches, else built by a single-process server
    (and marked for reuse only when every document went in)."""
    from bench.quality.protocol import Truncator
    from bench.server_process import running_server

    key = index_key(dataset, index_settings(settings, {}), model_dir, truncate_tokens)
    report = existing(index_dir, key)
    if report is not None:
        return report
    prepare_fresh(index_dir)
    with running_server({**settings, "RETRIEVAL_DATA_DIR": str(index_dir), "RETRIEVAL_PROCESSES": "1"}, log, transport=transport) as server:
        report = ingest(server.target, dataset, batch, progress, Truncator(model_dir, truncate_tokens) if truncate_tokens else None,
                        transport=transport)
    if report.errors:
        print(f"{index_dir}: {len(report.errors)} ingestion errors (first: {report.errors[0]}); the index is not marked for "
              "reuse, the next run builds it again", file=sys.stderr)
    else:
        save(index_dir, key, report)
    return report


def ingest(target: str, dataset: BeirDataset, batch: int, progress: bool, transform: Callable[[str], str] | None = None,
           transport: Transport = PLAINTEXT) -> IndexReport:
    t0 = time.perf_counter()
    docs = parents = children = 0
    errors: list[str] = []
    with RetrievalClient(target, role="ADMIN", tls=transport.tls) as client, tqdm(
        total=dataset.corpus_size(), desc=f"ingest {dataset.name}", unit="doc", disable=not progress
    ) as bar:
        for n, (count, payload) in enumerate(dataset.corpus_batches(batch, transform)):
            resp = client.ingest([pb.DocumentInput(filename=f"{dataset.name}-{n:05d}.jsonl", content=payload)], timeout=3600)
            # Documents past the answer's size limit are stored but not listed: counted, their chunks not.
            docs += len(resp.documents) + resp.documents_not_listed
            parents += sum(d.parent_chunks for d in resp.documents)
            children += sum(d.child_chunks for d in resp.documents)
            errors.extend(f"{e.source}: {e.reason}" for e in resp.errors)
            bar.update(count)
    return IndexReport(docs, parents, children, errors, round(time.perf_counter() - t0, 1), reused=False)


def save(index_dir: Path, key: dict[str, object], report: IndexReport) -> None:
    (index_dir / MARKER).write_text(json.dumps({"key": key, "report": asdict(report)}, indent=2))
