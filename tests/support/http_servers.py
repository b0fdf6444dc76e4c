"""Small local HTTP servers that speak external services' wire protocols, for tests.

They run in a thread on 127.0.0.1 and record what they received. A handler answers JSON (with
extra headers: :class:`WithHeaders`; without a length: :class:`Unsized`), Server-Sent Events
(:class:`Sse`) as streaming LLM APIs do, or any bytes under any headers (:class:`Streamed`); or
JSON followed by a second response nobody asked for yet (:class:`Followed`).
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Handler = Callable[[str, dict[str, Any]], tuple[int, Any]]


@dataclass(frozen=True)
class Sse:
    """A handler's answer sent as Server-Sent Events: ``(event name or None, data)`` in order."""

    events: list[tuple[str | None, str]]


@dataclass(frozen=True)
class WithHeaders:
    """A handler's JSON answer sent with extra response headers (``Retry-After``, say)."""

    payload: Any
    headers: dict[str, str]


@dataclass(frozen=True)
class Unsized:
    """A handler's JSON answer sent without a Content-Length: the end of the connection ends it."""

    payload: Any


@dataclass(frozen=True)
class Streamed:
    """A handler's answer sent as ``chunks`` (bytes, as they are) under ``headers``, without a
    length, until they end or the client goes: how much was sent is recorded."""

    headers: dict[str, str]
    chunks: Iterable[bytes]


@dataclass(frozen=True)
class Followed:
    """A handler's JSON answer followed, in the same write, by ``extra``: a second whole HTTP/1.1
    response nobody asked for yet, as an upstream or a proxy out of step with it sends one. The
    connection stays open, its next request answered as any other."""

    payload: Any
    extra: Any


def _http11(status: int, payload: Any) -> bytes:
    data = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    return head.encode() + data


@dataclass
class LocalServer:
    url: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    #: bytes of each Streamed answer sent before it ended or the client went
    sent: list[int] = field(default_factory=list)


class _ClientsMayGo(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went before its answer (a call cancelled, as a failed batch cancels its
        others) is no error of the server's; anything else is printed, as http.server does."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def json_server(handle: Handler) -> Iterator[LocalServer]:
    """Serve POSTed JSON: ``handle(path, body) -> (status, json)``."""
    record = LocalServer(url="")

    class _H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            record.requests.append((self.path, body))
            record.headers.append({k.lower(): v for k, v in self.headers.items()})
            status, payload = handle(self.path, body)
            if isinstance(payload, Sse):
                # One write and flush per event, as a model streaming tokens does; the end of the
                # connection ends the stream.
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in payload.events:
                    self.wfile.write(((f"event: {event}\n" if event else "") + f"data: {data}\n\n").encode())
                    self.wfile.flush()
                self.close_connection = True
                return
            if isinstance(payload, Streamed):
                self.send_response(status)
                for name, value in {**payload.headers, "Connection": "close"}.items():
                    self.send_header(name, value)
                self.end_headers()
                sent = 0
                try:
                    for chunk in payload.chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                record.sent.append(sent)
                self.close_connection = True
                return
            if isinstance(payload, Followed):
                # One write: the client reads both at once, the second left past the first's end.
                self.wfile.write(_http11(status, payload.payload) + _http11(200, payload.extra))
                self.close_connection = False
                return
            if isinstance(payload, Unsized):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(json.dumps(payload.payload).encode())
                self.close_connection = True
                return
            extra = payload.headers if isinstance(payload, WithHeaders) else {}
            data = json.dumps(payload.payload if isinstance(payload, WithHeaders) else payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = _ClientsMayGo(("127.0.0.1", 0), _H)
    record.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()


def tei_rerank(score: Callable[[str, str], float], max_batch: int = 32) -> Handler:
    """TEI's POST /rerank: {query, texts, raw_scores, truncate} -> [{index, score}] sorted by score."""

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path != "/rerank":
            return 404, {"error": "not found"}
        texts = body.get("texts") or []
        if len(texts) > max_batch:
            return 413, {"error": f"batch size {len(texts)} > maximum allowed batch size {max_batch}", "error_type": "Validation"}
        ranked = sorted(({"index": i, "score": score(body["query"], t)} for i, t in enumerate(texts)), key=lambda r: -r["score"])
        return 200, ranked

    return handle


def word_overlap(query: str, text: str) -> float:
    q = {w.strip(".,?!").lower() for w in query.split()}
    t = {w.strip(".,?!").lower() for w in text.split()}
    return len(q & t) / max(1, len(q))


class _QuietServer(ThreadingHTTPServer):
    allow_reuse_address = True  # a restart binds the same port again

    def handle_error(self, request: object, client_address: object) -> None:
        """A thawed handler whose client already gave up writes into a closed socket: expected."""


class ControlledServer:
    """A JSON server that a fault-injection test stops, restarts (same port), freezes and thaws.

    Frozen, it accepts connections and reads requests but answers none until thawed, as a hung
    process would.
    """

    def __init__(self, handle: Handler) -> None:
        self._handle = handle
        self._running = threading.Event()  # cleared while frozen
        self._running.set()
        self.record = LocalServer(url="")
        self._server: ThreadingHTTPServer | None = None
        self._port = 0

    def start(self) -> None:
        record, handle, running = self.record, self._handle, self._running

        class _H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                record.requests.append((self.path, body))
                running.wait()
                status, payload = handle(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = _QuietServer(("127.0.0.1", self._port), _H)
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        self.record.url = f"http://127.0.0.1:{self._port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._running.set()  # let frozen handlers finish so shutdown does not wait on them
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def freeze(self) -> None:
        self._running.clear()

    def thaw(self) -> None:
        self._running.set()


@contextmanager
def get_json_server(body: Callable[[], Any], tls: tuple[Path, Path] | None = None, port: int = 0) -> Iterator[LocalServer]:
    """Answer every GET with ``body()`` as JSON (a JWKS endpoint, say), or as it is when it is
    bytes (JSON no encoder would write); count the requests. ``tls``: a certificate and key for
    ``localhost``, served over https (a server whose certificate a private CA signed). ``port``:
    that of one stopped before (an identity provider back up), else any free one."""
    record = LocalServer(url="")

    class _H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            record.requests.append((self.path, {}))
            answer = body()
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), _H)  # SO_REUSEADDR (HTTPServer's): a port just closed binds again
    record.url = f"http://127.0.0.1:{server.server_address[1]}"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        record.url = f"https://localhost:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()
