"""A real ``redis-server`` for a test: started on a unix socket (or a loopback port),
with no persistence, stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

REDIS_SERVER = shutil.which("redis-server")
needs_redis = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (apt-get install redis-server)"
)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@attrs.define
class RedisServer:
    """One ``redis-server`` process; ``stop``, ``kill``, ``pause`` and ``start`` it again."""

    directory: Path
    port: int | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def url(self) -> str:
        if self.port is not None:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket_path}"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        assert self.process is None or self.process.poll() is not None
        self.socket_path.unlink(missing_ok=True)
        args = [
            REDIS_SERVER,
            "--port",
            str(self.port or 0),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 30
        while self.command("PING") != "PONG":  # wait until it answers
            assert self.process.poll() is None, "redis-server exited at start"
            assert time.monotonic() < deadline, "redis-server did not answer in 30 s"
            time.sleep(0.01)

    def stop(self) -> None:
        """SIGKILL it (as a crash would) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.resume()
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: it keeps its sockets but answers nothing."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def command(self, *args: str) -> str | None:
        """One command over the unix socket with ``redis-cli --raw``; ``None`` if it fails."""
        try:
            done = subprocess.run(
                ["redis-cli", "-s", str(self.socket_path), "--raw", *args],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        return done.stdout.decode("utf-8", "replace").rstrip("\n")

    def raw(self, *args: str) -> bytes:
        """A command's raw reply bytes (for ``DUMP``)."""
        done = subprocess.run(
            ["redis-cli", "-s", str(self.socket_path), "--no-raw", *args],
            capture_output=True,
            timeout=10,
            check=True,
        )
        return done.stdout


@contextmanager
def running_redis(*, tcp: bool = False) -> Iterator[RedisServer]:
    """A fresh ``redis-server`` on a unix socket in a short temporary directory (and on a
    loopback port with ``tcp``); a test without redis-server installed is skipped."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    directory = Path(tempfile.mkdtemp(prefix="rds", dir="/tmp"))
    server = RedisServer(directory, port=free_port() if tcp else None)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
