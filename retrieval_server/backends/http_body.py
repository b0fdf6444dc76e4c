"""HTTP responses read only up to a size limit, counted as they arrive.

The HTTP services we call (TEI, the LLM providers, the identity provider's JWKS) are the operator's,
but one that misbehaves (a proxy's error page, a runaway generation, a wrong URL serving a file)
must not fill the server's memory: httpx reads a response whole, whatever its size, a compressed
one decodes each read whole (a 64 KiB read of zeros is 64 MiB), and an SSE parser holds an event
or a line whole until it ends. So the body is read raw, inflated at most up to the limit, and
counted before anything else holds it."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import re
import zlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: the most any response is read to; each call is held to what it can return (:func:`response_limit`)
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: what a response holds besides the items a call asked for: a provider's ids, usage and safety
#: ratings, an error's text, a proxy's error page
ENVELOPE_BYTES = 64 * 1024
#: the encodings :func:`body_chunks` inflates within the limit; asked for instead of httpx's default
ACCEPT_ENCODING = {"Accept-Encoding": "gzip, deflate"}
#: headers that describe the body as sent, not as read (decoded, whole)
_AS_SENT = {b"content-encoding", b"content-length", b"transfer-encoding"}


#: up to the authority's last @, as URL parsers read it: a password holding an @ is left out whole
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def without_userinfo(url: str) -> str:
    """``url`` without the user and password an operator may have put in it, for a log line."""
    return _USERINFO.sub("", url)


def failure_text(exc: BaseException) -> str:
    """What an HTTP call's failure may say where a caller reads it (a tool's result, an answer): the
    status and its reason, or the transport's error. httpx's own text for a status quotes the whole
    URL, with the user and password an operator may have put in it."""
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase}".rstrip()
    return without_userinfo(str(exc)) or type(exc).__name__


def error_value(response: httpx.Response) -> Any:
    """The ``error`` member of a response's JSON body, as sent (TEI's is a string, the LLM
    providers' an object), for each caller to read its own way; None when there is none."""
    try:
        body = json.loads(response.content)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return None
    return body.get("error") if isinstance(body, dict) else None


def unpooled_client(**kwargs: Any) -> httpx.AsyncClient:
    """``httpx.AsyncClient(**kwargs)`` whose connections each carry one call, closed after it.

    Bytes a server sends past a response's end (a second whole response, from an upstream or a
    proxy out of step with it) stay in h11's buffer, and httpcore puts the connection back in the
    pool when its socket is not readable, never seeing them: the next call on it, any caller's,
    was answered with them (one caller read another's answer). No public hook of httpx or
    httpcore sees that buffer, so no connection is kept alive; the cost is a TCP (and TLS)
    handshake per call.

    Each request says ``Connection: close``, so that the server closes first: the side that closes
    first holds the port pair in TIME_WAIT for 60 s, and with the client closing, every call left
    one of its ephemeral ports there (some 470 calls a second to one endpoint used them all up)."""
    import httpx

    headers = httpx.Headers(kwargs.pop("headers", None))
    headers.setdefault("Connection", "close")
    return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), headers=headers, **kwargs)


def response_limit(items_bytes: int) -> int:
    """The size a call's response is read to: the most its items can take, with their envelope.

    JSON of small values takes some 25 times its size once parsed (``[{}, {}, ...]``), parsed on
    the event loop with the GIL held (a thread would not free the loop): 8 MiB of it for every
    call cost 210 MB and half a second's stall."""
    return min(MAX_RESPONSE_BYTES, ENVELOPE_BYTES + items_bytes)


class ResponseRefused(Exception):
    """The response's body is larger than the limit (:class:`ResponseTooLarge`), in an encoding
    that was not asked for, or compressed brokenly."""


class ResponseTooLarge(ResponseRefused):
    """The response's body is larger than the limit; the caller says what the limit is for."""


async def request_bounded(
    client: httpx.AsyncClient, method: str, url: str, *, limit: int = MAX_RESPONSE_BYTES, **kwargs: Any
) -> httpx.Response:
    """``client.request(method, url, **kwargs)``, its body read whatever the status (an error's
    reason, a Retry-After's account), up to ``limit`` bytes: see :func:`read_whole`. The whole call
    :func:`within` the client's timeout."""
    headers = {**ACCEPT_ENCODING, **kwargs.pop("headers", {})}
    async with within(client.timeout.read), client.stream(method, url, headers=headers, **kwargs) as response:
        return await read_whole(response, limit)


@contextlib.asynccontextmanager
async def within(seconds: float) -> AsyncIterator[None]:
    """The block held to ``seconds`` whole, ``httpx.ReadTimeout`` past them: httpx's timeout bounds
    each read, and a server sending a byte a little more often than that was waited for until the
    size limit."""
    import httpx

    whole = asyncio.timeout(seconds)
    try:
        async with whole:
            yield
    except TimeoutError:
        if not whole.expired():
            raise
        raise httpx.ReadTimeout(f"no whole response within {seconds:g} s") from None


async def read_whole(response: httpx.Response, limit: int = MAX_RESPONSE_BYTES) -> httpx.Response:
    """A streamed ``response`` read whole (decoded) as a response of its own; :class:`ResponseRefused`
    as soon as it passes ``limit`` bytes (the caller's closing of the stream drops the connection)."""
    import httpx

    body = b"".join([chunk async for chunk in body_chunks(response, limit)])
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _AS_SENT]
    return httpx.Response(response.status_code, headers=headers, content=body, request=response.request)


async def body_chunks(response: httpx.Response, limit: int = MAX_RESPONSE_BYTES) -> AsyncIterator[bytes]:
    """A streamed ``response``'s body, decoded, chunk by chunk; :class:`ResponseRefused` before
    more than ``limit`` decoded bytes are held."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ResponseTooLarge(f"a response of {declared} bytes, above the limit of {limit}")
    inflate = _Inflater.of(response.headers.get("content-encoding", ""))
    total = 0
    async for raw in response.aiter_raw():
        chunk = inflate(raw, limit - total + 1) if inflate else raw
        total += len(chunk)
        if total > limit:
            raise ResponseTooLarge(f"a response above the limit of {limit} bytes")
        yield chunk


class BoundedText:
    """A streamed response as an SSE parser reads it (``headers``, ``aiter_text``), its body
    bounded as :func:`body_chunks` bounds it."""

    def __init__(self, response: httpx.Response, limit: int = MAX_RESPONSE_BYTES) -> None:
        self._response, self._limit = response, limit
        self.headers = response.headers

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder(self._response.encoding or "utf-8")(errors="replace")
        async for chunk in body_chunks(self._response, self._limit):
            if text := decoder.decode(chunk):
                yield text
        if tail := decoder.decode(b"", final=True):
            yield tail


class _Inflater:
    """gzip or deflate, inflated no further than asked; None for a body sent as it is."""

    def __init__(self, wbits: int, raw_fallback: bool) -> None:
        self._inflate = zlib.decompressobj(wbits)
        self._raw_fallback = raw_fallback
        #: what was read while raw deflate was still possible, to inflate again as raw if it is:
        #: zlib tells its own format from raw only once it holds its 2-byte header whole
        self._head = b""

    @classmethod
    def of(cls, encoding: str) -> _Inflater | None:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            return None
        if encoding in ("gzip", "x-gzip"):
            return cls(16 + zlib.MAX_WBITS, raw_fallback=False)
        if encoding == "deflate":  # zlib-wrapped as the RFC says, or raw as some servers send it
            return cls(zlib.MAX_WBITS, raw_fallback=True)
        raise ResponseRefused(f"a response in the encoding {encoding!r}, which was not asked for")

    def __call__(self, data: bytes, at_most: int) -> bytes:
        """``data`` inflated: at most ``at_most`` bytes, the rest of it left unread."""
        try:
            try:
                out = self._inflate.decompress(data, at_most)
            except zlib.error:
                if not self._raw_fallback:
                    raise
                self._inflate, self._raw_fallback = zlib.decompressobj(-zlib.MAX_WBITS), False
                out = self._inflate.decompress(self._head + data, at_most)
        except zlib.error as exc:
            raise ResponseRefused(f"a response whose compression is broken: {exc}") from exc
        if self._raw_fallback:
            self._head += data
            if out or len(self._head) >= 2:  # zlib's own format: an error later is a broken body
                self._raw_fallback, self._head = False, b""
        return out
