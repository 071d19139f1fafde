"""RPC bytes and lines on the wire: pi 0.73.1 and ``trio-session rpc``, the same reply.

Run from the repository root (pi 0.73.1 from ``python tests/interop/install.py``)::

    python benchmarks/record_pi_wire.py            # records pi's: baselines/pi_wire.json
    python benchmarks/record_pi_wire.py --ours     # prints ours beside it, records nothing

Each agent is spawned in RPC mode with an isolated HOME and agent directory whose one
model is ``openai-completions`` on a loopback server (``_loopback.LoopbackOpenAI``) that
streams a reply of ``--chunks`` two-character deltas (``"7 "``). The prompt line is written
at once; every byte and line the agent writes on stdout is counted until its
``agent_end`` line, by event type. ``streaming.py``'s ``rpc.bytes_pi`` compares ours with
pi's measured live in the same run when node and pi are there, else with the file this
script committed.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _loopback import LoopbackOpenAI
from startup import MODEL, PROVIDER, _config, pi_package

HERE = Path(__file__).resolve().parent
RECORD = HERE / "baselines" / "pi_wire.json"
PROMPT = b'{"id":"p","type":"prompt","message":"hi"}\n'
END = b'{"type":"agent_end"'
TIMEOUT_S = 600.0


def chunks(n: int) -> list[str]:
    """``n`` two-character chunks (``"7 "``)."""
    return [f"{i % 10} " for i in range(n)]


def _type(line: bytes) -> str:
    try:
        return str(json.loads(line).get("type", "?"))
    except ValueError:
        return "not json"


def wire_counts(argv: Sequence[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Spawn ``argv``, write the prompt, count stdout until ``agent_end``: bytes, lines,
    and both by event type."""
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    by_bytes: Counter[str] = Counter()
    by_lines: Counter[str] = Counter()
    start = time.perf_counter()
    try:
        process.stdin.write(PROMPT)
        process.stdin.flush()
        buffer = b""
        done = False
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not done:
                if not selector.select(max(0.0, start + TIMEOUT_S - time.perf_counter())):
                    msg = f"{argv[0]} wrote no agent_end in {TIMEOUT_S:g} s"
                    raise RuntimeError(msg)
                data = os.read(process.stdout.fileno(), 1 << 20)
                if not data:
                    msg = f"{argv[0]} ended before agent_end"
                    raise RuntimeError(msg)
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    kind = (
                        "message_update"
                        if line.startswith(b'{"type":"message_update"')
                        else _type(line)
                    )
                    by_bytes[kind] += len(line) + 1
                    by_lines[kind] += 1
                    if line.startswith(END):
                        done = True
        took = time.perf_counter() - start
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stdout.close()
    return {
        "bytes": sum(by_bytes.values()),
        "lines": sum(by_lines.values()),
        "bytes_by_type": dict(by_bytes),
        "lines_by_type": dict(by_lines),
        "seconds": took,
    }


def run_agent(who: str, n: int) -> dict[str, Any]:
    """Counts for ``who`` ("pi" or "ours") streaming an ``n``-chunk reply."""
    with tempfile.TemporaryDirectory() as tmp, LoopbackOpenAI(chunks(n)) as server:
        agent, env = _config(Path(tmp), server.base_url)
        cwd = Path(tmp) / "project"
        if who == "pi":
            package = pi_package()
            if package is None:
                msg = "pi 0.73.1 is not installed: python tests/interop/install.py"
                raise RuntimeError(msg)
            node = shutil.which("node") or "node"
            argv = [node, str(package / "dist" / "cli.js"), "--mode", "rpc"]
        else:
            argv = [sys.executable, "-m", "trio_session", "rpc", "--agent-dir", str(agent)]
        argv += ["--provider", PROVIDER, "--model", MODEL]
        counts = wire_counts(argv, env, cwd)
    return {"chunks": n, **counts}


def main(argv: Sequence[str] | None = None) -> int:
    """Record pi's counts (or print ours with ``--ours``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=10_000, help="deltas in the reply")
    parser.add_argument("--ours", action="store_true", help="measure trio-session instead")
    args = parser.parse_args(argv)
    counts = run_agent("ours" if args.ours else "pi", args.chunks)
    print(json.dumps(counts, indent=2))
    if not args.ours:
        record = {
            "agent": "pi 0.73.1 (@mariozechner/pi-coding-agent), --mode rpc",
            "recorded": datetime.now(UTC).isoformat(timespec="seconds"),
            "script": "benchmarks/record_pi_wire.py",
            **counts,
        }
        RECORD.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"written: {os.path.relpath(RECORD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
