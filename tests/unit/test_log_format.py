"""RETRIEVAL_LOG_FORMAT=text keeps what a line says besides its message."""

from __future__ import annotations

import logging

import httpx
import pytest

from retrieval_server.observability.logging import TextFormatter, configure
from tests.support.http_servers import json_server


def test_text_lines_carry_their_fields_one_line_each() -> None:
    """Without its fields an audit line read "admin action", and "serving" said nothing of where.
    Values are JSON: a caller's newline cannot start a line of its own."""
    record = logging.LogRecord("retrieval_server.audit", logging.INFO, __file__, 1, "admin action", None, None)
    record.__dict__.update(rpc="DeleteDocuments", user="mallory\nFAKE admin action", documents=["doc-1", "doc-2"])
    line = TextFormatter().format(record)
    assert "\n" not in line and line.endswith(' admin action rpc="DeleteDocuments" user="mallory\\nFAKE admin action" documents=["doc-1", "doc-2"]')
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "no fields", None, None)
    assert TextFormatter().format(plain).endswith("INFO x no fields")


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_a_urls_password_never_reaches_the_log(capsys: pytest.CaptureFixture[str], level: str) -> None:
    """httpx logged every LLM, TEI and JWKS request at INFO with the whole URL, password included."""
    configure(level, "json")
    with json_server(lambda path, body: (500, {"error": "down"})) as server:
        url = server.url.replace("http://", "http://svc:LLMPASS321@")
        with httpx.Client() as client:
            assert client.post(f"{url}/v1/chat/completions", json={}).status_code == 500
    logging.getLogger("retrieval_server.test").warning("a line of the service's own")
    err = capsys.readouterr().err
    assert "a line of the service's own" in err and "LLMPASS321" not in err
