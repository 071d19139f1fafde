"""A fleet against one rate-limited key: local stores, one Redis store, Redis + shared cooldown.

Run from the repository root::

    python benchmarks/fleet.py            # 4 workers × 50 sessions, a 5 s block
    python benchmarks/fleet.py --quick    # 2 workers × 10 sessions, a 1 s block

The scenario (issue 17). One loopback fake OpenAI-compatible server; one API key,
A. From the first request it receives, for ``BLOCK_S`` seconds, the server answers
every request with A ``429 Too Many Requests`` and ``retry-after: BLOCK_S`` (the
wait left, rounded up); otherwise a short streamed answer. ``WORKERS`` worker
processes each start ``SESSIONS`` sessions, one every ``BLOCK_S / SESSIONS``
seconds (a steady stream of new work, as a service sees), each sending one prompt
with the default retry settings (``maxRetries`` 3, ``baseDelayMs`` 2000). Three ways:

* ``local`` — each worker its own ``InMemoryCredentialStore``, as separate machines
  would have: nobody learns from anybody;
* ``redis`` — one ``RedisCredentialStore`` shared by all: it shares usage-limit
  blocks, but a rate limit on the only key is not one, so nothing changes;
* ``redis+cooldown`` — the same with ``retry.sharedCooldown: true``: the first 429's
  ``retry-after`` holds every worker's sessions on key A until it has passed.

Printed for each: the requests that reached A during the block, those after the
first 429 was sent, the 429s answered, and the time from the start to the last
session's answer (drain). Goal: with Redis + shared cooldown, requests after the
first 429 are only those already in flight (≤ workers), against ≥ workers ×
sessions during the block without. Before the start each worker runs every code
path once with another key (an answer, a 429, a retry chain, a cooldown), so that
imports do not slow its first sessions. Needs ``redis-server`` on the PATH for the Redis rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

KEY_A = "sk-fleet-aaaaaaaaaaaaaaaaaaaaaaaa"
MODES = ("local", "redis", "redis+cooldown")


# -- the fake provider ----------------------------------------------------------------


class FakeProvider:
    """A loopback HTTP/1.1 server speaking just enough OpenAI chat completions."""

    def __init__(self, block_s: float) -> None:
        self.block_s = block_s
        self.block_start: float | None = None
        self.first_429: float | None = None
        self.to_a: list[float] = []
        self.rejected = 0
        self.port = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=1024)
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines[1:])
                }
                length = int(headers.get("content-length", "0"))
                while len(buffer) < length:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                buffer = buffer[length:]
                await stream.send_all(self._answer(headers.get("authorization", "")))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    def _answer(self, authorization: str) -> bytes:
        now = time.monotonic()
        if authorization == f"Bearer {KEY_A}":
            self.to_a.append(now)
            if self.block_start is None:
                self.block_start = now
            left = self.block_start + self.block_s - now
            if left > 0:
                self.rejected += 1
                if self.first_429 is None:
                    self.first_429 = now
                body = json.dumps(
                    {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
                ).encode()
                return (
                    b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                    + f"retry-after: {math.ceil(left)}\r\n".encode()
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        body = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    def figures(self) -> dict[str, Any]:
        start = self.block_start or 0.0
        end = start + self.block_s
        during = [t for t in self.to_a if start <= t < end]
        after_first = [t for t in during if self.first_429 is not None and t > self.first_429]
        return {
            "requests_to_a_during_block": len(during),
            "requests_to_a_after_first_429": len(after_first),
            "rejected_429": self.rejected,
        }


# -- a worker -----------------------------------------------------------------------------


async def worker(url: str, mode: str, sessions: int, gap: float, redis_url: str) -> None:
    """One worker process: ``sessions`` sessions, one every ``gap`` seconds, each one
    prompt; waits for ``go`` on stdin first. Prints how many answered."""
    from trio_session import (
        FauxProvider,
        FauxReply,
        InMemoryCredentialStore,
        OpenAIProvider,
        open_session,
    )
    from trio_session.store._redis_credentials import open_redis_credentials

    settings = {"retry": {"sharedCooldown": mode == "redis+cooldown"}}
    keys = {"openai": [KEY_A]}
    answered = 0

    async def one(provider: Any, credentials: Any) -> None:
        nonlocal answered
        async with open_session(
            provider, "gpt-test", settings=settings, credentials=credentials
        ) as session:
            reply = await session.prompt("Hi")
            answered += reply.stop_reason == "stop"

    async def warm_up(provider: Any) -> None:
        """Every code path once (an HTTP answer, a 429 and its chain, a cooldown), with
        another key, so the first sessions measured are not slowed by imports."""
        warm = InMemoryCredentialStore(keys={"openai": ["sk-warm"]})
        async with open_session(provider, "gpt-test", credentials=warm) as session:
            await session.prompt("Hi")
        faux = FauxProvider([FauxReply(error="429 Too Many Requests\nretry-after: 0"), FauxReply()])
        cooled = {"retry": {"sharedCooldown": True, "baseDelayMs": 0}}
        async with open_session(faux, settings=cooled, credentials=warm) as session:
            await session.prompt("Hi")

    async def run(credentials: Any) -> None:
        async with OpenAIProvider(base_url=url) as provider:
            await warm_up(provider)
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await trio.to_thread.run_sync(sys.stdin.readline)
            async with trio.open_nursery() as nursery:
                for _ in range(sessions):
                    nursery.start_soon(one, provider, credentials)
                    await trio.sleep(gap)

    if mode == "local":
        await run(InMemoryCredentialStore(keys=keys))
    else:
        async with open_redis_credentials(redis_url, keys=keys, environ={}) as store:
            await run(store)
    print(json.dumps({"answered": answered}))


# -- the parent ---------------------------------------------------------------------------


def start_redis(directory: Path, port: int = 0) -> subprocess.Popen[bytes] | None:
    """A ``redis-server`` on ``directory/redis.sock``, and on 127.0.0.1:``port`` unless it is
    0; ``None`` when there is none to start."""
    server = shutil.which("redis-server")
    if server is None:
        return None
    sock = directory / "redis.sock"
    options = ["--save", "", "--appendonly", "no", "--dir", str(directory)]
    listen = ["--port", str(port), "--bind", "127.0.0.1"]
    process = subprocess.Popen(
        [server, *listen, "--unixsocket", str(sock), "--unixsocketperm", "700", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not sock.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    return process


async def run_mode(
    mode: str, workers: int, sessions: int, block_s: float, redis_url: str
) -> dict[str, Any]:
    fake = FakeProvider(block_s)
    async with trio.open_nursery() as nursery:
        await nursery.start(fake.run)
        url = f"http://127.0.0.1:{fake.port}/v1"
        gap = block_s / sessions
        procs = []
        for _ in range(workers):
            proc = await trio.lowlevel.open_process(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    url,
                    mode,
                    str(sessions),
                    str(gap),
                    redis_url,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            procs.append(proc)
        outputs: list[bytes] = []
        for proc in procs:  # all connected before any starts
            assert proc.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                data = await proc.stdout.receive_some(1)
                if not data:
                    break
                line += data
            assert line == b"ready\n", line
        start = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            await proc.stdin.send_all(b"go\n")
        for proc in procs:
            assert proc.stdout is not None
            out = b""
            while data := await proc.stdout.receive_some(65536):
                out += data
            await proc.wait()
            outputs.append(out)
        drain = time.monotonic() - start
        nursery.cancel_scope.cancel()
    answered = sum(json.loads(o.decode().splitlines()[-1])["answered"] for o in outputs)
    return {
        "mode": mode,
        **fake.figures(),
        "answered": answered,
        "sessions": workers * sessions,
        "drain_s": round(drain, 2),
    }


def measure(quick: bool) -> dict[str, Any]:
    """Run the three ways; return their figures (printed by ``main``)."""
    workers, sessions, block_s = (2, 10, 1.0) if quick else (4, 50, 5.0)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fleet", dir="/tmp") as tmp:
        redis = start_redis(Path(tmp))
        redis_url = f"unix://{tmp}/redis.sock"
        try:
            for mode in MODES:
                if mode != "local" and redis is None:
                    rows.append({"mode": mode, "skipped": "redis-server is not installed"})
                    continue
                rows.append(trio.run(run_mode, mode, workers, sessions, block_s, redis_url))
        finally:
            if redis is not None:
                redis.kill()
                redis.wait()
    cooled = next((r for r in rows if r["mode"] == "redis+cooldown" and "skipped" not in r), None)
    local = rows[0]
    met = (
        cooled is not None
        and cooled["requests_to_a_after_first_429"] <= workers
        and local["requests_to_a_during_block"] >= workers * sessions
    )
    return {
        "workers": workers,
        "sessions": sessions,
        "block_s": block_s,
        "rows": rows,
        "goal_met": met,
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        url, mode, sessions, gap, redis_url = argv[1:6]
        trio.run(worker, url, mode, int(sessions), float(gap), redis_url)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2 workers × 10 sessions, 1 s block")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.quick)
    print(
        f"{result['workers']} workers × {result['sessions']} sessions, key A blocked "
        f"{result['block_s']:g} s (429, retry-after)"
    )
    header = f"{'mode':<16}{'to A in block':>14}{'after 1st 429':>15}{'429s':>7}"
    print(f"{header}{'answered':>10}{'drain':>9}")
    for row in result["rows"]:
        if "skipped" in row:
            print(f"{row['mode']:<16} skipped: {row['skipped']}")
            continue
        print(
            f"{row['mode']:<16}{row['requests_to_a_during_block']:>14}"
            f"{row['requests_to_a_after_first_429']:>15}{row['rejected_429']:>7}"
            f"{row['answered']:>6}/{row['sessions']:<3}{row['drain_s']:>8.2f}s"
        )
    verdict = "met" if result["goal_met"] else "missed"
    print(
        f"goal (≤ workers after the first 429 with the cooldown; ≥ workers × sessions): {verdict}"
    )
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
