"""A real MariaDB server on loopback with a temporary data directory, started and stopped by the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.server_process import free_port
from tests.support.paths import require_binary


@contextmanager
def mariadb_server(workdir: Path) -> Iterator[str]:
    """Yield a DSN ``mysql://rt:rt@127.0.0.1:PORT/retrieval_test``."""
    mariadbd = require_binary("mariadb-server", "/usr/sbin/mariadbd")
    install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
    client = shutil.which("mariadb") or "/usr/bin/mariadb"
    datadir, sock, port = workdir / "data", workdir / "mysqld.sock", free_port()
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(
        [install, f"--datadir={datadir}", "--auth-root-authentication-method=socket", "--skip-test-db", *user],
        check=True,
        capture_output=True,
    )
    proc = subprocess.Popen(
        [
            mariadbd,
            "--no-defaults",
            f"--datadir={datadir}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={workdir / 'mysqld.pid'}",
            f"--log-error={workdir / 'error.log'}",
            "--innodb-buffer-pool-size=64M",
            "--skip-log-bin",
            *user,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        setup = (
            "CREATE DATABASE retrieval_test CHARACTER SET utf8mb4; "
            "CREATE USER 'rt'@'127.0.0.1' IDENTIFIED BY 'rt'; "
            "GRANT ALL ON retrieval_test.* TO 'rt'@'127.0.0.1';"
        )
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run([client, f"--socket={sock}", "-uroot", "-e", setup], capture_output=True, text=True)
            if r.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (workdir / "error.log").read_text(errors="replace")[-2000:] if (workdir / "error.log").exists() else ""
                raise RuntimeError(f"MariaDB did not start: {r.stderr.strip()}\n{log}")
            time.sleep(0.3)
        yield f"mysql://rt:rt@127.0.0.1:{port}/retrieval_test"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
