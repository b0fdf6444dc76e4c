"""protobuf <-> domain. The only module that knows both shapes."""

from __future__ import annotations

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.domain import (
    Access,
    ComponentHealth,
    ComponentState,
    HealthReport,
    DocumentSource,
    Fusion,
    InvalidArgument,
    Mode,
    QueryMetrics,
    QueryResult,
    SearchResult,
    Strategy,
)

_STRATEGY_IN = {
    pb.STRATEGY_UNSPECIFIED: Strategy.SEMANTIC,
    pb.STRATEGY_SEMANTIC: Strategy.SEMANTIC,
    pb.STRATEGY_KEYWORD: Strategy.KEYWORD,
    pb.STRATEGY_HYBRID: Strategy.HYBRID,
    pb.STRATEGY_ADAPTIVE: Strategy.ADAPTIVE,
}
_STRATEGY_OUT = {v: k for k, v in _STRATEGY_IN.items() if k != pb.STRATEGY_UNSPECIFIED}
_MODE_IN = {pb.MODE_UNSPECIFIED: Mode.RETRIEVAL_ONLY, pb.MODE_RETRIEVAL_ONLY: Mode.RETRIEVAL_ONLY, pb.MODE_GENERATION: Mode.GENERATION}
_FUSION_IN = {pb.FUSION_UNSPECIFIED: None, pb.FUSION_RRF: Fusion.RRF, pb.FUSION_WEIGHTED: Fusion.WEIGHTED}
_ACCESS_IN = {pb.ACCESS_UNSPECIFIED: Access.PUBLIC, pb.ACCESS_PUBLIC: Access.PUBLIC, pb.ACCESS_PRIVATE: Access.PRIVATE}


def _enum(value: int, table: dict, field: str) -> object:
    try:
        return table[value]
    except KeyError:
        raise InvalidArgument(f"{field} has unknown value {value}") from None


def strategy_in(value: int) -> Strategy:
    return _enum(value, _STRATEGY_IN, "strategy")  # type: ignore[return-value]


def fusion_in(value: int) -> Fusion | None:
    return _enum(value, _FUSION_IN, "fusion")  # type: ignore[return-value]


def mode_in(value: int) -> Mode:
    return _enum(value, _MODE_IN, "mode")  # type: ignore[return-value]


def document_in(d: pb.DocumentInput, index: int, max_bytes: int) -> DocumentSource:
    field = f"documents[{index}]"
    access: Access = _enum(d.access, _ACCESS_IN, f"{field}.access")  # type: ignore[assignment]
    if not d.filename and not d.document_id:
        raise InvalidArgument(f"{field} needs a filename (its extension selects the loader) or a document_id")
    if not d.content:
        raise InvalidArgument(f"{field}.content must not be empty")
    if len(d.content) > max_bytes:
        raise InvalidArgument(f"{field}.content is {len(d.content)} bytes; at most {max_bytes} are accepted (RETRIEVAL_MAX_DOCUMENT_BYTES)")
    if access is Access.PRIVATE and not d.owner_id:
        raise InvalidArgument(f"{field}.owner_id is required for a PRIVATE document")
    return DocumentSource(
        filename=d.filename or f"{d.document_id}.txt",
        content=d.content,
        document_id=d.document_id,
        title=d.title,
        url=d.url,
        source=d.source,
        access=access,
        owner_id=d.owner_id,
        metadata=dict(d.metadata),
        granted_user_ids=tuple(d.granted_user_ids),
    )


def metrics_out(m: QueryMetrics) -> pb.Metrics:
    return pb.Metrics(
        total_ms=m.total_ms,
        stages=[pb.StageMetric(stage=s.stage, duration_ms=s.duration_ms, count=s.count) for s in m.stages],
        cache_hit=m.cache_hit,
        iterations=m.iterations,
        sufficiency_score=m.sufficiency_score,
        rerank_fallback_triggered=m.rerank_fallback_triggered,
        degraded=m.degraded,
        decomposition_used=m.decomposition_used,
        strategy_used=_STRATEGY_OUT[m.strategy_used],
    )


def query_out(r: QueryResult) -> pb.QueryResponse:
    return pb.QueryResponse(
        query=r.query,
        cached=r.cached,
        suggestions=r.suggestions,
        metrics=metrics_out(r.metrics),
        contexts=[
            pb.Context(
                parent_chunk_id=c.parent.parent_chunk_id,
                document_id=c.parent.document_id,
                content=c.parent.content,
                tokens=c.parent.tokens,
                score=c.score,
                metadata=pb.DocumentMetadata(
                    title=c.document.title,
                    url=c.document.url,
                    page=c.parent.page,
                    chunk_index=c.parent.chunk_index,
                    source=c.document.source,
                    extra=c.document.metadata,
                ),
                child_chunks=[pb.ChildChunk(chunk_id=e.chunk_id, content=e.content, score=e.score) for e in c.children],
            )
            for c in r.contexts
        ],
    )


def search_out(query: str, results: list[SearchResult]) -> pb.SearchResponse:
    return pb.SearchResponse(
        query=query,
        results=[
            pb.SearchResult(
                text=r.text,
                document_id=r.document_id,
                chunk_index=r.chunk_index,
                title=r.title,
                page=r.page,
                url=r.url,
                score=r.score,
            )
            for r in results
        ],
    )


def _component_status(c: ComponentHealth) -> int:
    if c.state is ComponentState.NOT_CONFIGURED:
        return pb.SERVING_STATUS_NOT_CONFIGURED
    if c.state is ComponentState.OK:
        return pb.SERVING_STATUS_SERVING
    return pb.SERVING_STATUS_NOT_SERVING if c.required else pb.SERVING_STATUS_DEGRADED


def health_out(report: HealthReport, version: str) -> pb.HealthResponse:
    # A required component that fails stops answers; an optional one that fails degrades them; one
    # that is not configured changes nothing about the service's health.
    if not report.serving:
        status = pb.SERVING_STATUS_NOT_SERVING
    else:
        status = pb.SERVING_STATUS_DEGRADED if report.degraded else pb.SERVING_STATUS_SERVING
    return pb.HealthResponse(
        status=status,
        version=version,
        components=[pb.ComponentHealth(name=c.name, status=_component_status(c), detail=c.detail) for c in report.components],
    )
