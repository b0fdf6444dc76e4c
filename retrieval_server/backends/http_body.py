"""An HTTP request whose response is read whole only up to a size limit.

The HTTP services we call (TEI, the LLM providers, the identity provider's JWKS) are the operator's, but one that misbehaves (a
proxy's error page, a runaway generation, a wrong URL serving a file) must not fill the server's
memory: httpx reads a response whole, whatever its size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: far above what our clients read (a completion of a few thousand tokens, a batch's scores)
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: headers that describe the body as sent, not as read (decoded, whole)
_AS_SENT = {b"content-encoding", b"content-length", b"transfer-encoding"}


class ResponseTooLarge(Exception):
    """The response's body is larger than the limit."""


async def request_bounded(
    client: httpx.AsyncClient, method: str, url: str, *, limit: int = MAX_RESPONSE_BYTES, **kwargs: Any
) -> httpx.Response:
    """``client.request(method, url, **kwargs)``, its body read whatever the status (an error's
    reason, a Retry-After's account), up to ``limit`` bytes: see :func:`read_whole`."""
    async with client.stream(method, url, **kwargs) as response:
        return await read_whole(response, limit)


async def read_whole(response: httpx.Response, limit: int = MAX_RESPONSE_BYTES) -> httpx.Response:
    """A streamed ``response`` read whole (decoded) as a response of its own, or
    :class:`ResponseTooLarge` as soon as it passes ``limit`` bytes (the caller's closing of the
    stream drops the connection)."""
    import httpx

    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ResponseTooLarge(f"a response of {declared} bytes, above the limit of {limit}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise ResponseTooLarge(f"a response above the limit of {limit} bytes")
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _AS_SENT]
    return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=response.request)
