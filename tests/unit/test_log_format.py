"""RETRIEVAL_LOG_FORMAT=text keeps what a line says besides its message."""

from __future__ import annotations

import logging

from retrieval_server.observability.logging import TextFormatter


def test_text_lines_carry_their_fields_one_line_each() -> None:
    """Without its fields an audit line read "admin action", and "serving" said nothing of where.
    Values are JSON: a caller's newline cannot start a line of its own."""
    record = logging.LogRecord("retrieval_server.audit", logging.INFO, __file__, 1, "admin action", None, None)
    record.__dict__.update(rpc="DeleteDocuments", user="mallory\nFAKE admin action", documents=["doc-1", "doc-2"])
    line = TextFormatter().format(record)
    assert "\n" not in line and line.endswith(' admin action rpc="DeleteDocuments" user="mallory\\nFAKE admin action" documents=["doc-1", "doc-2"]')
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "no fields", None, None)
    assert TextFormatter().format(plain).endswith("INFO x no fields")
