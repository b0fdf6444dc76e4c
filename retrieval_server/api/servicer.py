"""RetrievalService: a thin layer from requests to domain calls and back."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc as pb_grpc
from retrieval_server import __version__
from retrieval_server.api import convert, served_answers, validation
from retrieval_server.api.audit import audited
from retrieval_server.api.auth import current_identity
from retrieval_server.api.edge import Edge
from retrieval_server.api.errors import abort
from retrieval_server.app import Application
from retrieval_server.domain import (
    DeadlineExceeded,
    IngestedDocument,
    InvalidArgument,
    PermissionDenied,
    QueryOptions,
    QueryResult,
    Role,
    ServiceError,
    StageMetric,
    StreamStalled,
    Unauthenticated,
    send_margin,
)
from retrieval_server.observability.metrics import CacheOutcome

log = logging.getLogger(__name__)

R = TypeVar("R")
_ADMIN_ROLES = {Role.ADMIN, Role.SUPER_ADMIN}


async def _abort_for(name: str, context: grpc.aio.ServicerContext, exc: BaseException) -> None:
    """End the call for ``exc``: a domain error with its status, anything unexpected as INTERNAL
    (logged, never leaked); both raise. An abort, a cancellation or a stream the caller closed
    has ended the call already: then this returns and ``exc`` propagates."""
    if isinstance(exc, ServiceError):
        await abort(context, exc)
    elif isinstance(exc, Exception) and not isinstance(exc, grpc.aio.AbortError):
        log.exception("unhandled error in %s", name, exc_info=exc)
        # With its ErrorInfo (reason INTERNAL), as every other error has its details.
        await abort(context, ServiceError(f"internal error in {name}"))


def _rpc(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """The call's status from what ``fn`` raised (:func:`_abort_for`). Its metrics are the edge's
    (grpc_server_*, of which retrieval_requests_total is a view)."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(self: RetrievalServicer, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await fn(self, request, context)
        except BaseException as exc:
            await _abort_for(name, context, exc)
            raise

    return wrapper


#: events a StreamQuery holds for a caller reading slower than the answer is written, past which
#: each answer piece is joined to the last one held
STREAM_HELD_EVENTS = 64


class _Events:
    """A StreamQuery's events on their way to its caller. The pipeline never waits for the caller
    (a stalled reader would hold the answer's model, and the stages after it), and what the
    caller has not read is bounded: past ``most`` held events, an answer piece is joined to the
    last piece held, so their concatenation is still the text as written, in fewer pieces. A
    stage is held as it is (a request has a few). An unbounded queue held about 66 MB for a
    reader that stalled while the model streamed."""

    def __init__(self, most: int) -> None:
        self._most = most
        # a stage, the pieces of one answer_delta to come, or None: the end
        self._held: deque[StageMetric | list[str] | None] = deque()
        self._ready = asyncio.Event()

    def put(self, event: StageMetric | str) -> None:
        if isinstance(event, str):
            last = self._held[-1] if self._held else None
            if isinstance(last, list) and len(self._held) >= self._most:
                last.append(event)  # joined when read: a str grown piece by piece is quadratic
            else:
                self._held.append([event])
        else:
            self._held.append(event)
        self._ready.set()

    def close(self) -> None:
        self._held.append(None)
        self._ready.set()

    async def get(self) -> StageMetric | str | None:
        while not self._held:
            self._ready.clear()
            await self._ready.wait()
        event = self._held.popleft()
        return "".join(event) if isinstance(event, list) else event


def _deadline(context: grpc.aio.ServicerContext, clock: Callable[[], float] = time.monotonic) -> float | None:
    """The caller's deadline on ``clock``, with a margin to serialize and send what is ready."""
    remaining = context.time_remaining()
    return None if remaining is None else clock() + max(0.0, remaining - send_margin(remaining))


def _in_time(context: grpc.aio.ServicerContext) -> None:
    """Raise when the caller's deadline has passed. grpc.aio cancels a handler only where it
    awaits, so an answer ready after the deadline (the loop busy as it passed) was returned as if
    it could still be sent: its event published and its cache outcome counted, while the caller
    got DEADLINE_EXCEEDED."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded("the answer was ready after the call's deadline, and not sent: allow more time")


class RetrievalServicer(pb_grpc.RetrievalServiceServicer):
    def __init__(self, app: Application) -> None:
        self._app = app
        self._s = app.settings
        self._cached_contexts = convert.ContextsOut()
        # Off when a stage would go unrecorded: no cache to verify with, or every stage traced.
        self._reuse = app.pipeline.deps.cache is not None and not app.tracing.enabled and self._s.cache_served_answers > 0
        self._served = served_answers.ServedAnswers(self._s.cache_served_answers, self._s.cache_ttl_s, self._s.cache_served_answers_mb * 2**20)
        self._generation = app.metadata.generation

    @_rpc
    async def Query(self, request: pb.QueryRequest, context: grpc.aio.ServicerContext) -> pb.QueryResponse | bytes:
        """The response, or its bytes when an exact repeat is served (see api/served_answers.py);
        the method's serializer passes bytes through (:func:`register`)."""
        started = time.perf_counter()
        key = generation = None
        if self._reuse and served_answers.may_serve(request):
            identity = current_identity()
            key, generation = served_answers.key_of(identity, request), self._generation()
            if (served := self._served.get(key, generation)) is not None:
                body, took_ms = served_answers.serve(served, started)
                _in_time(context)
                self._app.metrics.observe_served(served_answers.STAGE, took_ms, served.degraded)
                if self._app.analytics.enabled:
                    # The event names this caller (super admins share entries).
                    options = dataclasses.replace(served.options, identity=identity)
                    self._app.analytics.query_served(options, served.strategy, served.contexts, took_ms, served.degraded)
                return body
        options = self._query_options(request, context)
        result = await self._app.pipeline.query(options)
        response = self._respond(options, result, context)
        if key is not None:
            self._served.remember(key, generation, options, result, response)
        return response

    def _respond(self, options: QueryOptions, result: QueryResult, context: grpc.aio.ServicerContext) -> pb.QueryResponse:
        """The response, within the size limit, and the request recorded as answered (unless its
        deadline has passed: :func:`_in_time`): what the limit left out is counted among its
        degradations, as the workflow's are."""
        _in_time(context)
        # A cache hit serves contexts that were served before: their messages are kept.
        response = convert.query_out(result, self._cached_contexts if result.cached else convert.context_out)
        response = convert.within_size(response, self._s.max_response_bytes)
        m = result.metrics
        if convert.CONTEXTS_CAPPED in response.metrics.degraded:
            m.degraded.append(convert.CONTEXTS_CAPPED)
            result = dataclasses.replace(result, contexts=result.contexts[: len(response.contexts)])  # as sent
        if convert.ANSWER_CAPPED in response.metrics.degraded:
            m.degraded.append(convert.ANSWER_CAPPED)
        cache: CacheOutcome = "hit" if result.cached else "miss" if m.cache_asked else "bypassed"
        self._app.metrics.observe_query(((st.stage, st.duration_ms) for st in m.stages), cache, m.degraded)
        self._app.analytics.query_answered(options, result)
        return response

    @_rpc
    async def StreamQuery(self, request: pb.StreamQueryRequest, context: grpc.aio.ServicerContext) -> None:
        """Query, telling the caller each stage as it ends and the answer as it is written."""
        options = self._query_options(request.query, context, "query.")
        events = _Events(STREAM_HELD_EVENTS)

        async def run() -> Any:
            try:
                return await self._app.pipeline.query(options, events.put)
            finally:
                events.close()

        task = asyncio.ensure_future(run())
        try:
            # Before any message: the status of a stream given up on a stalled write then follows the
            # message gRPC still holds, and reaches a reader that reads again. Sent with the first
            # message, that write's cancellation left gRPC unable to send any status.
            await context.send_initial_metadata(())
            while (event := await events.get()) is not None:
                await self._write(context, convert.stream_event_out(event))
            result = await task
        finally:
            if not task.done():  # the caller went away, or stalled: stop the work
                task.cancel()
            # Awaited done too: a failure that ended it as the caller went away was never read, and
            # asyncio logged it as an error ("Task exception was never retrieved").
            with contextlib.suppress(BaseException):
                await task
        response = pb.StreamQueryResponse(response=self._respond(options, result, context))
        # The task holds the result too. Neither is needed once the response is built, and a reader
        # that stalls on it would keep them (a top-100 answer's contexts: about 1 MiB) until the
        # stall bound.
        del task, result
        await self._write(context, response)

    async def _write(self, context: grpc.aio.ServicerContext, message: pb.StreamQueryResponse) -> None:
        """Send one message of a stream, or give the stream up when its reader has not taken it
        within the stall bound: a reader that never reads held its call, and what the call had
        built, until the connection closed (30 minutes and an hour of grace)."""
        try:
            async with asyncio.timeout(self._s.stream_stall_s):
                await context.write(message)
        except TimeoutError:
            raise StreamStalled(f"the caller read none of the stream's next message within {self._s.stream_stall_s:g} s "
                                "(RETRIEVAL_STREAM_STALL_S): the stream is given up") from None

    def _query_options(self, request: pb.QueryRequest, context: grpc.aio.ServicerContext, at: str = "") -> QueryOptions:
        """``at``: where ``request`` sits in the call's request (``query.`` in StreamQuery's), so that
        every violation names its field by its path from the top (``query.top_k``)."""
        s, v = self._s, validation.Violations()
        query = v.check(validation.query_text, request.query, s, f"{at}query")
        top_k = v.check(validation.top_k, request.top_k, s.top_k_default, s.top_k_max, f"{at}top_k")
        strategy = v.check(convert.strategy_in, request.strategy, f"{at}strategy")
        mode = v.check(convert.mode_in, request.mode, f"{at}mode")
        fusion = v.check(convert.fusion_in, request.fusion, f"{at}fusion")
        document_ids = v.check(validation.document_ids, request.filters.document_ids, s.max_documents_per_request, f"{at}filters.document_ids")
        v.raise_if_any()
        return QueryOptions(
            query=query,  # type: ignore[arg-type]
            top_k=top_k,  # type: ignore[arg-type]
            strategy=strategy,  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            use_cache=request.use_cache if request.HasField("use_cache") else True,
            rerank=request.rerank if request.HasField("rerank") else True,
            document_ids=document_ids,  # type: ignore[arg-type]
            identity=current_identity(),
            fusion=fusion,
            deadline=_deadline(context),
        )

    @_rpc
    async def Search(self, request: pb.SearchRequest, context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        start = time.perf_counter()
        s, v = self._s, validation.Violations()
        query = v.check(validation.query_text, request.query, s)
        k = v.check(validation.top_k, request.top_k, s.search_top_k_default, s.search_top_k_max)
        v.raise_if_any()
        assert query is not None and k is not None
        identity = current_identity()
        results = await self._app.pipeline.search(query, k, identity)
        _in_time(context)
        self._app.analytics.search_answered(query, k, identity, len(results), (time.perf_counter() - start) * 1e3)
        return convert.search_out(query, results, self._s.max_response_bytes)

    @_rpc
    async def Health(self, request: pb.HealthRequest, context: grpc.aio.ServicerContext) -> pb.HealthResponse:
        return convert.health_out(await self._app.health(context.time_remaining()), __version__)

    @_rpc
    async def IngestDocuments(
        self, request: pb.IngestDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.IngestDocumentsResponse:
        with audited("IngestDocuments", context, [d.document_id or d.filename for d in request.documents]) as record:
            _require_admin("IngestDocuments")
            limit, v = self._s.max_documents_per_request, validation.Violations()
            if not request.documents:
                v.add("documents", "documents must not be empty")
            if len(request.documents) > limit:
                v.add("documents", f"documents may hold at most {limit} entries (got {len(request.documents)})")
            sources = [v.check(convert.document_in, d, i, self._s.max_document_bytes) for i, d in enumerate(request.documents[:limit])]
            v.raise_if_any()
            stored: list[IngestedDocument] = []
            try:
                report = await self._app.ingest([s for s in sources if s is not None], writer=current_identity(), stored=stored)
                record.update(failed=len(report.errors) + report.errors_not_listed)
            finally:
                # Also for a call its deadline or cancel cut: what it committed before stays stored.
                record.update(stored=[d.document_id for d in stored])
        return convert.ingest_out(report, self._s.max_response_bytes)

    @_rpc
    async def DeleteDocuments(
        self, request: pb.DeleteDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteDocumentsResponse:
        with audited("DeleteDocuments", context, list(request.document_ids)) as record:
            _require_admin("DeleteDocuments")
            if not request.document_ids:
                raise InvalidArgument("document_ids must not be empty")
            ids = validation.document_ids(request.document_ids, self._s.max_documents_per_request, "document_ids")
            deleted: list[str] = []
            try:
                _, missing = await self._app.delete(ids, writer=current_identity(), deleted=deleted)
                record.update(not_found=len(missing))
            finally:
                # Also for a call its deadline or cancel cut, as for an ingest.
                record.update(deleted=deleted)
        return pb.DeleteDocumentsResponse(deleted=deleted, not_found=missing)


def _message_or_bytes(response: pb.QueryResponse | bytes) -> bytes:
    return response if type(response) is bytes else response.SerializeToString()  # type: ignore[union-attr]


class _Handlers:
    """Collects the method handlers the generated registration adds (its generic handler serves the same ones)."""

    def __init__(self) -> None:
        self.registered: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: tuple[grpc.GenericRpcHandler, ...]) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.registered = handlers


def register(servicer: RetrievalServicer, edge: Edge) -> None:
    """The generated registration, with Query's response serializer also taking serialized bytes."""
    collected = _Handlers()
    pb_grpc.add_RetrievalServiceServicer_to_server(servicer, collected)  # type: ignore[arg-type]
    handlers = dict(collected.registered)
    query = handlers["Query"]
    handlers["Query"] = grpc.unary_unary_rpc_method_handler(query.unary_unary, query.request_deserializer, _message_or_bytes)
    edge.add_registered_method_handlers(pb.DESCRIPTOR.services_by_name["RetrievalService"].full_name, handlers)


def _require_admin(rpc: str) -> None:
    identity = current_identity()
    if identity.role is Role.ANONYMOUS:
        # No credentials at all: UNAUTHENTICATED, as jwt mode says it (TOKEN_MISSING), so that a
        # client's log-in logic acts the same whatever the server's mode.
        raise Unauthenticated(f"{rpc} needs an authenticated caller with the role ADMIN or SUPER_ADMIN; the call names no one",
                              "CREDENTIALS_MISSING")
    if identity.role not in _ADMIN_ROLES:
        who = f"{identity.user_id} ({identity.role.value}, verified by {identity.verified_by})" if identity.user_id else "an anonymous caller"
        raise PermissionDenied(f"{rpc} needs the role ADMIN or SUPER_ADMIN; the caller is {who}")
