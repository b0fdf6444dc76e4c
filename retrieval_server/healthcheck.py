"""`python -m retrieval_server.healthcheck [HOST:PORT] [--timeout SECONDS]`: exit 0 when
grpc.health.v1 says SERVING.

For container health checks (Dockerfile HEALTHCHECK, compose). Without an address it asks the
server where RETRIEVAL_HOST binds it (loopback when it listens on every interface), on
RETRIEVAL_HEALTH_PORT when set (plaintext, also when the main port needs TLS), else on
RETRIEVAL_PORT: over TLS when the server serves it, trusting the certificate chain it serves
(RETRIEVAL_TLS_CERT) for the first name that certificate gives; a main port that requires client
certificates needs RETRIEVAL_HEALTH_PORT. The deadline (4 s) fits inside the image's HEALTHCHECK
timeout of 5 s; a probe with a longer timeout of its own can pass a longer one.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from retrieval_server.cli import seconds
from retrieval_server.config import ConfigError, load_settings


DEFAULT_TIMEOUT_S = 4.0


@dataclass(frozen=True, slots=True)
class ServedTls:
    """How a probe beside the server reaches its TLS port: the chain it serves, trusted as it is
    (the probe asks the server about itself), and a name that chain's certificate is for."""

    chain: bytes
    #: None: the certificate names nothing, and the target's host is checked
    name: str | None

    @classmethod
    def of(cls, cert_file: Path) -> ServedTls:
        from cryptography import x509

        chain = cert_file.read_bytes()
        leaf = x509.load_pem_x509_certificate(chain)
        try:
            names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            name = next(iter(names.get_values_for_type(x509.DNSName)), None) or str(next(iter(names.get_values_for_type(x509.IPAddress))))
        except (x509.ExtensionNotFound, StopIteration):
            common = leaf.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
            name = str(common[0].value) if common else None
        return cls(chain, name)

    def channel(self, target: str) -> grpc.Channel:
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=self.chain),
                                   options=[("grpc.ssl_target_name_override", self.name)] if self.name else [])


def check(target: str, timeout_s: float = DEFAULT_TIMEOUT_S, tls: ServedTls | None = None) -> bool:
    with tls.channel(target) if tls else grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            print(f"{target}: {exc.code().name}", file=sys.stderr)  # type: ignore[attr-defined]
            return False
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        # The container's health log holds what the probe wrote: a failing check said nothing.
        print(f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}", file=sys.stderr)
        return False
    return True


def probe_host(listen: str) -> str:
    """Where a probe inside the container reaches a server listening on ``listen``: loopback when it
    listens on every interface, else that address (a server bound to one does not answer on 127.0.0.1)."""
    if listen in ("0.0.0.0", "::", "[::]", ""):
        return "127.0.0.1"
    return f"[{listen}]" if ":" in listen and not listen.startswith("[") else listen


#: the probe's exit status for anything but SERVING. Never 2, which Docker's HEALTHCHECK reserves
#: ("do not use this exit code"): invalid settings and usage errors exited 2, argparse's and the
#: CLI's convention, and the container's health was whatever the engine made of a reserved code.
UNHEALTHY = 1


class _ProbeParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(UNHEALTHY, f"{self.prog}: error: {message}\n")


def main(argv: list[str]) -> int:
    parser = _ProbeParser(prog="python -m retrieval_server.healthcheck", description="exit 0 when the server says SERVING")
    parser.add_argument("target", nargs="?", help="HOST:PORT (default: RETRIEVAL_HOST, or loopback for every interface, on RETRIEVAL_HEALTH_PORT, else RETRIEVAL_PORT)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S, help="seconds to wait for the answer (default %(default)s)")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be > 0 seconds")
    target, tls = args.target, None
    if target is None:
        try:
            s = load_settings()
        except ConfigError as exc:
            # As the server reports it (cli.main): one message naming the variable, not a traceback.
            print(exc, file=sys.stderr)
            return UNHEALTHY
        target = f"{probe_host(s.host)}:{s.health_port or s.port}"
        if s.health_port is None and s.tls_cert is not None:
            if s.tls_client_ca is not None:
                print("the main port requires client certificates (mutual TLS): set RETRIEVAL_HEALTH_PORT, which the probe asks in plaintext",
                      file=sys.stderr)
                return UNHEALTHY
            tls = ServedTls.of(s.tls_cert)
    return 0 if check(target, args.timeout, tls) else UNHEALTHY


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
