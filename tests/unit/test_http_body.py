"""What an HTTP service's error response says, read once for every client of one."""

from __future__ import annotations

import httpx
import pytest

from retrieval_server.backends import llm, reranker
from retrieval_server.backends.http_body import error_value


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
