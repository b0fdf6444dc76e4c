"""Every line the service writes to stderr is a log record in the configured format."""

from __future__ import annotations

import json
import logging
import warnings

import pytest

from retrieval_server.observability.logging import configure


def test_a_librarys_warning_is_a_json_line_like_any_other(capsys: pytest.CaptureFixture[str]) -> None:
    """qdrant-client's "Api key is used with an insecure connection" went to stderr as plain text
    among the JSON lines."""
    # Another test's configure() may have captured warnings under pytest's own recorder, which
    # logging then keeps as "captured" after pytest put its display back.
    logging.captureWarnings(False)
    try:
        configure("INFO", "json")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("Api key is used with an insecure connection.", UserWarning, stacklevel=1)
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert lines and all(json.loads(line)["level"] for line in lines)
        assert any("Api key is used with an insecure connection." in json.loads(line)["msg"] for line in lines)
    finally:
        logging.captureWarnings(False)
