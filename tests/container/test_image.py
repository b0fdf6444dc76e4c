"""The Dockerfile builds and the image serves, with Debian's podman (runc) and a base image made by debootstrap.

No registry is reachable here, so the base image is built from Debian packages (python3 3.11,
venv, CA certificates) and passed as BASE_IMAGE. pip inside the build reaches PyPI with the
host's CA bundle, given as the build secret "pip_ca". Everything is built fresh and removed
afterwards. Several minutes: mostly debootstrap and pip downloading the wheels.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench.server_process import free_port
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from retrieval_server.healthcheck import check
from tests.support.paths import REPO, require_binary
from tests.support.tokens import AUDIENCE, SECRET, claims, hs256

pytestmark = [pytest.mark.slow, pytest.mark.container]
# runc, and limits the sandbox allows (podman's defaults raise RLIMIT_NPROC, which is refused here).
RUNTIME = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
PACKAGES = "python3,python3-venv,ca-certificates,passwd"


def _run(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _mirror_and_suite() -> tuple[str, str]:
    """The host's own Debian mirror and release, so the base image matches what apt reaches here."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    mirror = "http://deb.debian.org/debian"
    if sources.is_file():
        found = re.search(r"^URIs:\s*(\S+/debian)\s*$", sources.read_text(), re.M)
        mirror = found.group(1) if found else mirror
    codename = re.search(r"^VERSION_CODENAME=(\w+)", Path("/etc/os-release").read_text(), re.M)
    return mirror, codename.group(1) if codename else "bookworm"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    podman = require_binary("podman", "/usr/bin/podman")
    debootstrap = require_binary("debootstrap", "/usr/sbin/debootstrap")
    require_binary("runc", "/usr/sbin/runc")
    tag = uuid.uuid4().hex[:10]
    base, service = f"localhost/retrieval-test-base:{tag}", f"localhost/retrieval-service:{tag}"
    rootfs = tmp_path_factory.mktemp("rootfs") / "root"
    mirror, suite = _mirror_and_suite()
    dangling_before = set(_run(podman, "images", "-q", "--filter", "dangling=true").stdout.split())
    try:
        _run(debootstrap, "--variant=minbase", f"--include={PACKAGES}", suite, str(rootfs), mirror)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run([podman, "import", "-", base], stdin=tar.stdout, check=True, capture_output=True, timeout=600)
        assert tar.wait() == 0
        shutil.rmtree(rootfs)
        ca = os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
        _run(podman, "build", *RUNTIME, "--network", "host", "--secret", f"id=pip_ca,src={ca}",
             "--build-arg", f"BASE_IMAGE={base}", "-t", service, "-f", str(REPO / "Dockerfile"), str(REPO), timeout=2400)
        yield service
    finally:
        # The build stage is left as an untagged image: remove the ones this build made.
        stages = set(_run(podman, "images", "-q", "--filter", "dangling=true").stdout.split()) - dangling_before
        subprocess.run([podman, "rmi", "-f", service, *stages, base], capture_output=True, timeout=300)
        shutil.rmtree(rootfs, ignore_errors=True)


def test_the_image_serves_as_an_unprivileged_user_and_stops_gracefully(image: str) -> None:
    port, metrics_port, health_port = free_port(), free_port(), free_port()
    name = f"retrieval-test-{uuid.uuid4().hex[:8]}"
    _run("podman", "run", "-d", "--name", name, *RUNTIME, "--network", "host",
         "-e", "RETRIEVAL_HOST=127.0.0.1", "-e", f"RETRIEVAL_PORT={port}", "-e", f"RETRIEVAL_METRICS_PORT={metrics_port}",
         "-e", f"RETRIEVAL_HEALTH_PORT={health_port}", "-e", f"RETRIEVAL_JWT_SECRET={SECRET}",
         "-e", f"RETRIEVAL_JWT_AUDIENCE={AUDIENCE}", image)
    try:
        deadline = time.monotonic() + 600  # the first start compiles the numba kernels
        while not check(f"127.0.0.1:{health_port}", timeout_s=2):
            running = _run("podman", "inspect", name, "--format", "{{.State.Running}}").stdout.strip()
            assert running == "true", _run("podman", "logs", name).stderr[-3000:]
            assert time.monotonic() < deadline, "the container never became healthy"
            time.sleep(1)
        assert _run("podman", "exec", name, "id", "-u").stdout.strip() == "10001"
        # The image's HEALTHCHECK command (with a deadline for a busy machine, not the probe's 4 s).
        _run("podman", "exec", name, "python3", "-m", "retrieval_server.healthcheck", "--timeout", "60")
        target = f"127.0.0.1:{port}"
        with RetrievalClient(target, token=hs256(claims("ops", "ADMIN")), timeout=120) as client:
            ingested = client.ingest([pb.DocumentInput(document_id="tides", filename="tides.txt",
                                                       content=b"Tides are caused by the gravitational pull of the moon on the oceans.")])
            assert [d.document_id for d in ingested.documents] == ["tides"]
            assert client.query("what causes tides", top_k=1).contexts[0].document_id == "tides"
            with pytest.raises(grpc.RpcError) as err:
                client.query("", top_k=1)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="Query",grpc_service="retrieval.v1.RetrievalService",grpc_type="unary"} 1.0' in text
        _run("podman", "stop", "-t", "60", name, timeout=120)
        assert _run("podman", "inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip() == "0"
        assert '"msg": "stopped"' in _run("podman", "logs", name).stderr
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, timeout=120)
