"""/metrics over HTTP and HTTPS: a client that connects and says nothing holds up neither the
scrapes nor the server's shutdown, with or without TLS, and mutual TLS refuses a client without
a certificate."""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.request
from pathlib import Path

import pytest

from retrieval_server.observability.metrics import ServiceMetrics
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
