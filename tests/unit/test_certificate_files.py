"""A rotated certificate is served only once its files are a certificate and its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_server.api.tls import CertificateFiles
from retrieval_server.observability.metrics_http import TlsFiles
from tests.support.pki import Authority


def test_a_certificate_replaced_before_its_key_is_not_served_until_the_key_follows(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """grpc took the new certificate with the old key without a word and kept serving the old pair,
    while the log said the new certificate was served."""
    ca = Authority(tmp_path / "ca", "ca")
    cert, key = tmp_path / "server.pem", tmp_path / "server-key.pem"
    ca.issue("server", dns=("localhost",), cert_path=cert, key_path=key)
    files = CertificateFiles(cert, key, None)
    new = ca.issue("server", dns=("localhost",), cert_path=tmp_path / "new.pem", key_path=tmp_path / "new-key.pem")
    cert.write_bytes(new.cert.read_bytes())  # copied first, as cp or a secret's update may
    with caplog.at_level("INFO"):
        assert files() is None
        assert files() is None  # asked at every handshake: said once
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert f"{cert} and {key} are not a certificate and its key" in warning.getMessage() and "keeping the current certificate" in warning.getMessage()
    assert "serving the new certificate" not in caplog.text
    key.write_bytes(new.key.read_bytes())
    assert files() is not None
    assert files() is None  # served; unchanged since


def test_a_rotated_key_with_a_passphrase_is_refused_not_asked_for(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """OpenSSL asked for the passphrase on the terminal, under the lock every handshake takes (with
    no terminal it failed as "[Errno 22] Invalid argument"); the gRPC port and /metrics keep the
    current pair and say why."""
    ca = Authority(tmp_path / "ca", "ca")
    cert, key = tmp_path / "server.pem", tmp_path / "server-key.pem"
    ca.issue("server", dns=("localhost",), cert_path=cert, key_path=key)
    grpc_files, metrics_files = CertificateFiles(cert, key, None), TlsFiles(str(cert), str(key), None, False)
    served = metrics_files.context()
    ca.issue("server", dns=("localhost",), cert_path=cert, key_path=key, passphrase=b"secret")
    with caplog.at_level("WARNING"):
        assert grpc_files() is None
        assert metrics_files.context() is served
    [on_grpc, on_metrics] = caplog.records
    assert "the private key is encrypted (has a passphrase)" in on_grpc.getMessage(), on_grpc.getMessage()
    assert on_metrics.exc_info and "the private key is encrypted (has a passphrase)" in str(on_metrics.exc_info[1]), caplog.text
