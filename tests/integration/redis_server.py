"""A real ``redis-server`` (Debian's package; CI installs it) on a free 127.0.0.1 port in a temporary directory.

No persistence (``save ""``, no AOF), no protected-mode surprises, nothing but loopback. ``stop()`` ends only the
process this module started, by its pid.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI"):
                raise AssertionError("redis-server is not installed (.ci/run installs Debian's redis-server)")
            pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
        self.directory = directory
        self.port = free_port()
        self._binary = binary
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
        args += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", str(self.directory / "log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"redis-server did not start: {(self.directory / 'log').read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None
