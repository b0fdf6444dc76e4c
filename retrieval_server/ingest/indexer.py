"""The indexer: load → chunk → embed (batched) → upsert vectors → replace rows → drop stale vectors.

Children and (when the index has parent vectors) parents are embedded in one batch: a parent's
text is the document title followed by the parent's content, truncated by the embedder to its
``max_seq_length`` tokens, so a short document is embedded whole. Children also get the BM25F
keyword vector (title as a field of weight ``title_weight``).

Re-ingesting replaces a document without a window where it is missing: the new version's points
(stable ids) are written first, then its rows in one transaction, then whatever points belong to
other versions are deleted. An unchanged document (same content hash) is skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retrieval_server.backends.embedder import Embedder
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import (
    ChildChunk,
    Document,
    DocumentSource,
    IngestedDocument,
    IngestFailure,
    IngestReport,
    ParentChunk,
    ParentPoint,
    VectorPoint,
)
from retrieval_server.ingest.chunker import Chunker
from retrieval_server.ingest.loaders import LoadError, LoadedDocument, load

log = logging.getLogger(__name__)

MAX_DOCUMENT_ID_CHARS = 200


@dataclass(slots=True)
class _Prepared:
    document: Document
    parents: list[ParentChunk]
    children: list[ChildChunk]
    version: str
    previous: Document | None


def _parent_text(title: str, content: str) -> str:
    """What a parent's vector embeds: the title, then the content (unless it already leads with the title)."""
    return content if not title or content.startswith(title) else f"{title}\n\n{content}"


def _validate_id(document_id: str) -> None:
    if not document_id or len(document_id) > MAX_DOCUMENT_ID_CHARS:
        raise LoadError(f"document_id must be 1 to {MAX_DOCUMENT_ID_CHARS} characters")
    if any(ord(ch) < 32 for ch in document_id):
        raise LoadError("document_id must not contain control characters")


class Indexer:
    def __init__(
        self,
        chunker: Chunker,
        embedder: Embedder,
        sparse: Bm25Encoder,
        vectors: VectorStore,
        metadata: MetadataStore,
        *,
        batch_children: int = 256,
        title_weight: int = 2,
    ) -> None:
        self._chunker = chunker
        self._embedder = embedder
        self._sparse = sparse
        self._vectors = vectors
        self._metadata = metadata
        self._batch = batch_children
        self._title_weight = title_weight

    def _fingerprint(self, doc: Document, loaded: LoadedDocument) -> str:
        """Changes whenever anything that ends up in the index would change."""
        payload = json.dumps(
            {
                "doc": [doc.title, doc.url, doc.source, doc.access.value, doc.owner_id, doc.metadata, doc.readers],
                "pages": [(p.number, p.text) for p in loaded.pages],
                "sizes": [self._chunker.sizes.parent_tokens, self._chunker.sizes.child_tokens, self._chunker.sizes.child_overlap_tokens],
                "model": self._embedder.model_id,
                "title_weight": self._title_weight,
                "features": [self._vectors.features.parent_vectors, self._vectors.features.title_field],
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    async def ingest(
        self, sources: Sequence[DocumentSource], on_document: Callable[[str], None] | None = None
    ) -> IngestReport:
        done: list[IngestedDocument] = []
        errors: list[IngestFailure] = []
        pending: list[_Prepared] = []
        seen: set[str] = set()

        async def flush() -> None:
            batch = pending[:]
            pending.clear()
            if batch:
                done.extend(await self._store(batch, errors))
                if on_document:
                    for p in batch:
                        on_document(p.document.document_id)

        for src in sources:
            try:
                loaded_docs = load(src)
            except LoadError as exc:
                errors.append(IngestFailure(src.filename or src.document_id, str(exc)))
                continue
            for loaded in loaded_docs:
                label = f"{src.filename}:{loaded.document_id}" if len(loaded_docs) > 1 else (src.filename or loaded.document_id)
                try:
                    _validate_id(loaded.document_id)
                    if loaded.document_id in seen:
                        raise LoadError(f"document_id '{loaded.document_id}' appears twice in one request")
                    seen.add(loaded.document_id)
                    prepared = await self._prepare(src, loaded)
                except LoadError as exc:
                    errors.append(IngestFailure(label, str(exc)))
                    continue
                if prepared.previous is not None and prepared.previous.content_hash == prepared.document.content_hash:
                    done.append(IngestedDocument(loaded.document_id, len(prepared.parents), len(prepared.children), True))
                    if on_document:
                        on_document(loaded.document_id)
                    continue
                pending.append(prepared)
                if sum(len(p.children) for p in pending) >= self._batch:
                    await flush()
        await flush()
        return IngestReport(tuple(done), tuple(errors))

    async def _prepare(self, src: DocumentSource, loaded: LoadedDocument) -> _Prepared:
        meta = {**loaded.metadata, **src.metadata}
        doc = Document(
            document_id=loaded.document_id,
            title=loaded.title,
            url=src.url or loaded.url,
            source=src.source or src.filename,
            access=src.access,
            owner_id=src.owner_id,
            metadata=meta,
            granted_user_ids=tuple(sorted(set(src.granted_user_ids))),
        )
        parents, children = self._chunker.chunk(doc.document_id, [(p.number, p.text) for p in loaded.pages])
        if not children:
            raise LoadError("no text to index")
        fingerprint = self._fingerprint(doc, loaded)
        doc = dataclasses.replace(doc, content_hash=fingerprint)
        previous = await self._metadata.get_document(doc.document_id)
        return _Prepared(doc, parents, children, fingerprint[:16], previous)

    async def _store(self, batch: list[_Prepared], errors: list[IngestFailure]) -> list[IngestedDocument]:
        with_parents = self._vectors.features.parent_vectors
        texts = [c.content for p in batch for c in p.children]
        if with_parents:
            texts += [_parent_text(p.document.title, parent.content) for p in batch for parent in p.parents]
        try:
            dense = await self._embedder.embed(texts)
        except Exception as exc:
            log.exception("embedding failed")
            errors.extend(IngestFailure(p.document.document_id, f"embedding failed: {exc}") for p in batch)
            return []
        out: list[IngestedDocument] = []
        row = 0
        parent_row = sum(len(p.children) for p in batch)
        for p in batch:
            vecs = dense[row : row + len(p.children)]
            row += len(p.children)
            titled = self._vectors.features.title_field
            points = [
                VectorPoint(
                    child=c,
                    document=p.document,
                    dense=v,
                    sparse=self._sparse.document(c.content),
                    version=p.version,
                    sparse_titled=self._sparse.titled_document(c.content, p.document.title, self._title_weight) if titled else None,
                )
                for c, v in zip(p.children, vecs, strict=True)
            ]
            parent_points = []
            if with_parents:
                first_child = {}
                for c in p.children:
                    first_child.setdefault(c.parent_chunk_id, c)
                parent_points = [
                    ParentPoint(parent, first_child[parent.parent_chunk_id], p.document, dense[parent_row + i], p.version)
                    for i, parent in enumerate(p.parents)
                    if parent.parent_chunk_id in first_child
                ]
                parent_row += len(p.parents)
            doc_id = p.document.document_id
            try:
                for i in range(0, len(points), self._batch):
                    await self._vectors.upsert(points[i : i + self._batch])
                for i in range(0, len(parent_points), self._batch):
                    await self._vectors.upsert_parents(parent_points[i : i + self._batch])
                replaced = await self._metadata.replace_document(p.document, p.parents)
                await self._vectors.delete_document(doc_id, keep_version=p.version)
            except Exception as exc:
                log.exception("storing %s failed", doc_id)
                await self._rollback(p)
                errors.append(IngestFailure(doc_id, f"storing failed: {exc}"))
                continue
            out.append(IngestedDocument(doc_id, len(p.parents), len(p.children), replaced))
        return out

    async def _rollback(self, p: _Prepared) -> None:
        """Drop the half-written version so the previous one (if any) stays intact."""
        keep = p.previous.content_hash[:16] if p.previous else None
        try:
            if keep is None:
                await self._vectors.delete_document(p.document.document_id)
            else:
                await self._vectors.delete_document(p.document.document_id, keep_version=keep)
        except Exception:
            log.exception("rollback of %s failed", p.document.document_id)

    async def delete(self, document_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """Remove documents: rows first (queries stop seeing them), then their vectors."""
        deleted, missing = [], []
        for doc_id in dict.fromkeys(document_ids):
            existed = await self._metadata.delete_document(doc_id)
            await self._vectors.delete_document(doc_id)
            (deleted if existed else missing).append(doc_id)
        return deleted, missing

