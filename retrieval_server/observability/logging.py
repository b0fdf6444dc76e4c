"""Structured logs: one JSON object per line (or plain text for a terminal)."""

from __future__ import annotations

import json
import logging
import sys
import time

from opentelemetry import trace


class JsonFormatter(logging.Formatter):
    _RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

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
        out.update({k: v for k, v in vars(record).items() if k not in self._RESERVED})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # DEBUG is for this service's own events: libraries (aiosqlite logs every statement, numba every
    # compilation step) stay at INFO or above.
    root.setLevel(max(logging.getLevelName(level), logging.INFO))
    logging.getLogger("retrieval_server").setLevel(level)
