"""protobuf <-> domain. The only module that knows both shapes."""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api.validation import Violations
from retrieval_server.domain import (
    Access,
    ComponentHealth,
    ComponentState,
    HealthReport,
    DocumentSource,
    Fusion,
    IngestReport,
    InvalidArgument,
    Mode,
    QueryMetrics,
    QueryResult,
    RetrievedContext,
    SearchResult,
    StageMetric,
    Strategy,
)
from retrieval_server.identifiers import (
    MAX_FILENAME_CHARS, MAX_METADATA_BYTES, MAX_SOURCE_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS, MAX_USER_ID_CHARS, RAW_SLACK,
    check_descriptive_field, check_grantees, check_metadata, composed, composed_metadata, cut_utf8, one_line, trim,
)
from retrieval_server.ingest.loaders import sent as as_sent
from retrieval_server.knowledge import Answer, AnswerSentence, GraphTrace, MatchKind, Route, RouteDecision, ToolResult
from retrieval_server.workflow.answer import render

T = TypeVar("T")

_STRATEGY_IN = {
    pb.STRATEGY_UNSPECIFIED: Strategy.SEMANTIC,
    pb.STRATEGY_SEMANTIC: Strategy.SEMANTIC,
    pb.STRATEGY_KEYWORD: Strategy.KEYWORD,
    pb.STRATEGY_HYBRID: Strategy.HYBRID,
    pb.STRATEGY_ADAPTIVE: Strategy.ADAPTIVE,
    pb.STRATEGY_GRAPH: Strategy.GRAPH,
}
_STRATEGY_OUT = {v: k for k, v in _STRATEGY_IN.items() if k != pb.STRATEGY_UNSPECIFIED}
_MODE_IN = {pb.MODE_UNSPECIFIED: Mode.RETRIEVAL_ONLY, pb.MODE_RETRIEVAL_ONLY: Mode.RETRIEVAL_ONLY, pb.MODE_GENERATION: Mode.GENERATION}
_FUSION_IN = {pb.FUSION_UNSPECIFIED: None, pb.FUSION_RRF: Fusion.RRF, pb.FUSION_WEIGHTED: Fusion.WEIGHTED}
_ACCESS_IN = {pb.ACCESS_UNSPECIFIED: Access.PUBLIC, pb.ACCESS_PUBLIC: Access.PUBLIC, pb.ACCESS_PRIVATE: Access.PRIVATE}


def _enum(value: int, table: dict, enum: EnumTypeWrapper, field: str) -> object:
    """``table``'s entry for ``value``; InvalidArgument listing the values accepted, by name in
    ``enum`` and number: a caller sending an unknown one may be built from another version of the proto."""
    try:
        return table[value]
    except KeyError:
        known = ", ".join(f"{enum.Name(k)}={k}" for k in table)
        raise InvalidArgument(f"{field} has unknown value {value} (one of {known})") from None


def _check_field(v: Violations, at: str, check: Callable[..., T], *args: Any) -> T | None:
    """``check(*args)``, or None with its ValueError, whose message starts with the field's name,
    recorded as a violation of that field under ``at`` (where the document stands)."""
    try:
        return check(*args)
    except ValueError as exc:
        message = f"{at}.{exc}"
        v.add(message.split(" ", 1)[0], message)
        return None


def strategy_in(value: int, field: str = "strategy") -> Strategy:
    return _enum(value, _STRATEGY_IN, pb.Strategy, field)  # type: ignore[return-value]


def fusion_in(value: int, field: str = "fusion") -> Fusion | None:
    return _enum(value, _FUSION_IN, pb.Fusion, field)  # type: ignore[return-value]


def mode_in(value: int, field: str = "mode") -> Mode:
    return _enum(value, _MODE_IN, pb.Mode, field)  # type: ignore[return-value]


def _as_stored(value: str, limit: int) -> str:
    """``value`` composed (NFC) as it is stored, once its length allows it: normalizing megabytes
    held the event loop for seconds, and a value of more than RAW_SLACK times its limit is over it
    whatever normalizing makes of it."""
    return composed(value) if len(value) <= RAW_SLACK * limit else value


def _check_metadata_as_stored(metadata: Mapping[str, str]) -> None:
    """:func:`check_metadata` of ``metadata`` composed as it is stored (a ValueError starting with
    ``metadata`` too when two keys are one once composed)."""
    if sum(len(k) + len(x) for k, x in metadata.items()) <= RAW_SLACK * MAX_METADATA_BYTES:
        metadata = composed_metadata(metadata)
    check_metadata(metadata)


def document_in(d: pb.DocumentInput, index: int, max_bytes: int) -> DocumentSource:
    """InvalidArgument with one violation per invalid field of the document."""
    field, v = f"documents[{index}]", Violations()
    access: Access | None = v.check(_enum, d.access, _ACCESS_IN, pb.Access, f"{field}.access")  # type: ignore[assignment]
    # A file name of nothing visible is none sent, as a title is: "   " named no type, and was refused
    # as one, where a document without a file name is read as text. Looked at within its length
    # only (:func:`_as_stored`): megabytes of white space held the event loop for seconds.
    sent_filename = as_sent(d.filename) if len(d.filename) <= RAW_SLACK * MAX_FILENAME_CHARS else d.filename
    if not sent_filename and not d.document_id:
        v.add(field, f"{field} needs a filename (its extension selects the loader) or a document_id")
    if not d.content:
        v.add(f"{field}.content", f"{field}.content must not be empty")
    if len(d.content) > max_bytes:
        v.add(f"{field}.content", f"{field}.content is {len(d.content)} bytes; at most {max_bytes} are accepted (RETRIEVAL_MAX_DOCUMENT_BYTES)")
    # As they are stored: normalized, which may lengthen them (U+0958 is two code points in NFC: a
    # field accepted here was refused when the document was stored, as that document's error), the
    # title on one line too; the file name is the source when none is sent.
    filename = _as_stored(sent_filename, MAX_FILENAME_CHARS)
    if len(filename) > MAX_FILENAME_CHARS:
        v.add(f"{field}.filename", f"{field}.filename must be at most {MAX_FILENAME_CHARS} characters (got {len(filename)})")
    title = one_line(composed(d.title)) if len(d.title) <= RAW_SLACK * MAX_TITLE_CHARS else d.title
    for name, value in (("title", title), ("url", _as_stored(d.url, MAX_URL_CHARS)), ("source", _as_stored(d.source, MAX_SOURCE_CHARS))):
        _check_field(v, field, check_descriptive_field, name, value)
    _check_field(v, field, _check_metadata_as_stored, d.metadata)
    _check_field(v, field, check_grantees, d.granted_user_ids)
    owner = _check_field(v, field, trim, d.owner_id, "owner_id", MAX_USER_ID_CHARS)
    if access is Access.PRIVATE and owner == "":
        v.add(f"{field}.owner_id", f"{field}.owner_id is required for a PRIVATE document")
    # Unset reads as ACCESS_PUBLIC: an owner re-sending her private document without repeating
    # access published it, and grants on a public document are read by no one (every caller reads
    # it). An owner of an explicitly public document is the caller's to record.
    unset = d.access == pb.ACCESS_UNSPECIFIED
    sent = [name for name, value in (("owner_id", unset and owner), ("granted_user_ids", d.granted_user_ids)) if value]
    if access is Access.PUBLIC and sent:
        said = "is unset (unset means ACCESS_PUBLIC)" if unset else "is ACCESS_PUBLIC, which every caller reads,"
        fix = "set ACCESS_PRIVATE (grants are for private documents)" if d.granted_user_ids else "set ACCESS_PRIVATE or ACCESS_PUBLIC"
        v.add(f"{field}.access", f"{field}.access {said} but {'/'.join(sent)} {'were' if len(sent) > 1 else 'was'} sent: {fix}")
    v.raise_if_any()
    assert access is not None
    return DocumentSource(
        filename=sent_filename,
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


def strategy_out(strategy: Strategy) -> pb.Strategy.ValueType:
    return _STRATEGY_OUT[strategy]


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
        strategy_used=strategy_out(m.strategy_used),
        route=route_out(m.route) if m.route else None,
        graph=graph_out(m.graph) if m.graph else None,
        rewritten_query=m.rewritten_query,
        sub_queries=m.sub_queries,
    )


_ROUTE_OUT = {Route.RETRIEVE: pb.ROUTE_RETRIEVE, Route.TOOL: pb.ROUTE_TOOL, Route.DIRECT_ANSWER: pb.ROUTE_DIRECT_ANSWER}
_MATCH_OUT = {
    MatchKind.EXACT: pb.ENTITY_MATCH_KIND_EXACT,
    MatchKind.CASE_FOLDED: pb.ENTITY_MATCH_KIND_CASE_FOLDED,
    MatchKind.FUZZY: pb.ENTITY_MATCH_KIND_FUZZY,
}


def _json(value: object) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def route_out(d: RouteDecision) -> pb.RouteDecision:
    return pb.RouteDecision(
        route=_ROUTE_OUT[d.route],
        tool_calls=[pb.ToolCall(name=c.name, arguments_json=_json(dict(c.arguments))) for c in d.tool_calls],
        reason=d.reason,
        decided_by=d.decided_by,
    )


def graph_out(t: GraphTrace) -> pb.GraphTrace:
    return pb.GraphTrace(
        entities=[
            pb.EntityMatch(name=m.name, entity_type=m.entity_type.value, text=m.text, kind=_MATCH_OUT[m.kind], score=m.score)
            for m in t.matches
        ],
        hops=[pb.GraphHop(hop=h.hop, penalty=h.penalty, entities=h.entities, chunks=h.chunks) for h in t.hops],
    )


def tool_result_out(r: ToolResult) -> pb.ToolResult:
    return pb.ToolResult(
        name=r.name,
        arguments_json=_json(dict(r.arguments)),
        success=r.success,
        result_json=_json(r.result) if r.success else "",
        error=r.error,
        summary=r.summary,
        duration_ms=r.duration_ms,
    )


def answer_out(a: Answer) -> pb.Answer:
    return pb.Answer(
        text=a.text,
        sentences=[pb.AnswerSentence(text=s.text, citations=s.citations) for s in a.sentences],
        citations=[
            pb.Citation(marker=c.marker, parent_chunk_id=c.parent_chunk_id, document_id=c.document_id, title=c.title) for c in a.citations
        ],
        route=_ROUTE_OUT[a.route],
        extractive=a.extractive,
        supported=a.supported,
        model=a.model,
        tool_results=[tool_result_out(r) for r in a.tool_results],
    )


def stream_event_out(event: StageMetric | str) -> pb.StreamQueryResponse:
    """A stage that finished, or a piece of the answer's text."""
    if isinstance(event, StageMetric):
        return pb.StreamQueryResponse(stage=pb.StageMetric(stage=event.stage, duration_ms=event.duration_ms, count=event.count))
    return pb.StreamQueryResponse(answer_delta=event)


def context_out(c: RetrievedContext) -> pb.Context:
    return pb.Context(
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


class ContextsOut:
    """Contexts converted once while they are being served again: a cached answer hands out the
    same (immutable) contexts on every hit, and building their messages is most of a hit's
    conversion. Holds the ``size`` most recently served: the default, about 400 answers of five
    contexts (some 10 MB), covers a working set of hot questions; a cyclic scan of more distinct
    questions than that misses every time, as any LRU does."""

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        # id -> (the context, kept alive so that its id is not reused; its message)
        self._out: OrderedDict[int, tuple[RetrievedContext, pb.Context]] = OrderedDict()

    def __call__(self, c: RetrievedContext) -> pb.Context:
        known = self._out.get(id(c))
        if known is not None and known[0] is c:
            self._out.move_to_end(id(c))
            return known[1]
        message = context_out(c)
        self._out[id(c)] = (c, message)
        if len(self._out) > self._size:
            self._out.popitem(last=False)
        return message


def query_out(r: QueryResult, contexts: Callable[[RetrievedContext], pb.Context] = context_out) -> pb.QueryResponse:
    return pb.QueryResponse(
        query=r.query,
        cached=r.cached,
        suggestions=r.suggestions,
        metrics=metrics_out(r.metrics),
        answer=answer_out(r.answer) if r.answer else None,
        contexts=[contexts(c) for c in r.contexts],
    )


#: an answer's last contexts left out to keep it within RETRIEVAL_MAX_RESPONSE_BYTES
CONTEXTS_CAPPED = "response:contexts_capped"


def within_size(response: pb.QueryResponse, max_bytes: int) -> pb.QueryResponse:
    """``response`` without its last contexts past ``max_bytes`` (at least one kept), saying so in
    its metrics: documents within every limit of their own made 100 contexts of 4.9 MB, which a
    client reading gRPC's default 4 MiB refuses whole. A GENERATION answer's too: leaving out the
    last keeps the others' numbers, which its text cites, and a citation of one left out still
    names its chunk, document and title."""
    size = response.ByteSize()
    if size <= max_bytes:
        return response
    # Room for the tag said below: its bytes, its field's, and the metrics' length growing by one.
    budget = max_bytes - len(CONTEXTS_CAPPED) - 3
    keep = len(response.contexts)
    while keep > 1 and size > budget:
        keep -= 1
        size -= _entry_bytes(response.contexts[keep].ByteSize())
    if keep < len(response.contexts):  # a tool's answer has none to leave out
        del response.contexts[keep:]
        response.metrics.degraded.append(CONTEXTS_CAPPED)
    if response.HasField("answer") and (size := response.ByteSize()) > max_bytes:
        _answer_within(response, size - max_bytes + len(ANSWER_CAPPED) + 3)
    return response


#: an answer's last sentences, and the end of its text, left out to keep it within RETRIEVAL_MAX_RESPONSE_BYTES
ANSWER_CAPPED = "response:answer_capped"


def _entry_bytes(size: int) -> int:
    """Bytes of a repeated field's entry of ``size`` bytes: its tag, its length, itself."""
    return 1 + (size.bit_length() + 6) // 7 + size


def _answer_within(response: pb.QueryResponse, excess: int) -> None:
    """The last resort of :func:`within_size`, its one context kept: the answer's last sentences
    left out, ``excess`` bytes and more, and its text rendered again of those kept, with their
    citations; a first sentence too long alone is cut. The model's text is bounded by
    ANSWER_MAX_TOKENS; this bounds the response whatever wrote it. The text was cut by bytes: it
    ended in half a marker ("[1…"), or a sentence its sentences no longer had, and Answer.citations
    kept the contexts of the sentences left out."""
    answer = response.answer
    sentences = [AnswerSentence(s.text, tuple(s.citations)) for s in answer.sentences]
    if not sentences:
        return  # a tool's result is bounded by its tool
    citing = Counter(c for s in sentences for c in s.citations)
    citation_bytes = {c.marker: _entry_bytes(c.ByteSize()) for c in answer.citations}
    kept, cut, cost = len(sentences), 0, 0
    while kept and cut < excess:
        kept -= 1
        # Each sentence is in the response twice: as itself, and rendered in the text (after a
        # space); and a citation goes with the last sentence citing it.
        cost = _entry_bytes(answer.sentences[kept].ByteSize()) + len(render(sentences[kept : kept + 1]).encode()) + (1 if kept else 0)
        citing.subtract(sentences[kept].citations)
        cost += sum(citation_bytes.get(c, 0) for c in sentences[kept].citations if not citing[c])
        cut += cost
    if kept == 0:
        # The first sentence alone is too long: its start, with its citations, if more than an
        # ellipsis of it fits (each byte left out of its text is two out of the response).
        size = len(sentences[0].text.encode())
        room = size - (excess - (cut - cost) + 1) // 2
        if room > len("…".encode()):
            sentences[0] = AnswerSentence(cut_utf8(sentences[0].text, room), sentences[0].citations)
            kept = 1
    del answer.sentences[kept:]
    if kept:
        answer.sentences[0].text = sentences[0].text
    answer.text = render(sentences[:kept])
    cited = {c for s in sentences[:kept] for c in s.citations}
    kept_citations = [c for c in answer.citations if c.marker in cited]
    del answer.citations[:]
    answer.citations.extend(kept_citations)
    response.metrics.degraded.append(ANSWER_CAPPED)


#: an error's source and reason as an ingest answer lists them, at most, in bytes of UTF-8: a JSONL
#: row's source holds its id, which may be hundreds of KB of pasted text, and 100 answered 13.5 MB
LISTED_SOURCE_BYTES, LISTED_REASON_BYTES = 300, 1_000
#: bytes a repeated field's entry adds to its own: its tag and length
_ENTRY_BYTES = 6


def ingest_out(report: IngestReport, max_bytes: int) -> pb.IngestDocumentsResponse:
    """The errors, then the stored documents, in their order, while they fit in ``max_bytes`` (the
    response limit: a JSONL file of 21,000 rows answered 4.4 MB, which a client reading gRPC's
    default 4 MiB refused, every row stored); the errors left out are counted by one with an
    empty source, the documents by ``documents_not_listed``."""
    room = max_bytes - 64  # the count of errors left out, and documents_not_listed
    errors, more = [], report.errors_not_listed
    for e in report.errors:
        entry = pb.IngestError(source=cut_utf8(e.source, LISTED_SOURCE_BYTES), reason=cut_utf8(e.reason, LISTED_REASON_BYTES))
        size = entry.ByteSize() + _ENTRY_BYTES
        if more > report.errors_not_listed or size > room:
            more += 1  # the rest are counted, in their order
            continue
        room -= size
        errors.append(entry)
    if more:
        errors.append(pb.IngestError(source="", reason=f"{more} more errors"))
    documents = []
    for d in report.documents:
        entry = pb.IngestedDocument(document_id=d.document_id, parent_chunks=d.parent_chunks, child_chunks=d.child_chunks, replaced=d.replaced,
                                    unchanged=d.unchanged)
        room -= entry.ByteSize() + _ENTRY_BYTES
        if room < 0:
            break
        documents.append(entry)
    return pb.IngestDocumentsResponse(documents=documents, errors=errors, documents_not_listed=len(report.documents) - len(documents))


def search_out(query: str, results: list[SearchResult], max_bytes: int) -> pb.SearchResponse:
    """The results, in their order, while they fit in ``max_bytes`` (the response limit; at least
    one), the rest counted by ``results_not_listed``: 1,000 results (SEARCH_TOP_K_MAX's largest)
    of documents with 8 KB urls made about 9 MB, which a client reading gRPC's default 4 MiB refused."""
    room = max_bytes - len(query.encode()) - 32  # the query's field, and results_not_listed
    listed = []
    for r in results:
        entry = pb.SearchResult(text=r.text, document_id=r.document_id, chunk_index=r.chunk_index, title=r.title, page=r.page, url=r.url,
                                score=r.score)
        room -= _entry_bytes(entry.ByteSize())
        if room < 0 and listed:
            break
        listed.append(entry)
    return pb.SearchResponse(query=query, results=listed, results_not_listed=len(results) - len(listed))


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
