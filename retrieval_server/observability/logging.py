"""Structured logs: one JSON object per line (or plain text for a terminal)."""

from __future__ import annotations

import json
import logging
import sys
import time

from opentelemetry import trace


#: what a LogRecord holds of its own: anything else came with ``extra=``
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _RESERVED}


class TextFormatter(logging.Formatter):
    """One line: time, level, logger, message, then the fields the line came with as key=value,
    each value JSON (so a caller's text cannot start a line of its own). Without them an audit line
    read "admin action", and "serving" said nothing of where."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in _extras(record).items())
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # a traceback stays below the line
        return f"{head} {fields}{newline}{rest}"


class JsonFormatter(logging.Formatter):

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            # Several server processes may share one log stream.
            "pid": record.process,
            "msg": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            # Joins the line to its trace (which, with the caller's traceparent, is the caller's).
            out["trace_id"], out["span_id"] = format(span.trace_id, "032x"), format(span.span_id, "016x")
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # DEBUG is for this service's own events: libraries (aiosqlite logs every statement, numba every
    # compilation step) stay at INFO or above.
    root.setLevel(max(logging.getLevelName(level), logging.INFO))
    # httpx logs every request at INFO with its whole URL, a user and password in it too (an LLM's,
    # TEI's or a JWKS URL): the service says what failed itself, without them (http_body.failure_text).
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.getLevelName(level), logging.WARNING))
    logging.getLogger("retrieval_server").setLevel(level)
    # Libraries' warnings (qdrant-client's "Api key is used with an insecure connection") went to
    # stderr as plain text among the JSON lines: they are log records like any other.
    logging.captureWarnings(True)
