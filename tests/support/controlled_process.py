"""A server process a test may stop, kill, freeze (SIGSTOP: it holds its connections and answers
nothing) and thaw."""

from __future__ import annotations

import signal
import subprocess


class ControlledProcess:
    proc: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a frozen server must be able to act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def freeze(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
