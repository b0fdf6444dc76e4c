"""`python -m retrieval_server.healthcheck [HOST:PORT]`: exit 0 when grpc.health.v1 says SERVING.

For container health checks (Dockerfile HEALTHCHECK, compose). Without an address it asks
localhost on RETRIEVAL_HEALTH_PORT when set (plaintext, also when the main port needs TLS),
else on RETRIEVAL_PORT.
"""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from retrieval_server.config import load_settings


def check(target: str, timeout_s: float = 4.0) -> bool:
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            print(f"{target}: {exc.code().name}", file=sys.stderr)  # type: ignore[attr-defined]
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: list[str]) -> int:
    if argv:
        target = argv[0]
    else:
        s = load_settings()
        target = f"127.0.0.1:{s.health_port or s.port}"
    return 0 if check(target) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
