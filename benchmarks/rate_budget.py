"""A fleet against a provider that enforces its published rate limit (issue 43).

Run from the repository root::

    python benchmarks/rate_budget.py            # 8 workers, 40 s, 600 requests a minute
    python benchmarks/rate_budget.py --quick    # 4 workers, 10 s, 120 requests a minute
    python benchmarks/rate_budget.py --tokens-bind  # the token limit binds first
    python benchmarks/rate_budget.py --only budget,litellm  # some of the ways

One loopback fake OpenAI-compatible server enforces a requests-per-minute and a
tokens-per-minute limit as providers describe theirs: a bucket of the limit refilled
over a minute, for each. A request it cannot take gets ``429`` with ``retry-after``
(seconds until it would fit) and the ``x-ratelimit-*`` headers; one it takes is charged
its prompt (a token per four characters of its messages' texts) and its reply (20
tokens), and answered with that usage. ``WORKERS`` worker processes offer prompts at a steady rate —
in all twice what the limit allows over the run (its bucket plus a minute's refill
scaled to the run) — each prompt in a new session on the same key. Five ways:

* ``none`` — default settings, each worker its own in-memory store: pi's policy, a 429
  is retried after 2, 4, 8 s;
* ``cooldown`` — one Redis store and ``retry.sharedCooldown``: a 429's ``retry-after``
  holds every worker (today's reaction);
* ``budget`` — one Redis store and ``rateLimit`` set to the server's limits: every
  request waits for its permit of the fleet's budget (R-69);
* ``learned`` — one Redis store, no limit set: the budget learns the limits from the
  server's ``x-ratelimit-*`` headers (``none`` and ``cooldown`` set
  ``rateLimit.learn: false``, to stay what they stand for);
* ``litellm`` — what most Python teams use: litellm's Router on asyncio, in each worker
  process ``rate_budget_litellm.py`` in place of ours, with litellm's documented
  settings for limits shared by several instances — one deployment with ``rpm`` and
  ``tpm`` set to the server's limits, ``routing_strategy "usage-based-routing-v2"``,
  ``enable_pre_call_checks``, ``redis_host`` / ``redis_port`` naming the same
  ``redis-server`` (which listens on a loopback port for it). Skipped, with a line that
  says so, unless ``pip install -e '.[bench-litellm]'`` installed litellm; then one more
  line gives the prompts litellm refused (its ``RateLimitError``) and the UTC time its
  run started (litellm counts in calendar minutes).

Printed for each: the share of requests answered 429, the requests accepted within the
run as a share of what the limit allowed in it (its bucket plus the refill), the same for
tokens, the spread between workers (the least a worker had answered ÷ the mean), and the
time from a prompt to its answer (p50, p99) of the prompts answered. A prompt not
answered when the run ends (waiting for a permit, or in a retry's backoff) is cancelled
and counted as not answered. Needs ``redis-server`` on the PATH for the Redis rows.
Not part of ``run.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from _bench import percentile
from fleet import start_redis

KEY = "sk-bench-rate-budget-0000000000000000"
MODES = ("none", "cooldown", "budget", "learned", "litellm")
HERE = Path(__file__).resolve().parent
#: The ``litellm`` way's worker, and what it needs beyond this project (``bench-litellm``).
LITELLM_WORKER = HERE / "rate_budget_litellm.py"
LITELLM_NEEDS = ("litellm", "redis")
#: What ``none`` and ``cooldown`` stand for has no budget: they do not learn one either.
NO_LEARNING = {"learn": False}
REPLY_TOKENS = 20


class Bucket:
    """A bucket of ``limit`` refilled over a minute, full at the start."""

    def __init__(self, limit: int, now: float) -> None:
        self.limit = limit
        self.level = float(limit)
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / 60)
        self.at = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` fits (0: it does now)."""
        return max(0.0, (cost - self.level) * 60 / self.limit)


def _texts(request: dict[str, Any]) -> list[str]:
    """The texts of a Chat Completions request's messages (a string, or text parts)."""
    found = []
    for message in request.get("messages", []):
        content = message.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content or []
        found += [part["text"] for part in parts if isinstance(part.get("text"), str)]
    return found


class LimitedServer:
    """A loopback HTTP/1.1 server speaking just enough OpenAI chat completions, with
    a request and a token limit per minute."""

    def __init__(self, rpm: int, tpm: int) -> None:
        now = time.monotonic()
        self.requests = Bucket(rpm, now)
        self.tokens = Bucket(tpm, now)
        self.accepted: list[tuple[float, int]] = []  # (time, tokens)
        self.rejected = 0
        self.port = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=4096)
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
                body, buffer = buffer[:length], buffer[length:]
                await stream.send_all(self._answer(body))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    def _answer(self, body: bytes) -> bytes:
        now = time.monotonic()
        prompt = math.ceil(sum(map(len, _texts(json.loads(body)))) / 4)
        cost = prompt + REPLY_TOKENS
        self.requests.refill(now)
        self.tokens.refill(now)
        wait = max(self.requests.wait_for(1), self.tokens.wait_for(cost))
        limits = (
            f"x-ratelimit-limit-requests: {self.requests.limit}\r\n"
            f"x-ratelimit-remaining-requests: {int(self.requests.level)}\r\n"
            f"x-ratelimit-limit-tokens: {self.tokens.limit}\r\n"
            f"x-ratelimit-remaining-tokens: {int(self.tokens.level)}\r\n"
        ).encode()
        if wait > 0:
            self.rejected += 1
            error = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
            text = json.dumps(error).encode()
            return (
                b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                + f"retry-after: {math.ceil(wait)}\r\n".encode()
                + limits
                + f"content-length: {len(text)}\r\n\r\n".encode()
                + text
            )
        self.requests.level -= 1
        self.tokens.level -= cost
        self.accepted.append((now, cost))
        usage = {"prompt_tokens": prompt, "completion_tokens": REPLY_TOKENS}
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage},
        ]
        text = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + limits
            + f"content-length: {len(text)}\r\n\r\n".encode()
            + text
        )


# -- a worker -----------------------------------------------------------------------------


async def worker(url: str, mode: str, rate: float, duration: float, redis_url: str) -> None:
    """One worker process: a prompt every ``1 / rate`` seconds for ``duration`` seconds,
    each in a new session; waits for ``go`` on stdin first; prints its answered prompts'
    times to an answer, and how many it offered."""
    from trio_session import InMemoryCredentialStore, OpenAIProvider, open_session
    from trio_session.store._redis_credentials import open_redis_credentials

    rpm, tpm = (int(v) for v in os.environ["BENCH_LIMITS"].split(","))
    settings: dict[str, Any] = {"rateLimit": NO_LEARNING}
    if mode == "cooldown":
        settings = {"retry": {"sharedCooldown": True}, "rateLimit": NO_LEARNING}
    elif mode == "budget":
        limits = {"requestsPerMinute": rpm, "tokensPerMinute": tpm, "replyTokens": REPLY_TOKENS}
        settings = {"rateLimit": limits}
    elif mode == "learned":
        settings = {"rateLimit": {"replyTokens": REPLY_TOKENS, "learn": True}}
    keys = {"openai": [KEY]}
    latencies: list[float] = []
    offered = 0

    async def one(provider: Any, credentials: Any) -> None:
        start = time.monotonic()
        async with open_session(
            provider, "gpt-test", settings=settings, credentials=credentials
        ) as session:
            reply = await session.prompt("Hi")
        if reply.stop_reason == "stop":
            latencies.append(time.monotonic() - start)

    async def run(credentials: Any) -> None:
        nonlocal offered
        async with OpenAIProvider(base_url=url) as provider:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await trio.to_thread.run_sync(sys.stdin.readline)
            end = time.monotonic() + duration
            with trio.move_on_at(trio.current_time() + duration):
                async with trio.open_nursery() as nursery:
                    while time.monotonic() < end:
                        nursery.start_soon(one, provider, credentials)
                        offered += 1
                        await trio.sleep(1 / rate)
                    await trio.sleep_forever()

    if mode == "none":
        await run(InMemoryCredentialStore(keys=keys))
    else:
        # A prefix per way: the budget a way left in Redis must not hold the next one.
        prefix = f"bench-{mode}:"
        async with open_redis_credentials(redis_url, keys=keys, environ={}, prefix=prefix) as store:
            await run(store)
    print(json.dumps({"latencies": latencies, "offered": offered}))


# -- the parent ---------------------------------------------------------------------------


def _command(
    mode: str, url: str, rate: float, duration: float, redis: tuple[str, int]
) -> list[str]:
    """A worker's command line: ours, or litellm's Router (which reaches Redis by TCP)."""
    if mode == "litellm":
        return [sys.executable, str(LITELLM_WORKER), url, str(rate), str(duration), str(redis[1])]
    return [sys.executable, __file__, "--worker", url, mode, str(rate), str(duration), redis[0]]


async def run_mode(
    mode: str, workers: int, rpm: int, tpm: int, duration: float, redis: tuple[str, int]
) -> dict[str, Any]:
    server = LimitedServer(rpm, tpm)
    allowed = rpm + rpm * duration / 60  # the bucket and its refill over the run
    rate = 2 * allowed / duration / workers
    env = {**os.environ, "BENCH_LIMITS": f"{rpm},{tpm}"}
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        url = f"http://127.0.0.1:{server.port}/v1"
        procs = []
        for _ in range(workers):
            proc = await trio.lowlevel.open_process(
                _command(mode, url, rate, duration, redis),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            procs.append(proc)
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
        started = time.strftime("%H:%M:%S", time.gmtime())  # litellm counts per UTC minute
        server.requests.refill(start)  # full buckets at the start, whatever the setup took
        server.tokens.refill(start)
        for proc in procs:
            assert proc.stdin is not None
            await proc.stdin.send_all(b"go\n")
        outputs = []
        for proc in procs:
            assert proc.stdout is not None
            out = b""
            while data := await proc.stdout.receive_some(65536):
                out += data
            await proc.wait()
            outputs.append(json.loads(out.decode().splitlines()[-1]))
        nursery.cancel_scope.cancel()
    in_run = [(t, c) for t, c in server.accepted if t <= start + duration]
    latencies = [x for o in outputs for x in o["latencies"]]
    answered = [len(o["latencies"]) for o in outputs]
    sent = len(server.accepted) + server.rejected
    mean = sum(answered) / len(answered)
    return {
        "mode": mode,
        "started_utc": started,
        "offered": sum(o["offered"] for o in outputs),
        "answered": sum(answered),
        # the litellm way's prompts that ended in its RateLimitError, the Router's or the server's
        "refused": sum(o.get("refused", 0) for o in outputs),
        "share_429": server.rejected / sent if sent else 0.0,
        "requests_share": len(in_run) / allowed,
        "tokens_share": sum(c for _, c in in_run) / (tpm + tpm * duration / 60),
        "worker_spread": min(answered) / mean if mean else 0.0,
        "p50_s": percentile(sorted(latencies), 0.5) if latencies else None,
        "p99_s": percentile(sorted(latencies), 0.99) if latencies else None,
    }


def measure(quick: bool, tokens_bind: bool = False, modes: Sequence[str] = MODES) -> dict[str, Any]:
    """Run the ways; return their figures (printed by ``main``).

    Args:
        quick: 4 workers for 10 s at 120 requests a minute, not 8 for 40 s at 600.
        tokens_bind: a token limit below what the request limit lets through (18 tokens
            a request's worth, each request costing 21), so that the token limit is the
            one the budget must fill; by default the request limit binds first.
        modes: the ways to run, of ``MODES``.
    """
    workers, rpm, duration = (4, 120, 10.0) if quick else (8, 600, 40.0)
    # a request here is 21 tokens: with 22 a request's worth both limits bind, requests
    # first; with 18, tokens first
    tpm = rpm * (18 if tokens_bind else 22)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rate", dir="/tmp") as tmp:
        port = _free_port()
        redis = start_redis(Path(tmp), port)
        redis_at = (f"unix://{tmp}/redis.sock", port)
        try:
            for mode in modes:
                if mode != "none" and redis is None:
                    rows.append({"mode": mode, "skipped": "redis-server is not installed"})
                    continue
                if mode == "litellm" and (missing := _not_installed(LITELLM_NEEDS)):
                    skipped = f"{missing} not installed: pip install -e '.[bench-litellm]'"
                    rows.append({"mode": mode, "skipped": skipped})
                    continue
                rows.append(trio.run(run_mode, mode, workers, rpm, tpm, duration, redis_at))
        finally:
            if redis is not None:
                redis.kill()
                redis.wait()
    return {"workers": workers, "rpm": rpm, "tpm": tpm, "duration_s": duration, "rows": rows}


def _not_installed(modules: Sequence[str]) -> str:
    """The first of ``modules`` this interpreter cannot import ("" when it has them all)."""
    return next((m for m in modules if importlib.util.find_spec(m) is None), "")


def _free_port() -> int:
    """A loopback TCP port free now, for Redis (litellm's Router reaches it by host and port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}s"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        url, mode, rate, duration, redis_url = argv[1:6]
        trio.run(worker, url, mode, float(rate), float(duration), redis_url)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 workers, 10 s, 120 a minute")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument(
        "--tokens-bind", action="store_true", help="a token limit that binds before the request one"
    )
    parser.add_argument(
        "--only", default=",".join(MODES), help=f"comma-separated ways (of {', '.join(MODES)})"
    )
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.only.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown way(s): {', '.join(unknown)} (choose from {', '.join(MODES)})")
    result = measure(args.quick, args.tokens_bind, modes)
    print(
        f"{result['workers']} workers, {result['duration_s']:g} s, limits {result['rpm']} "
        f"requests / {result['tpm']} tokens a minute, offered twice what they allow"
    )
    print(
        f"{'mode':<10}{'429s':>7}{'requests':>10}{'tokens':>8}{'spread':>8}"
        f"{'answered':>16}{'p50':>8}{'p99':>8}"
    )
    for row in result["rows"]:
        if "skipped" in row:
            print(f"{row['mode']:<10} skipped: {row['skipped']}")
            continue
        print(
            f"{row['mode']:<10}{row['share_429']:>7.1%}{row['requests_share']:>10.1%}"
            f"{row['tokens_share']:>8.1%}{row['worker_spread']:>8.2f}"
            f"{row['answered']:>8}/{row['offered']:<7}"
            f"{_seconds(row['p50_s']):>8}{_seconds(row['p99_s']):>8}"
        )
    for row in result["rows"]:
        if row["mode"] == "litellm" and "skipped" not in row:
            print(
                f"litellm: {row['refused']} prompt(s) ended in its RateLimitError;"
                f" its way started at {row['started_utc']} UTC"
            )
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
