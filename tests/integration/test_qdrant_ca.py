"""RETRIEVAL_QDRANT_CA: a Qdrant server certified by a private CA (a cluster's), reached over https."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore
from retrieval_server.config import ConfigError, load_settings
from retrieval_server.domain import Unavailable
from tests.support.pki import Authority


@contextmanager
def https_qdrant(cert: Path, key: Path) -> Iterator[tuple[str, list[str]]]:
    """A stand-in Qdrant over TLS that knows no collection; yields its URL and the paths asked."""
    asked: list[str] = []

    class _H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            asked.append(self.path)
            body = json.dumps({"result": {"exists": False}, "status": "ok", "time": 0}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://localhost:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


async def _open(url: str, ca: Path | None) -> None:
    # Read-only, so that the stand-in's "no such collection" ends open() with an error of its own.
    store = QdrantVectorStore("chunks", 8, url=url, api_key="key", ca=ca, timeout_s=5, read_only=True)
    try:
        await store.open()
    finally:
        await store.close()


# Without the CA, qdrant-client's own version probe fails as the calls do, and warns so.
@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
async def test_a_private_ca_verifies_the_qdrant_server(tmp_path: Path) -> None:
    ca = Authority(tmp_path, "cluster")
    pair = ca.issue("qdrant", dns=("localhost",))
    with https_qdrant(pair.cert, pair.key) as (url, asked):
        with pytest.raises(Unavailable, match="Qdrant is unreachable: .*certificate verify failed.*name that CA in RETRIEVAL_QDRANT_CA"):
            await _open(url, None)
        assert asked == []
        with pytest.raises(Unavailable, match="the Qdrant collection chunks does not exist"):
            await _open(url, ca.ca)
        assert asked == ["/collections/chunks/exists"]
        # Only that CA: a server certified by another is refused.
        with pytest.raises(Unavailable, match="certificate verify failed"):
            await _open(url, Authority(tmp_path / "other", "other").ca)


def test_qdrant_ca_is_checked_at_start_up(tmp_path: Path) -> None:
    ca = Authority(tmp_path, "cluster").ca
    assert load_settings(qdrant_url="https://qdrant.svc:6333", qdrant_ca=ca).qdrant_ca == ca
    with pytest.raises(ConfigError, match="RETRIEVAL_QDRANT_CA needs an https:// RETRIEVAL_QDRANT_URL"):
        load_settings(qdrant_url="http://qdrant.svc:6333", qdrant_ca=ca)
    with pytest.raises(ConfigError, match="RETRIEVAL_QDRANT_CA needs an https:// RETRIEVAL_QDRANT_URL"):
        load_settings(qdrant_ca=ca)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate")
    with pytest.raises(ConfigError, match="RETRIEVAL_QDRANT_CA .* holds no PEM certificate"):
        load_settings(qdrant_url="https://qdrant.svc:6333", qdrant_ca=not_pem)
    with pytest.raises(ConfigError, match="RETRIEVAL_QDRANT_CA .* is not a file"):
        load_settings(qdrant_url="https://qdrant.svc:6333", qdrant_ca=tmp_path / "missing.pem")
