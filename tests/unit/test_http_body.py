"""What an HTTP service's error response says, read once for every client of one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from retrieval_server.backends import llm, reranker
from retrieval_server.backends.http_body import error_value
from tests.support.http_servers import json_server, tei_rerank, word_overlap


@pytest.mark.parametrize(("body", "error"), [
    (b'{"error": "batch size 20 > maximum allowed batch size 8", "error_type": "Validation"}',
     "batch size 20 > maximum allowed batch size 8"),  # TEI's
    (b'{"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}}',
     {"code": "insufficient_quota", "message": "You exceeded your quota"}),  # an LLM provider's
    (b'{"message": "no error member"}', None),
    (b'["error"]', None),
    (b"<html>502 Bad Gateway</html>", None),  # a proxy's page
    (b"[" * 100_000, None),  # nested past the parser's depth
])
def test_the_error_member_is_read_as_sent_or_none(body: bytes, error: object) -> None:
    response = httpx.Response(400, content=body)
    assert error_value(response) == error
    # Each client keeps what it reads: TEI's text after the status, a provider's object.
    assert reranker._tei_said(response) == (f": {error}" if isinstance(error, str) else "")  # noqa: SLF001
    assert llm._error_body(response) == (error if isinstance(error, dict) else {})  # noqa: SLF001


async def test_every_call_to_tei_and_the_llm_providers_asks_the_server_to_close_the_connection() -> None:
    """Each call has a connection of its own; closed by the client, every one left a port of the
    client's in TIME_WAIT for 60 s, and some 470 calls a second to one endpoint used them all up.
    Asked to close, the server closes first and holds the TIME_WAIT instead."""

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/rerank":
            return tei_rerank(word_overlap)(path, body)
        return 200, {"choices": [{"message": {"role": "assistant", "content": "an answer"}, "finish_reason": "stop"}]}

    with json_server(handle) as server:
        tei = reranker.TeiReranker(server.url)
        chat = llm.OpenAICompatibleChat(server.url + "/v1", "m", api_key="k", timeout_s=60, max_retries=0, backoff_s=0)
        try:
            for _ in range(3):
                assert await tei.rerank("cats", ["cats sleep", "dogs bark"]) == [1.0, 0.0]
                assert await chat.complete("sys", "prompt", temperature=0) == "an answer"
        finally:
            await tei.close()
            await chat.close()
    assert len(server.headers) == 6
    assert all(h.get("connection") == "close" for h in server.headers)
