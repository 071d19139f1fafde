"""What an ``trio_session.rpc.RpcClient`` raises.

The RPC errors hang under the package's base class (see ``trio_session._core.errors``):

```text
TrioSessionError
└── RpcError                 anything that went wrong talking to an rpc server
    ├── RpcCommandError      the server answered success: false
    └── RpcConnectionError   the server went away (the process died or exited,
                             the stream closed) or the client was closed
```

A failed *model request* is not an exception here either: it arrives as events
(``message_end`` with ``stopReason: "error"``, ``auto_retry_*``), as in the session.
"""

from __future__ import annotations

from typing import Any

from .._core.errors import TrioSessionError


class RpcError(TrioSessionError):
    """Base class of the errors an RPC client raises."""


class RpcCommandError(RpcError):
    """The server answered a command with ``success: false``.

    Attributes:
        command: the command's ``type``.
        error: the server's ``error`` text.
        response: the whole response object.
    """

    def __init__(self, command: str, error: str, response: dict[str, Any]) -> None:
        super().__init__(f"{command} failed: {error}")
        self.command = command
        self.error = error
        self.response = response


class RpcConnectionError(RpcError):
    """The server is gone, so a call cannot be answered.

    Raised by every call that was waiting — for a response, an event, or idle — and
    by every call made afterwards. The message says what was waiting and, for a
    child process, its exit status and the end of what it wrote to stderr.

    Attributes:
        returncode: the child process's exit status (negative: killed by that
            signal), or ``None`` if there is no process or it had not exited.
        stderr: the end of the child's stderr (decoded, at most 64 KiB).

    Args:
        message: what was waiting, and why the server is gone.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
