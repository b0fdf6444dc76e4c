"""RETRIEVAL_QDRANT_CA: a Qdrant server certified by a private CA (a cluster's), reached over https."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore
from retrieval_server.config import ConfigError, load_settings
from retrieval_server.domain import Unavailable
from tests.support.http_servers import get_json_server
from tests.support.pki import Authority


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
    # A stand-in Qdrant that knows no collection.
    with get_json_server(lambda: {"result": {"exists": False}, "status": "ok", "time": 0}, tls=(pair.cert, pair.key)) as qdrant:
        url = qdrant.url
        with pytest.raises(Unavailable, match="Qdrant is unreachable: .*certificate verify failed.*name that CA in RETRIEVAL_QDRANT_CA"):
            await _open(url, None)
        assert qdrant.requests == []
        with pytest.raises(Unavailable, match="the Qdrant collection chunks does not exist"):
            await _open(url, ca.ca)
        assert [path for path, _ in qdrant.requests] == ["/collections/chunks/exists"]
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
