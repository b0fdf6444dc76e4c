"""``/metrics`` over HTTP or HTTPS: prometheus-client's WSGI app, one thread per connection, a few
connections at once, each with its TLS handshake, request and response bounded in time.

prometheus-client's own server wraps its listening socket in TLS, so every handshake ran in its
accept loop: one client that connected and sent nothing stalled every scrape, and the server's
shutdown with them (a SIGTERM waited until that client left). And each idle connection, over
plain HTTP too, kept a thread waiting for its request for ever; with a timeout on each read, so
did a client sending a byte every few seconds, and as many threads as clients.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder

from retrieval_server.config import refuse_passphrase
from retrieval_server.file_stamps import file_stamps
from retrieval_server.identifiers import cut_utf8
from retrieval_server.observability.log_limit import LogLimit

log = logging.getLogger(__name__)

#: seconds a connection may take in all: its handshake, its request and the response
CONNECTION_TIMEOUT_S = 10.0
#: connections served at once; one more is closed as it is accepted (a scrape needs one)
MAX_CONNECTIONS = 16


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Scrapes are not logged: every few seconds, from every Prometheus."""


#: bytes of an unreadable Accept header a log line repeats (a client's text)
MAX_LOGGED_ACCEPT_BYTES = 256


def _readable_accept(app: WSGIApplication, log_limit: LogLimit) -> WSGIApplication:
    """``app`` answering a scrape whose Accept header prometheus-client cannot read in the plain
    text format, as prometheus-client answers any media type it does not know. Its encoder choice
    raised on ``version=abc``: HTTP 500, and wsgiref's traceback on stderr among the JSON log lines.
    Its warning is written at most once per ``log_limit.every_s``: /metrics asks no credentials,
    and one client sending the header on every scrape made 13,581 lines in 10 s."""
    lock = threading.Lock()  # each connection has its thread: two scrapes at once could both log

    def readable(environ: WSGIEnvironment, start_response: StartResponse) -> Any:
        accept = environ.get("HTTP_ACCEPT")
        if accept:
            try:
                choose_encoder(accept)
            except Exception:
                with lock:
                    logged = log_limit.due("unreadable accept")
                if logged:
                    log.warning("a scrape's Accept header is unreadable; answered in the plain text format (logged at most once "
                                "every %g s)", log_limit.every_s, extra={"accept": cut_utf8(accept, MAX_LOGGED_ACCEPT_BYTES)})
                environ = {k: v for k, v in environ.items() if k != "HTTP_ACCEPT"}
        return app(environ, start_response)

    return readable


class TlsFiles:
    """The TLS context of a certificate, its key and a client CA as the files are now: read again
    when one changed (a rotation in place), as the gRPC port's are; while a rotation is half done
    (a file replaced, not yet its partner), the last context serves."""

    def __init__(self, certfile: str, keyfile: str, client_cafile: str | None, client_auth_required: bool) -> None:
        self._paths = [Path(p) for p in (certfile, keyfile, client_cafile) if p is not None]
        self._args = (certfile, keyfile, client_cafile, client_auth_required)
        self._lock = threading.Lock()  # handshakes run on the connections' threads
        self._stamp = file_stamps(self._paths)
        self._context = _tls_context(*self._args)

    def context(self) -> ssl.SSLContext:
        with self._lock:
            try:
                stamp = file_stamps(self._paths)
                if stamp != self._stamp:
                    self._context, self._stamp = _tls_context(*self._args), stamp
                    log.info("certificate files changed: /metrics serves the new certificate", extra={"cert": self._args[0]})
            except (OSError, ssl.SSLError, ValueError):
                log.warning("certificate files unreadable; /metrics keeps the current certificate", exc_info=True)
            return self._context


class _Deadline:
    """A connection's socket whose every handshake step, read and write waits only for what is
    left of the connection's time: a timeout per operation let a peer sending a byte every few
    seconds hold its thread for ever."""

    deadline = float("inf")
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def _time_left(self) -> None:
        left = self.deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the connection's time is up")
        self.settimeout(left)  # type: ignore[attr-defined]

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self._time_left()
        return super().recv_into(*args, **kwargs)  # type: ignore[misc]

    def send(self, *args: Any, **kwargs: Any) -> int:
        self._time_left()
        return super().send(*args, **kwargs)  # type: ignore[misc]

    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self._time_left()
        super().sendall(*args, **kwargs)  # type: ignore[misc]


class _TimedSocket(_Deadline, socket.socket):
    pass


class _TimedSslSocket(_Deadline, ssl.SSLSocket):
    def do_handshake(self, *args: Any, **kwargs: Any) -> None:
        self._time_left()
        super().do_handshake(*args, **kwargs)


class _BoundedServer(ThreadingWSGIServer):
    """Accepts at once; serves at most :data:`MAX_CONNECTIONS` connections, each in its own
    thread and within :data:`CONNECTION_TIMEOUT_S` of its accept, handshake included."""

    tls: TlsFiles | None = None
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = self.socket.accept()
        timed = _TimedSocket(conn.family, conn.type, conn.proto, fileno=conn.detach())
        timed.clock = self.clock
        timed.deadline = self.clock() + CONNECTION_TIMEOUT_S
        return timed, address

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # a thread each would let clients take the process's memory
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started to release it
            raise

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The slot is free before the connection closes: a client that saw it close may connect again.
        try:
            self._finish(request, client_address)
        finally:
            self._slots.release()

    def _finish(self, request: _TimedSocket, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        deadline = request.deadline
        secured = self.tls.context().wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            secured.clock, secured.deadline = self.clock, deadline
            try:
                secured.do_handshake()
            except OSError:
                return  # no handshake in time, or a failed one: nothing to answer
            super().finish_request(secured, client_address)
        finally:
            secured.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # out of time, or the peer left: nothing to answer, and not worth a traceback
        super().handle_error(request, client_address)


def _tls_context(certfile: str, keyfile: str, client_cafile: str | None, client_auth_required: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sslsocket_class = _TimedSslSocket
    context.load_cert_chain(certfile=certfile, keyfile=keyfile, password=refuse_passphrase)
    if client_cafile is not None:
        context.load_verify_locations(cafile=client_cafile)
    if client_auth_required:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def serve_metrics(
    registry: CollectorRegistry, host: str, port: int, *, certfile: str | None = None, keyfile: str | None = None,
    client_cafile: str | None = None, client_auth_required: bool = False,
) -> WSGIServer:
    """Serve ``registry`` on ``host``:``port`` (0 picks a free one) in a daemon thread; HTTPS
    with ``certfile`` and ``keyfile``, requiring client certificates with ``client_auth_required``.
    ``shutdown()`` then ``server_close()`` stop it."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("MetricsServer", (_BoundedServer,), {"address_family": family})
    # The server's own: its app, which logs through it, lives as long as the server does.
    httpd = make_server(host, port, _readable_accept(make_wsgi_app(registry), LogLimit()), server_class, handler_class=_QuietHandler)
    if certfile and keyfile:
        httpd.tls = TlsFiles(certfile, keyfile, client_cafile, client_auth_required)  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, name="metrics-http", daemon=True).start()
    return httpd
