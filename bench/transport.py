"""How a benchmark reaches the server it starts: plaintext (the default), TLS, or mutual TLS.

With ``--tls-cert``/``--tls-key`` the server serves TLS with that certificate and the benchmark's
clients verify it with ``--tls-ca``; adding ``--tls-client-cert``/``--tls-client-key`` makes it
mutual TLS (the server then requires a certificate signed by ``--tls-ca``). The numbers then
include the cost of the encryption.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from retrieval_client import Tls


@dataclass(frozen=True, slots=True)
class Transport:
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate (PEM; the server's name: 127.0.0.1)")
        parser.add_argument("--tls-key", type=Path, help="the server certificate's key")
        parser.add_argument("--tls-ca", type=Path, help="CA that signed the server certificate (and the client's, for mutual TLS)")
        parser.add_argument("--tls-client-cert", type=Path, help="client certificate: mutual TLS")
        parser.add_argument("--tls-client-key", type=Path, help="the client certificate's key")

    @staticmethod
    def from_args(args: argparse.Namespace) -> Transport:
        t = Transport(args.tls_ca, args.tls_cert, args.tls_key, args.tls_client_cert, args.tls_client_key)
        if (t.cert is None) != (t.key is None) or (t.client_cert is None) != (t.client_key is None):
            raise SystemExit("--tls-cert needs --tls-key, --tls-client-cert needs --tls-client-key")
        if (t.cert or t.client_cert) and t.ca is None:
            raise SystemExit("TLS needs --tls-ca (the CA the clients verify the server with)")
        if t.client_cert and not t.cert:
            raise SystemExit("mutual TLS (--tls-client-cert) needs the server's --tls-cert and --tls-key")
        return t

    def server_settings(self) -> dict[str, str]:
        if self.cert is None or self.key is None:
            return {}
        out = {"RETRIEVAL_TLS_CERT": str(self.cert), "RETRIEVAL_TLS_KEY": str(self.key)}
        if self.client_cert is not None and self.ca is not None:
            out["RETRIEVAL_TLS_CLIENT_CA"] = str(self.ca)
        return out

    @property
    def name(self) -> str:
        """What the numbers include: ``plaintext``, ``TLS`` or ``mutual TLS``."""
        return "mutual TLS" if self.client_cert else "TLS" if self.cert else "plaintext"

    @property
    def tls(self) -> Tls | None:
        return Tls(ca=self.ca, cert=self.client_cert, key=self.client_key) if self.cert else None

    def channel(self, target: str, options: list[tuple[str, Any]] | None = None) -> grpc.aio.Channel:
        tls = self.tls
        if tls is None:
            return grpc.aio.insecure_channel(target, options=options)
        return grpc.aio.secure_channel(target, tls.credentials(), options=(options or []) + tls.options())


PLAINTEXT = Transport()
