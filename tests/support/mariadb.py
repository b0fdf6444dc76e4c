"""A real MariaDB server on loopback with a temporary data directory, started and stopped by the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.server_process import free_port
from tests.support.controlled_process import ControlledProcess
from tests.support.paths import require_binary


class MariaDb(ControlledProcess):
    """One server: installed once in ``workdir``, then started, stopped, frozen and thawed at will
    on the same port and data (fault-injection tests restart it under load)."""

    def __init__(self, workdir: Path, binary_log: Sequence[str] = (), options: Sequence[str] = ()) -> None:
        """``binary_log``: options that turn the binary log on (without them it is off);
        ``options``: further server options (``--ssl-cert``, say)."""
        self._binary_log = list(binary_log) or ["--skip-log-bin"]
        self._options = list(options)
        self._mariadbd = require_binary("mariadb-server", "/usr/sbin/mariadbd")
        self._client = shutil.which("mariadb") or "/usr/bin/mariadb"
        self.workdir, self.port = workdir, free_port()
        self._datadir, self._sock = workdir / "data", workdir / "mysqld.sock"
        self._user = ["--user=root"] if os.geteuid() == 0 else []
        self.proc: subprocess.Popen[bytes] | None = None
        install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
        subprocess.run(
            [install, f"--datadir={self._datadir}", "--auth-root-authentication-method=socket", "--skip-test-db", *self._user],
            check=True,
            capture_output=True,
        )

    @property
    def dsn(self) -> str:
        return f"mysql://rt:rt@127.0.0.1:{self.port}/retrieval_test"

    def start(self, setup: bool = False) -> None:
        self.proc = subprocess.Popen(
            [
                self._mariadbd,
                "--no-defaults",
                f"--datadir={self._datadir}",
                f"--socket={self._sock}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--pid-file={self.workdir / 'mysqld.pid'}",
                f"--log-error={self.workdir / 'error.log'}",
                "--innodb-buffer-pool-size=64M",
                *self._binary_log,
                *self._options,
                *self._user,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sql = (
            "CREATE DATABASE retrieval_test CHARACTER SET utf8mb4; "
            "CREATE USER 'rt'@'127.0.0.1' IDENTIFIED BY 'rt'; "
            "GRANT ALL ON retrieval_test.* TO 'rt'@'127.0.0.1';"
            if setup
            else "SELECT 1"
        )
        deadline = time.monotonic() + 120
        while True:
            r = subprocess.run([self._client, f"--socket={self._sock}", "-uroot", "-e", sql], capture_output=True, text=True)
            if r.returncode == 0:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.workdir / "error.log").read_text(errors="replace")[-2000:] if (self.workdir / "error.log").exists() else ""
                raise RuntimeError(f"MariaDB did not start: {r.stderr.strip()}\n{log}")
            time.sleep(0.3)


@contextmanager
def mariadb_server(workdir: Path, binary_log: Sequence[str] = (), options: Sequence[str] = ()) -> Iterator[str]:
    """Yield a DSN ``mysql://rt:rt@127.0.0.1:PORT/retrieval_test``."""
    server = MariaDb(workdir, binary_log, options)
    server.start(setup=True)
    try:
        yield server.dsn
    finally:
        server.stop()
