"""Structured logs: one JSON object per line (or plain text for a terminal)."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

from opentelemetry import trace

log = logging.getLogger(__name__)


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
            # Several server processes write to one log stream (through the supervisor's LogRelay).
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


#: the logger grpc's Cython layer logs through, and how it starts its line on a header value
#: that is not UTF-8 (grpc_string.pyx.pxi's ``_decode``)
GRPC_CYTHON_LOGGER = "grpc._cython.cygrpc"
_INVALID_ENCODING = "Invalid encoding on "
#: the least time between two lines counting such values
UNDECODABLE_SUMMARY_S = 60.0


class UndecodableHeaders(logging.Filter):
    """Drops grpc's "Invalid encoding on" records, counting them, with at most one line a
    ``interval_s`` saying how many there were.

    grpc logs each header value that is not UTF-8 twice, as an exception: 3 calls of 30,000 such
    values (90 KB on the wire, HPACK sending a repeated header in a byte) made 180,000 tracebacks,
    70 MB of log, and held the event loop, every caller's Health 11 s, for a caller without
    credentials. A logger's filter runs before any handler, so the traceback is never formatted;
    the line is written by whichever record comes once the interval has passed, so no task is
    needed to write it."""

    def __init__(self, interval_s: float = UNDECODABLE_SUMMARY_S) -> None:
        super().__init__()
        self.interval_s = interval_s
        #: told of each record dropped (the server's retrieval_undecodable_header_values_total)
        self.count: Callable[[], None] | None = None
        self._unlogged = 0
        self._logged_at = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(_INVALID_ENCODING)):
            return True
        if self.count is not None:
            self.count()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval_s:
            self._logged_at = now
            log.warning("gRPC read header values that are not UTF-8 as Latin-1, its log lines about them dropped",
                        extra={"values": self._unlogged, "interval_s": self.interval_s})
            self._unlogged = 0
        return False


#: the process's one filter on grpc's logger (:func:`filter_undecodable_headers`)
UNDECODABLE_HEADERS = UndecodableHeaders()


def filter_undecodable_headers() -> None:
    """Put :data:`UNDECODABLE_HEADERS` on grpc's logger, once."""
    grpc_logger = logging.getLogger(GRPC_CYTHON_LOGGER)
    if UNDECODABLE_HEADERS not in grpc_logger.filters:
        grpc_logger.addFilter(UNDECODABLE_HEADERS)


def configure(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Log to ``stream`` (stderr)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
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
    filter_undecodable_headers()
    # Libraries' warnings (qdrant-client's "Api key is used with an insecure connection") went to
    # stderr as plain text among the JSON lines: they are log records like any other.
    logging.captureWarnings(True)
