"""The README's Authentication examples run as written: a token from the one-liner, calls with it,
and the same over mutual TLS, against `retrieval-server serve` processes in those modes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.server_process import free_port, wait_healthy
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient, Tls
from retrieval_server.domain import Access
from tests.e2e.test_authentication import CORPUS
from tests.support.paths import REPO, inherited_env
from tests.support.pki import Authority
from tests.support.tokens import claims, hs256

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "retrieval_server.cli"]


def _example(name: str) -> str:
    readme = (REPO / "README.md").read_text()
    m = re.search(rf"<!-- auth-example: {name} -->\n```bash\n(.*?)```", readme, re.S)
    assert m, f"README has no auth example '{name}'"
    return m.group(1)


def _env(**extra: str) -> dict[str, str]:
    env = inherited_env()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # retrieval-server and python of this venv
    env.update(RETRIEVAL_LOG_FORMAT="json", RETRIEVAL_METRICS_PORT="0", **extra)
    return env


def _bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_jwt_and_tls_examples_run_as_written(tmp_path: Path) -> None:
    jwt_block, tls_block = _example("jwt"), _example("tls")
    # The example's first statement sets the server's settings: run it, and start the server with them.
    first, _, rest = jwt_block.partition("\n# (start `retrieval-server serve` with these settings)\n")
    exported = _bash(f"{first}\nenv", _env(), tmp_path).stdout
    base = _env()
    settings = dict(line.split("=", 1) for line in exported.splitlines() if line.startswith("RETRIEVAL_") and line.split("=", 1)[0] not in base)
    assert settings["RETRIEVAL_AUTH_MODE"] == "jwt" and len(settings["RETRIEVAL_JWT_SECRET"]) == 64

    pki = Authority(tmp_path / "pki", "readme-ca")
    server_cert = pki.issue("server", dns=("localhost",), ips=("127.0.0.1",))
    client = pki.issue("client", client=True)
    for name, path in (("ca.pem", pki.ca), ("client.pem", client.cert), ("client-key.pem", client.key)):
        (tmp_path / name).write_bytes(path.read_bytes())
    port, tls_port = free_port(), free_port()
    servers = [
        subprocess.Popen([*CLI, "serve"], env=_env(**settings, RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PORT=str(port),
                                                   RETRIEVAL_DATA_DIR=str(tmp_path / "plain")), stderr=subprocess.DEVNULL),
        subprocess.Popen([*CLI, "serve"], env=_env(**settings, RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PORT=str(tls_port),
                                                   RETRIEVAL_DATA_DIR=str(tmp_path / "tls"), RETRIEVAL_TLS_CERT=str(server_cert.cert),
                                                   RETRIEVAL_TLS_KEY=str(server_cert.key), RETRIEVAL_TLS_CLIENT_CA=str(pki.ca)),
                         stderr=subprocess.DEVNULL),
    ]
    try:
        admin = hs256(claims("ops", "ADMIN", iss=settings["RETRIEVAL_JWT_ISSUER"], aud=settings["RETRIEVAL_JWT_AUDIENCE"]),
                      secret=settings["RETRIEVAL_JWT_SECRET"])
        wait_healthy(f"127.0.0.1:{port}", servers[0], timeout_s=300)
        docs = [pb.DocumentInput(document_id=d.document_id, filename=d.filename, content=d.content,
                                 access=pb.ACCESS_PRIVATE if d.access is Access.PRIVATE else pb.ACCESS_PUBLIC,
                                 owner_id=d.owner_id, granted_user_ids=list(d.granted_user_ids)) for d in CORPUS]
        with RetrievalClient(f"127.0.0.1:{port}", token=admin) as c:
            assert not c.ingest(docs).errors
        run = _bash(f"{first}\nexport RETRIEVAL_JWT_SECRET={settings['RETRIEVAL_JWT_SECRET']}\n{rest}",
                    _env(RETRIEVAL_SERVER=f"127.0.0.1:{port}"), tmp_path)
        assert run.returncode == 0, run.stderr
        assert "alice-review" in run.stdout and "bob-review" not in run.stdout and '"status": "SERVING_STATUS_SERVING"' in run.stdout

        wait_healthy(f"127.0.0.1:{tls_port}", servers[1], timeout_s=300, tls=Tls(ca=pki.ca, cert=client.cert, key=client.key))
        with RetrievalClient(f"localhost:{tls_port}", token=admin, tls=Tls(ca=pki.ca, cert=client.cert, key=client.key)) as c:
            assert not c.ingest(docs).errors
        token = hs256(claims("alice", "USER", iss=settings["RETRIEVAL_JWT_ISSUER"], aud=settings["RETRIEVAL_JWT_AUDIENCE"]),
                      secret=settings["RETRIEVAL_JWT_SECRET"])
        run = _bash(tls_block.replace("localhost:50051", f"localhost:{tls_port}"), _env(TOKEN=token), tmp_path)
        assert run.returncode == 0, run.stderr
        assert "alice-review" in run.stdout and "bob-review" not in run.stdout
    finally:
        for s in servers:
            s.terminate()
            s.wait(timeout=120)
