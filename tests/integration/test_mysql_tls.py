"""TLS to MySQL/MariaDB (``?ssl_ca=`` in RETRIEVAL_MYSQL_DSN), and a DSN's query parameters it does not know."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore, parse_dsn
from retrieval_server.config import ConfigError, load_settings
from retrieval_server.domain import Unavailable
from tests.support.mariadb import mariadb_server
from tests.support.pki import Authority


def test_a_query_parameter_the_dsn_does_not_know_is_refused_by_name() -> None:
    """?ssl=true was dropped without a word, and the password crossed the network in plaintext."""
    dsn = "mysql://retrieval:s3cret@db:3306/retrieval?ssl=true&sslmode=require"
    with pytest.raises(ValueError, match="mysql_dsn has query parameters it does not know: ssl, sslmode") as raised:
        parse_dsn(dsn)
    with pytest.raises(ConfigError, match="RETRIEVAL_MYSQL_DSN has query parameters it does not know: ssl, sslmode") as refused:
        load_settings(mysql_dsn=dsn)
    assert "s3cret" not in str(raised.value) + str(refused.value)
    assert "ssl" not in parse_dsn("mysql://retrieval:s3cret@db:3306/retrieval")


def test_ssl_ca_is_checked_at_start_up(tmp_path: Path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate")
    for ca, problem in ((not_pem, "cannot be read as a PEM CA bundle"), (tmp_path / "missing.pem", "No such file"), ("", "is empty")):
        with pytest.raises(ConfigError, match=f"RETRIEVAL_MYSQL_DSN's ssl_ca.*{problem}"):
            load_settings(mysql_dsn=f"mysql://u:p@db/retrieval?ssl_ca={ca}")
    ca = Authority(tmp_path, "db").ca
    assert load_settings(mysql_dsn=f"mysql://u:p@db/retrieval?ssl_ca={ca}").mysql_dsn


def test_ssl_ca_is_a_path_read_with_plus_signs_and_percent_escapes(tmp_path: Path) -> None:
    """Read as a form, ssl_ca's '+' was a space: a CA bundle in "ca+dir" was not found."""
    ca = Authority(tmp_path / "ca+dir", "db").ca
    assert "ssl" in parse_dsn(f"mysql://u:p@db/retrieval?ssl_ca={ca}")
    odd = tmp_path / "a&b#c%d+e"
    odd.mkdir()
    (odd / "ca.pem").write_bytes(ca.read_bytes())
    assert "ssl" in parse_dsn(f"mysql://u:p@db/retrieval?ssl_ca={quote(str(odd / 'ca.pem'))}")


@pytest.mark.mariadb
async def test_ssl_ca_connects_over_tls_verified_with_that_ca(tmp_path: Path) -> None:
    ca = Authority(tmp_path / "pki", "db")
    pair = ca.issue("mariadb", ips=("127.0.0.1",))
    with mariadb_server(tmp_path / "mariadb", options=[f"--ssl-cert={pair.cert}", f"--ssl-key={pair.key}"]) as dsn:
        store = MysqlMetadataStore(f"{dsn}?ssl_ca={ca.ca}", pool_size=2)
        await store.open()
        try:
            async with store.snapshot() as tx:
                [(_, cipher)] = await tx.fetchall("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cipher, "the session is not encrypted"
        finally:
            await store.close()
        # A server whose certificate another CA signed is refused, not talked to.
        stranger = MysqlMetadataStore(f"{dsn}?ssl_ca={Authority(tmp_path / 'other', 'other').ca}", pool_size=1)
        with pytest.raises(Unavailable, match="certificate verify failed"):
            await stranger.open()
        await stranger.close()
