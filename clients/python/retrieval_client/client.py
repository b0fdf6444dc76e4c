"""Sync and asyncio clients. Both build requests with the same helpers; only the transport differs."""

from __future__ import annotations

import asyncio
import json
import math
import numbers
import os
import random
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc as pb_grpc
from retrieval_client.files import MAX_MESSAGE, file_bytes
from retrieval_client.targets import is_loopback
from retrieval_client.tls_files import check_key_pair, pem_certificates, pem_key

_STRATEGIES = {
    "semantic": pb.STRATEGY_SEMANTIC,
    "keyword": pb.STRATEGY_KEYWORD,
    "hybrid": pb.STRATEGY_HYBRID,
    "adaptive": pb.STRATEGY_ADAPTIVE,
    "graph": pb.STRATEGY_GRAPH,
}
_FUSIONS = {"rrf": pb.FUSION_RRF, "weighted": pb.FUSION_WEIGHTED}
_MODES = {"retrieval": pb.MODE_RETRIEVAL_ONLY, "generation": pb.MODE_GENERATION}
_ACCESS = {"public": pb.ACCESS_PUBLIC, "private": pb.ACCESS_PRIVATE}
_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)]
#: the longest timeout a gRPC deadline holds: from 1e10 s it overflowed, and the call failed at once
#: with DEADLINE_EXCEEDED without reaching the server (the CLI's --timeout shares this limit)
MAX_TIMEOUT_S = 1e9
#: how many times Query, Search, Health and a StreamQuery before its first message are tried again
#: after UNAVAILABLE (4 attempts in all), unless the server says its backend timed out
#: (BACKEND_TIMEOUT: another attempt would wait as long again); the Go and TypeScript clients try Query, Search and
#: Health again as many times, never a stream. Never an ingest or a delete: a retried ingest
#: reports what its first attempt stored as replaced, a retried delete what it deleted as not found.
DEFAULT_RETRIES = 3
#: the backoff between attempts: 0.2 s, doubling, at most 2 s, each wait half to all of it, or the
#: server's RetryInfo delay plus up to half again when longer; the same in the three clients
_FIRST_BACKOFF_S = 0.2
_MAX_BACKOFF_S = 2.0


def _id_list(name: str, ids: Iterable[str]) -> list[str]:
    """``ids`` as the list a request holds. A str is refused although it is an iterable of str:
    taken as one, ``delete("cache-notes")`` deleted document "e", and a grant to "bob" granted b and o."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} takes a list of ids, not one string (got {ids!r})")
    return list(ids)


def document_from_file(
    path: Path | str,
    *,
    document_id: str = "",
    access: str | None = None,
    owner_id: str = "",
    granted_user_ids: Sequence[str] = (),
    title: str = "",
    url: str = "",
    metadata: dict[str, str] | None = None,
) -> pb.DocumentInput:
    """A file as an ingest input; its extension selects the server's loader. ``access`` is
    "public" or "private" (any case), or None to leave it unset: the server takes that as public,
    and refuses it with an ``owner_id`` (a private document sent again without its access would
    be published); anything else is a ValueError, not a public document, and so are
    ``granted_user_ids`` without access="private", as the server refuses them. The file is read as
    :func:`file_bytes` reads it: a regular file of at most 256 MiB (what this client sends in one
    request; the server's own limit, 16 MiB by default, may be lower)."""
    p = Path(path)
    try:
        level = pb.ACCESS_UNSPECIFIED if access is None else _ACCESS[access.lower()]
    except KeyError:
        raise ValueError(f"access must be one of {', '.join(_ACCESS)}, or None to leave it unset (got {access!r})") from None
    grantees = _id_list("granted_user_ids", granted_user_ids)
    if grantees and level != pb.ACCESS_PRIVATE:
        # Refused before the file is read: the server refuses grants on a document every caller
        # reads (INVALID_ARGUMENT), which is what public and unset access both mean.
        raise ValueError(f"granted_user_ids need access='private' (access is {access!r}: a public document is read by everyone)")
    return pb.DocumentInput(
        document_id=document_id,
        filename=p.name,
        content=file_bytes(p),
        title=title,
        url=url,
        # Normalized, not absolute: ./docs/a.txt and docs/a.txt are one source, and the host's path
        # (/home/<user>/...) is in no hit; the same tree synced elsewhere is the same source.
        source=os.path.normpath(p),
        access=level,
        owner_id=owner_id,
        metadata=metadata or {},
        granted_user_ids=grantees,
    )


def _int32_top_k(top_k: int) -> int:
    """``top_k`` as the request's int32, the range the server reads being its own to say. Checked
    here as the Node client's topK is: protobuf refused 2**31 with "Value out of range" and 1.5
    with a TypeError about a float, neither naming the field."""
    message = f"top_k must be an integer from -2147483648 to 2147483647 (got {top_k!r})"
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(message)
    if not -(2**31) <= top_k < 2**31:
        raise ValueError(message)
    return int(top_k)


def _query_request(
    query: str, top_k: int, strategy: str, use_cache: bool, document_ids: Sequence[str], mode: str = "retrieval",
    fusion: str | None = None, rerank: bool | None = None,
) -> pb.QueryRequest:
    """``fusion`` None and ``rerank`` None leave the fields unset: the server's RETRIEVAL_FUSION, and reranking."""
    try:
        strat = _STRATEGIES[strategy.lower()]
    except KeyError:
        raise ValueError(f"strategy must be one of {', '.join(_STRATEGIES)}") from None
    if mode.lower() not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}")
    if fusion is not None and fusion.lower() not in _FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(_FUSIONS)}, or None for the server's (got {fusion!r})")
    return pb.QueryRequest(
        query=query,
        top_k=_int32_top_k(top_k),
        strategy=strat,
        mode=_MODES[mode.lower()],
        use_cache=use_cache,
        filters=pb.QueryFilters(document_ids=_id_list("document_ids", document_ids)),
        fusion=pb.FUSION_UNSPECIFIED if fusion is None else _FUSIONS[fusion.lower()],
        rerank=rerank,
    )


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS to the server: ``ca`` verifies the server's certificate (None: the system's roots);
    ``cert`` and ``key`` are this client's certificate for mutual TLS; ``server_name`` overrides
    the name checked in the server's certificate (when the target is an IP address, say)."""

    ca: Path | str | None = None
    cert: Path | str | None = None
    key: Path | str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        # The files are checked as the Tls is made, as the Go and TypeScript clients check theirs:
        # read only by the first call, a bad one failed every call UNAVAILABLE naming no file.
        self.credentials()

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=pem_certificates(self.ca, "Tls.ca") if self.ca else None,
            private_key=pem_key(self.key, "Tls.key") if self.key else None,
            certificate_chain=pem_certificates(self.cert, "Tls.cert") if self.cert else None,
        )
        if self.cert and self.key:
            check_key_pair(self.cert, "Tls.cert", self.key, "Tls.key")
        return credentials

    def options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def _channel_options(options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``options`` as gRPC takes them, checked here: grpc refused a pair that is not one, or a name
    that is no str, with an error naming neither the option nor the argument."""
    out = list(options)
    for option in out:
        if not (isinstance(option, tuple) and len(option) == 2 and isinstance(option[0], str)):
            raise TypeError(f"options must be (name, value) pairs with a str name, as gRPC channel options are (got {option!r})")
    return out


def _seconds(timeout: float) -> float | None:
    """``timeout`` as a call's deadline in seconds: 0 and inf are none, and a longer one than a
    deadline holds is :data:`MAX_TIMEOUT_S` (31 years: no call tells the two apart)."""
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be 0 to inf seconds, 0 and inf for no deadline (got {timeout!r})")
    if timeout == 0 or math.isinf(timeout):
        return None
    return min(timeout, MAX_TIMEOUT_S)


def _metadata_value(name: str, value: str) -> str:
    """``value`` as gRPC metadata carries it: printable ASCII. Refused otherwise with an error that
    does not repeat it (grpc would fail every call as INTERNAL "Invalid metadata")."""
    if not all(" " <= c <= "~" for c in value):
        raise ValueError(f"the {name} must be printable ASCII, as gRPC metadata is (a user id beyond ASCII travels in a token's claims)")
    return value


def _groups_value(groups: Sequence[str] | None) -> str:
    """``groups`` as the one x-user-groups value, comma-separated; ValueError naming a group the
    server would read as another: one holding a comma (two groups), empty or with space or tab
    around it (the server drops them, where a token's such group is refused)."""
    names = [_metadata_value("group", g) for g in _id_list("groups", groups or ())]
    for name in names:
        if "," in name:
            raise ValueError(f"a group must not contain a comma: x-user-groups separates groups with it (got {name!r})")
        if not name or name != name.strip(" \t"):
            raise ValueError(f"a group must be a name without space around it (got {name!r})")
    return ",".join(names)


#: the ErrorInfo reason of an UNAVAILABLE not tried again: the backend let its whole timeout pass,
#: and another attempt would wait as long again (a frozen MySQL took 4 times MYSQL_TIMEOUT_S)
_TIMED_OUT = "BACKEND_TIMEOUT"


def _server_details(error: grpc.RpcError) -> tuple[str, float]:
    """The server's google.rpc.ErrorInfo reason ("" without one) and the wait its RetryInfo asks for (0 without one)."""
    reason, delay = "", 0.0
    for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key != "grpc-status-details-bin":
            continue
        try:
            details = status_pb2.Status.FromString(value).details
        except DecodeError:
            return "", 0.0
        for detail in details:
            info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                reason = info.reason
            elif detail.Unpack(retry):
                delay = retry.retry_delay.ToTimedelta().total_seconds()
    return reason, delay


class _Attempts:
    """The attempts of one call that is tried again after UNAVAILABLE, the server's answer while a
    backend it needs is down (but not one that timed out), within the call's deadline (``timeout``, None: none)."""

    def __init__(self, retries: int, timeout: float | None) -> None:
        self._retries = retries
        self._timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._backoff = _FIRST_BACKOFF_S
        self._waited = False

    def timeout(self) -> float | None:
        """The next attempt's timeout: what the waits and the attempts before it left of the call's."""
        if self._deadline is None or not self._waited:
            return self._timeout
        return max(self._deadline - time.monotonic(), 0.0)

    def wait(self, error: grpc.RpcError) -> float | None:
        """Seconds to wait before trying again after ``error``; None: it is the call's answer."""
        if self._retries == 0 or error.code() is not grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
            return None
        reason, delay = _server_details(error)
        if reason == _TIMED_OUT:
            return None
        # Both jittered, so that clients that failed together do not come back together: the server
        # sends every caller the same delay, and one left as it is brought them all back at once.
        wait = max(random.uniform(self._backoff / 2, self._backoff), random.uniform(delay, 1.5 * delay))
        if self._deadline is not None and time.monotonic() + wait >= self._deadline:
            # No time would be left to try: the server's UNAVAILABLE says more than a DEADLINE_EXCEEDED would.
            return None
        self._retries -= 1
        self._backoff = min(2 * self._backoff, _MAX_BACKOFF_S)
        self._waited = True
        return wait


class _Base:
    _stub: pb_grpc.RetrievalServiceStub

    def __init__(
        self, target: str, user_id: str | None, role: str | None, groups: Sequence[str] | None, token: str | None, tls: Tls | None, timeout: float | None,
        retries: int, options: Sequence[tuple[str, Any]],
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer from 0 (no retry) up (got {retries!r})")
        self._retries = retries
        md = []
        token = token.strip() if token else token  # read from a file, it ends in a newline
        if token:
            if tls is None and not is_loopback(target):
                raise ValueError(
                    "a bearer token travels only over TLS, or to this machine (localhost, 127.0.0.0/8, ::1 or a unix: socket, "
                    f"in a target without '?', '#' or '%'; got {target!r}): pass tls=Tls(...)"
                )
            md.append(("authorization", f"Bearer {_metadata_value('token', token)}"))
        if user_id:
            md.append(("x-user-id", _metadata_value("user id", user_id)))
        if role:
            md.append(("x-user-role", _metadata_value("role", role)))
        if value := _groups_value(groups):
            md.append(("x-user-groups", value))
        self._metadata = tuple(md)
        self._timeout = None if timeout is None else _seconds(timeout)
        self._tls = tls
        own = _OPTIONS + (tls.options() if tls else [])
        given = _channel_options(options)
        # gRPC reads the first of two options of one name: the caller's would be ignored after the client's.
        self._options = [option for option in own if option[0] not in {name for name, _ in given}] + given

    @property
    def service(self) -> pb_grpc.RetrievalServiceStub:
        """The generated stub on this client's channel, for what the client's calls do not offer:
        pass ``metadata=client.metadata`` and a ``timeout`` yourself."""
        return self._stub

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The identity metadata every call of this client sends."""
        return self._metadata

    def _deadline(self, timeout: float | None, *, write: bool = False) -> float | None:
        """Seconds for one call: ``timeout`` when given (0 or inf: no deadline), else the client's,
        except for a ``write`` (ingest, delete): a large batch takes minutes, and one cut short by
        a default the caller never chose stops part-way with no answer saying what was stored."""
        if timeout is None:
            return None if write else self._timeout
        return _seconds(timeout)


class RetrievalClient(_Base):
    """A blocking client. ``token`` is a JWT sent as ``authorization: Bearer``; ``user_id``,
    ``role`` and ``groups`` (the user's groups, for documents granted to ``group:<name>``) are the
    identity headers (servers in auth mode ``none``, or behind a gateway). ``retries``: how many
    times a query, search, health or stream_query (before its first message) is tried again after
    UNAVAILABLE, 0 for none; never past the call's deadline, never after an UNAVAILABLE whose
    ErrorInfo reason is BACKEND_TIMEOUT, and never an ingest or a delete. ``options``: more gRPC
    channel options, ``(name, value)`` pairs (keepalive, a user agent, ...), after the client's own,
    which one of the same name replaces."""

    def __init__(
        self, target: str = "localhost:50051", *, user_id: str | None = None, role: str | None = None, groups: Sequence[str] | None = (),
        token: str | None = None, tls: Tls | None = None, timeout: float | None = 60.0, retries: int = DEFAULT_RETRIES,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        super().__init__(target, user_id, role, groups, token, tls, timeout, retries, options)
        self._channel = grpc.secure_channel(target, tls.credentials(), options=self._options) if tls else grpc.insecure_channel(target, options=self._options)
        self._stub = pb_grpc.RetrievalServiceStub(self._channel)

    def query(
        self,
        query: str,
        *,
        top_k: int = 0,
        strategy: str = "semantic",
        use_cache: bool = True,
        document_ids: Sequence[str] = (),
        mode: str = "retrieval",
        fusion: str | None = None,
        rerank: bool | None = None,
        timeout: float | None = None,
    ) -> pb.QueryResponse:
        """``strategy``: "semantic" (the default, as the server's), "keyword", "hybrid", "adaptive" or
        "graph"; ``mode``: "retrieval" (the default, as the server's: contexts only) or "generation"
        (a cited answer too); ``fusion``: "rrf" or "weighted", how HYBRID legs are combined (None: the server's
        RETRIEVAL_FUSION); ``rerank``: whether the cross-encoder reorders the candidates (None: yes)."""
        req = _query_request(query, top_k, strategy, use_cache, document_ids, mode, fusion, rerank)
        return self._retried("Query", req, timeout)  # type: ignore[no-any-return]

    def stream_query(
        self, query: str, *, top_k: int = 0, strategy: str = "hybrid", use_cache: bool = True, document_ids: Sequence[str] = (),
        mode: str = "generation", fusion: str | None = None, rerank: bool | None = None, timeout: float | None = None,
    ) -> Iterator[pb.StreamQueryResponse]:
        """Stage events, then answer text as it is written, then the final QueryResponse. Closing
        the iterator cancels the call. Unlike :meth:`query` (and the server's defaults for an unset
        field), ``strategy`` defaults to "hybrid" and ``mode`` to "generation": a stream is for an
        answer written as it comes; ``mode="retrieval"`` streams the stages and the contexts only."""
        req = pb.StreamQueryRequest(query=_query_request(query, top_k, strategy, use_cache, document_ids, mode, fusion, rerank))
        return self._stream(req, self._deadline(timeout))

    def search(self, query: str, *, top_k: int = 0, timeout: float | None = None) -> pb.SearchResponse:
        return self._retried("Search", pb.SearchRequest(query=query, top_k=_int32_top_k(top_k)), timeout)  # type: ignore[no-any-return]

    def health(self, *, timeout: float | None = None) -> pb.HealthResponse:
        return self._retried("Health", pb.HealthRequest(), timeout)  # type: ignore[no-any-return]

    def _retried(self, method: str, request: Message, timeout: float | None) -> Any:
        attempts = _Attempts(self._retries, self._deadline(timeout))
        while True:
            try:
                return getattr(self._stub, method)(request, metadata=self._metadata, timeout=attempts.timeout())
            except grpc.RpcError as error:
                if (wait := attempts.wait(error)) is None:
                    raise
            time.sleep(wait)

    def _stream(self, request: pb.StreamQueryRequest, timeout: float | None) -> Iterator[pb.StreamQueryResponse]:
        """The call's messages, the call tried again until its first one arrives: after it, the
        caller has read part of an answer that another attempt would give again. Started at the
        first read: a generator closed before it never runs its ``finally``, and a call started
        when it was made was left running on the server."""
        attempts = _Attempts(self._retries, timeout)
        call = self._stub.StreamQuery(request, metadata=self._metadata, timeout=attempts.timeout())
        try:
            while True:
                try:
                    first = next(call)
                    break
                except StopIteration:
                    return
                except grpc.RpcError as error:
                    if (wait := attempts.wait(error)) is None:
                        raise
                time.sleep(wait)
                call = self._stub.StreamQuery(request, metadata=self._metadata, timeout=attempts.timeout())
            yield first
            yield from call
        finally:
            call.cancel()

    def ingest(self, documents: Iterable[pb.DocumentInput], *, timeout: float | None = None) -> pb.IngestDocumentsResponse:
        req = pb.IngestDocumentsRequest(documents=list(documents))
        return self._stub.IngestDocuments(req, metadata=self._metadata, timeout=self._deadline(timeout, write=True))

    def delete(self, document_ids: Sequence[str], *, timeout: float | None = None) -> pb.DeleteDocumentsResponse:
        req = pb.DeleteDocumentsRequest(document_ids=_id_list("document_ids", document_ids))
        return self._stub.DeleteDocuments(req, metadata=self._metadata, timeout=self._deadline(timeout, write=True))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


class AsyncRetrievalClient(_Base):
    """The asyncio client; the same options as :class:`RetrievalClient`."""

    def __init__(
        self, target: str = "localhost:50051", *, user_id: str | None = None, role: str | None = None, groups: Sequence[str] | None = (),
        token: str | None = None, tls: Tls | None = None, timeout: float | None = 60.0, retries: int = DEFAULT_RETRIES,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        super().__init__(target, user_id, role, groups, token, tls, timeout, retries, options)
        self._channel = (
            grpc.aio.secure_channel(target, tls.credentials(), options=self._options) if tls else grpc.aio.insecure_channel(target, options=self._options)
        )
        self._stub = pb_grpc.RetrievalServiceStub(self._channel)

    async def query(
        self,
        query: str,
        *,
        top_k: int = 0,
        strategy: str = "semantic",
        use_cache: bool = True,
        document_ids: Sequence[str] = (),
        mode: str = "retrieval",
        fusion: str | None = None,
        rerank: bool | None = None,
        timeout: float | None = None,
    ) -> pb.QueryResponse:
        """As :meth:`RetrievalClient.query`."""
        req = _query_request(query, top_k, strategy, use_cache, document_ids, mode, fusion, rerank)
        return await self._retried("Query", req, timeout)  # type: ignore[no-any-return]

    def stream_query(
        self, query: str, *, top_k: int = 0, strategy: str = "hybrid", use_cache: bool = True, document_ids: Sequence[str] = (),
        mode: str = "generation", fusion: str | None = None, rerank: bool | None = None, timeout: float | None = None,
    ) -> AsyncIterator[pb.StreamQueryResponse]:
        """As :meth:`RetrievalClient.stream_query` (strategy "hybrid" and mode "generation" by
        default); closing the iterator (``aclose()``) cancels the call."""
        req = pb.StreamQueryRequest(query=_query_request(query, top_k, strategy, use_cache, document_ids, mode, fusion, rerank))
        return self._stream(req, self._deadline(timeout))

    async def search(self, query: str, *, top_k: int = 0, timeout: float | None = None) -> pb.SearchResponse:
        return await self._retried("Search", pb.SearchRequest(query=query, top_k=_int32_top_k(top_k)), timeout)  # type: ignore[no-any-return]

    async def health(self, *, timeout: float | None = None) -> pb.HealthResponse:
        return await self._retried("Health", pb.HealthRequest(), timeout)  # type: ignore[no-any-return]

    async def _retried(self, method: str, request: Message, timeout: float | None) -> Any:
        attempts = _Attempts(self._retries, self._deadline(timeout))
        while True:
            try:
                return await getattr(self._stub, method)(request, metadata=self._metadata, timeout=attempts.timeout())
            except grpc.RpcError as error:
                if (wait := attempts.wait(error)) is None:
                    raise
            await asyncio.sleep(wait)

    async def _stream(self, request: pb.StreamQueryRequest, timeout: float | None) -> AsyncIterator[pb.StreamQueryResponse]:
        """As :meth:`RetrievalClient._stream`: started at the first read, tried again until the
        first message arrives."""
        attempts = _Attempts(self._retries, timeout)
        call = self._stub.StreamQuery(request, metadata=self._metadata, timeout=attempts.timeout())
        try:
            while True:
                try:
                    message = await call.read()
                    break
                except grpc.RpcError as error:
                    if (wait := attempts.wait(error)) is None:
                        raise
                await asyncio.sleep(wait)
                call = self._stub.StreamQuery(request, metadata=self._metadata, timeout=attempts.timeout())
            while message is not grpc.aio.EOF:
                yield message
                message = await call.read()
        finally:
            call.cancel()

    async def ingest(self, documents: Iterable[pb.DocumentInput], *, timeout: float | None = None) -> pb.IngestDocumentsResponse:
        req = pb.IngestDocumentsRequest(documents=list(documents))
        return await self._stub.IngestDocuments(req, metadata=self._metadata, timeout=self._deadline(timeout, write=True))

    async def delete(self, document_ids: Sequence[str], *, timeout: float | None = None) -> pb.DeleteDocumentsResponse:
        req = pb.DeleteDocumentsRequest(document_ids=_id_list("document_ids", document_ids))
        return await self._stub.DeleteDocuments(req, metadata=self._metadata, timeout=self._deadline(timeout, write=True))

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.close()


def to_json(message: Message) -> str:
    """A response as indented JSON, with the proto's field names and every field, zero values
    included: left out, a first chunk's ``chunk_index`` (0) or an empty ``contexts`` vanished."""
    return json.dumps(MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True), indent=2)

