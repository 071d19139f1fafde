"""A deliberately broken agent for the conformance kit's test: our ``rpc``, minus
``auto_retry_end``.

Runs ``python -m trio_session rpc ARGS`` with this process's stdin, and copies its
stdout line by line, dropping every ``auto_retry_end`` event. Everything else — the
requests it sends, its other events, its responses — is the real agent's.
"""

from __future__ import annotations

import json
import subprocess
import sys


def _keep(line: bytes) -> bool:
    try:
        data = json.loads(line)
    except ValueError:
        return True
    return not (isinstance(data, dict) and data.get("type") == "auto_retry_end")


def main() -> int:
    command = [sys.executable, "-m", "trio_session", "rpc", *sys.argv[1:]]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if _keep(line):
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
