"""Agents that are broken in the ways the conformance kit must report within seconds.

``python conformance_bad_agents.py MODE``, where MODE is one of:

- ``not-json``: reads the first command, answers it with a line of plain text (with a
  terminal escape in it), then waits for the end of its stdin;
- ``silent``: writes nothing and reads nothing, for an hour (SIGTERM ends it);
- ``flood``: writes valid JSON events, without end, from the start;
- ``long-line``: writes one 300 MB line, 1 MiB at a time (never the whole line in memory);
- ``exits``: writes two lines to stderr and exits with status 3 at once;
- ``no-exit``: our ``rpc --no-session``, but this process ignores SIGTERM and stays alive
  after the agent has exited at the end of its stdin (only SIGKILL ends it).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

#: The text the ``not-json`` agent answers with, and the ``exits`` agent's stderr.
NOT_JSON = "Hello! I speak plain text,\x1b[31m not JSON."
EXIT_STDERR = "starting the agent\nconfig error: no such provider 'conformance'\n"
#: The ``long-line`` agent's line: its start, then this many MiB of ``x``.
LONG_LINE_START = b'{"type": "message_update", "text": "'
LONG_LINE_MIB = 300


def main(mode: str) -> int:
    out = sys.stdout.buffer
    if mode == "not-json":
        sys.stdin.readline()
        out.write(NOT_JSON.encode() + b"\n")
        out.flush()
        sys.stdin.read()
    elif mode == "silent":
        time.sleep(3600)
    elif mode == "flood":
        line = b'{"type": "message_update", "assistantMessageEvent": {"type": "text_delta"}}\n'
        while True:
            out.write(line * 100)
    elif mode == "long-line":
        out.write(LONG_LINE_START)
        chunk = b"x" * (1024 * 1024)
        for _ in range(LONG_LINE_MIB):
            out.write(chunk)
        out.write(b'"}\n')
        out.flush()
        sys.stdin.read()
    elif mode == "exits":
        sys.stderr.write(EXIT_STDERR)
        return 3
    elif mode == "no-exit":
        command = [sys.executable, "-m", "trio_session", "rpc", "--no-session"]
        with subprocess.Popen(command):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(3600)
    else:
        sys.stderr.write(f"unknown mode {mode!r}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
