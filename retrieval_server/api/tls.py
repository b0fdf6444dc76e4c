"""TLS and mutual TLS on the gRPC port, with certificates re-read when their files change.

grpc's dynamic server credentials ask :class:`CertificateFiles` for the configuration at each new
handshake; it answers None while the files are unchanged (a stat per handshake) and the new
key, chain and client CA once they change, so a rotated certificate is served without a restart.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import grpc

from retrieval_server.config import Settings, certificate_pair_problem
from retrieval_server.file_stamps import file_stamps

log = logging.getLogger(__name__)


class CertificateFiles:
    def __init__(self, cert: Path, key: Path, client_ca: Path | None) -> None:
        self._paths = tuple(p for p in (cert, key, client_ca) if p is not None)
        self._cert, self._key, self._ca = cert, key, client_ca
        self._lock = threading.Lock()  # handshakes may run on several threads
        self._stamp = file_stamps(self._paths)
        #: the stamps of files that were no pair, said once: every handshake asks
        self._refused: tuple[tuple[int, int], ...] | None = None
        self.initial = self._read()

    def _read(self) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(self._key.read_bytes(), self._cert.read_bytes())],
            root_certificates=self._ca.read_bytes() if self._ca else None,
        )

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        """grpc's fetcher: a new configuration when the files changed, None to keep the current one."""
        with self._lock:
            try:
                stamp = file_stamps(self._paths)
                if stamp in (self._stamp, self._refused):
                    return None
                # grpc takes a key of another certificate without a word and keeps serving the old
                # pair: a certificate copied before its key was logged as served.
                if problem := certificate_pair_problem(self._cert, self._key):
                    self._refused = stamp
                    log.warning("certificate files changed but %s and %s are not a certificate and its key (%s); keeping the current certificate",
                                self._cert, self._key, problem)
                    return None
                config = self._read()
            except OSError:
                # Mid-rotation (a file replaced, not yet its partner): keep serving the current one.
                log.warning("certificate files unreadable; keeping the current certificate", exc_info=True)
                return None
            self._stamp = stamp
            log.info("certificate files changed: serving the new certificate", extra={"cert": str(self._cert)})
            return config


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials for the port (mutual TLS with a client CA), or None for plaintext."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    files = CertificateFiles(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
    return grpc.dynamic_ssl_server_credentials(files.initial, files, require_client_authentication=settings.tls_client_ca is not None)
