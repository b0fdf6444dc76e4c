"""`python -m retrieval_server.healthcheck [HOST:PORT] [--timeout SECONDS]`: exit 0 when
grpc.health.v1 says SERVING.

For container health checks (Dockerfile HEALTHCHECK, compose). Without an address it asks the
server where RETRIEVAL_HOST binds it (loopback when it listens on every interface), on
RETRIEVAL_HEALTH_PORT when set (plaintext, also when the main port needs TLS), else on
RETRIEVAL_PORT. The deadline (4 s) fits inside the image's HEALTHCHECK timeout of 5 s;
a probe with a longer timeout of its own can pass a longer one.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from retrieval_server.config import ConfigError, load_settings


DEFAULT_TIMEOUT_S = 4.0


def check(target: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            print(f"{target}: {exc.code().name}", file=sys.stderr)  # type: ignore[attr-defined]
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def probe_host(listen: str) -> str:
    """Where a probe inside the container reaches a server listening on ``listen``: loopback when it
    listens on every interface, else that address (a server bound to one does not answer on 127.0.0.1)."""
    if listen in ("0.0.0.0", "::", "[::]", ""):
        return "127.0.0.1"
    return f"[{listen}]" if ":" in listen and not listen.startswith("[") else listen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval_server.healthcheck", description="exit 0 when the server says SERVING")
    parser.add_argument("target", nargs="?", help="HOST:PORT (default: RETRIEVAL_HOST, or loopback for every interface, on RETRIEVAL_HEALTH_PORT, else RETRIEVAL_PORT)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for the answer (default %(default)s)")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be > 0 seconds")
    target = args.target
    if target is None:
        try:
            s = load_settings()
        except ConfigError as exc:
            # As the server reports it (cli.main): one message naming the variable, not a traceback.
            print(exc, file=sys.stderr)
            return 2
        target = f"{probe_host(s.host)}:{s.health_port or s.port}"
    return 0 if check(target, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
