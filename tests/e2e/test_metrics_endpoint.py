"""/metrics over HTTP and HTTPS: a client that connects and says nothing holds up neither the
scrapes nor the server's shutdown, with or without TLS; mutual TLS refuses a client without a
certificate; connections are few at once, and each has its time in all."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import time
import urllib.request
from pathlib import Path

import pytest

from retrieval.v1 import retrieval_pb2
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.observability.logging import configure
from retrieval_server.observability.metrics import ServiceMetrics
from retrieval_server.observability.metrics_http import CONNECTION_TIMEOUT_S, MAX_CONNECTIONS, _readable_accept, serve_metrics
from tests.support.pki import Authority


def _scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=60, context=context) as resp:
        return resp.read().decode()


@pytest.mark.parametrize("tls", [False, True])
async def test_an_idle_client_holds_up_neither_scrapes_nor_shutdown(tmp_path: Path, tls: bool) -> None:
    """prometheus-client's own server made each TLS handshake in its accept loop: a client that
    connected and sent nothing stalled every scrape, and shutdown waited for it (a SIGTERM did)."""
    ca = Authority(tmp_path / "pki", "metrics-ca")
    served = ca.issue("localhost", dns=("localhost",), ips=("127.0.0.1",))
    metrics = ServiceMetrics()
    options = {"certfile": str(served.cert), "keyfile": str(served.key)} if tls else {}
    port = metrics.serve("127.0.0.1", 0, **options)
    context = ssl.create_default_context(cafile=str(ca.ca)) if tls else None
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        page = await asyncio.to_thread(_scrape, f"{'https' if tls else 'http'}://127.0.0.1:{port}/metrics", context)
        assert "retrieval_query_cache" in page
        await asyncio.wait_for(asyncio.to_thread(metrics.close), 60)  # returned, with the idle client still there
    finally:
        idle.close()


async def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path: Path) -> None:
    ca = Authority(tmp_path / "pki", "metrics-ca")
    served = ca.issue("localhost", dns=("localhost",), ips=("127.0.0.1",))
    client = ca.issue("prometheus", client=True)
    metrics = ServiceMetrics()
    port = metrics.serve("127.0.0.1", 0, certfile=str(served.cert), keyfile=str(served.key), client_cafile=str(ca.ca), client_auth_required=True)
    try:
        anonymous = ssl.create_default_context(cafile=str(ca.ca))
        with pytest.raises(OSError):  # the handshake fails: TLS alert, or the connection closed
            await asyncio.to_thread(_scrape, f"https://127.0.0.1:{port}/metrics", anonymous)
        known = ssl.create_default_context(cafile=str(ca.ca))
        known.load_cert_chain(str(client.cert), str(client.key))
        assert "retrieval_query_cache" in await asyncio.to_thread(_scrape, f"https://127.0.0.1:{port}/metrics", known)
    finally:
        await asyncio.to_thread(metrics.close)


def _answer(conn: socket.socket) -> bytes:
    """What the server answers a scrape on ``conn``: b"" when it closed the connection instead."""
    conn.settimeout(60)
    data = b""
    try:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        while chunk := conn.recv(65536):
            data += chunk
    except (BrokenPipeError, ConnectionResetError):
        return b""
    return data


def test_connections_past_the_cap_are_closed_at_once() -> None:
    """Without a cap, 400 connections held 277 threads in the serving process."""
    httpd = serve_metrics(ServiceMetrics().registry, "127.0.0.1", 0)
    address = ("127.0.0.1", httpd.server_port)
    held = [socket.create_connection(address) for _ in range(MAX_CONNECTIONS)]
    try:
        # Accepted in order: the held ones have every slot when the next one comes.
        with socket.create_connection(address) as extra:
            assert _answer(extra) == b""
        assert _answer(held[0]).startswith(b"HTTP/1.0 200")  # a held one is served
        # Its slot was given back before it was closed: a new connection has it.
        with socket.create_connection(address) as again:
            assert _answer(again).startswith(b"HTTP/1.0 200")
    finally:
        for conn in held:
            conn.close()
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("tls", [False, True])
def test_a_connection_gets_its_time_in_all_not_per_read(tmp_path: Path, tls: bool) -> None:
    """A timeout on each read let a client sending a byte every 5 s hold its thread for ever. Here
    the clock reads the connection's whole time gone by its first read (or handshake): it is
    closed unanswered, as a trickling client would be."""
    ca = Authority(tmp_path / "pki", "metrics-ca")
    served = ca.issue("localhost", dns=("localhost",), ips=("127.0.0.1",))
    options = {"certfile": str(served.cert), "keyfile": str(served.key)} if tls else {}
    httpd = serve_metrics(ServiceMetrics().registry, "127.0.0.1", 0, **options)
    readings = iter([0.0])  # the accept's; every later reading is at the deadline
    httpd.clock = lambda: next(readings, CONNECTION_TIMEOUT_S)  # type: ignore[attr-defined]
    url = f"{'https' if tls else 'http'}://127.0.0.1:{httpd.server_port}/metrics"
    context = ssl.create_default_context(cafile=str(ca.ca)) if tls else None
    try:
        if tls:
            with pytest.raises(OSError):  # the handshake is refused
                _scrape(url, context)
        else:
            with socket.create_connection(("127.0.0.1", httpd.server_port)) as conn:
                assert _answer(conn) == b""
        httpd.clock = time.monotonic  # type: ignore[attr-defined]
        assert "retrieval_query_cache" in _scrape(url, context)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_scrape_can_ask_for_series_by_name() -> None:
    """``?name[]=`` finds a collector by the names it described: the process and platform
    collectors describe none, and were never found."""
    metrics = ServiceMetrics()
    metrics.grpc.preregister([retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"]])
    metrics.ingested.inc(3)
    port = metrics.serve("127.0.0.1", 0)
    try:
        for name, line in (("retrieval_ingested_documents_total", "retrieval_ingested_documents_total 3.0"),
                           ("process_resident_memory_bytes", "process_resident_memory_bytes "),
                           ("python_info", "python_info{"),
                           ("retrieval_requests_total", 'retrieval_requests_total{code="OK",method="Query"} 0.0')):
            page = _scrape(f"http://127.0.0.1:{port}/metrics?name[]={name}")
            assert line in page, name
            assert "retrieval_query_cache" not in page
    finally:
        metrics.close()


def test_an_unreadable_accept_header_is_answered_in_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    """prometheus-client's encoder choice raised on the version: HTTP 500, and wsgiref wrote a
    traceback to stderr among the JSON log lines. Then each such scrape logged its line: one
    client made 13,581 in 10 s."""
    configure("INFO", "json")
    metrics = ServiceMetrics()
    port = metrics.serve("127.0.0.1", 0)
    try:
        for version in ("abc", "xyz"):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": f"application/openmetrics-text; version={version}"})
            with urllib.request.urlopen(request, timeout=60) as resp:
                assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                assert "retrieval_query_cache" in resp.read().decode()
    finally:
        metrics.close()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]  # every line JSON
    assert [line["accept"] for line in lines if "Accept header" in line["msg"]] == ["application/openmetrics-text; version=abc"]


def test_the_unreadable_accept_line_comes_again_once_its_interval_has_passed(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limit = LogLimit(every_s=60.0, clock=lambda: now[0])
    app = _readable_accept(lambda environ, start_response: [b""], limit)
    with caplog.at_level(logging.WARNING, logger="retrieval_server.observability.metrics_http"):
        for at in (0.0, 59.0, 60.0):
            now[0] = at
            app({"HTTP_ACCEPT": "application/openmetrics-text; version=abc"}, lambda *args: None)  # type: ignore[arg-type]
    assert len([r for r in caplog.records if "Accept header" in r.getMessage()]) == 2
