"""RPC mode: drive agent sessions over JSON lines, as the reference's ``--mode rpc``.

- ``serve_rpc`` / ``RpcServer`` — the server, over any ``trio.abc.Stream``;
  ``serve_stdio`` runs it on this process's stdin and stdout (``trio-session rpc``);
- ``open_rpc_client`` / ``connect_rpc`` / ``RpcClient`` — the client;
- ``parse_command`` and the command classes — the wire format.

The protocol is described in ``docs/rpc.md``. Each name is imported on first use
(PEP 562), as in ``trio_session``: the command line's server does not load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and the docs see: every name, as if imported here
    from ._client import RpcClient as RpcClient
    from ._client import RpcEventStream as RpcEventStream
    from ._client import connect_rpc as connect_rpc
    from ._client import open_rpc_client as open_rpc_client
    from ._commands_tree import Clone as Clone
    from ._commands_tree import Fork as Fork
    from ._commands_tree import GetForkMessages as GetForkMessages
    from ._commands_tree import SetSessionName as SetSessionName
    from ._commands_tree import SwitchSession as SwitchSession
    from ._errors import RpcCommandError as RpcCommandError
    from ._errors import RpcConnectionError as RpcConnectionError
    from ._errors import RpcError as RpcError
    from ._host import SessionFactory as SessionFactory
    from ._host import SessionRequest as SessionRequest
    from ._protocol import Abort as Abort
    from ._protocol import AbortRetry as AbortRetry
    from ._protocol import Command as Command
    from ._protocol import GetMessages as GetMessages
    from ._protocol import GetState as GetState
    from ._protocol import NewSession as NewSession
    from ._protocol import Prompt as Prompt
    from ._protocol import RetryNow as RetryNow
    from ._protocol import SetAutoCompaction as SetAutoCompaction
    from ._protocol import SetAutoRetry as SetAutoRetry
    from ._protocol import parse_command as parse_command
    from ._server import RpcServer as RpcServer
    from ._server import serve_rpc as serve_rpc
    from ._stdio import serve_stdio as serve_stdio
    from ._wire import MAX_LINE_BYTES as MAX_LINE_BYTES
    from ._wire import LineSplitter as LineSplitter
    from ._wire import Overlong as Overlong
    from ._wire import Rejected as Rejected
    from ._wire import Response as Response
    from ._wire import encode_line as encode_line
    from ._wire import response_to_json as response_to_json

#: Each public name → the module that defines it, relative to this package.
_EXPORTS: dict[str, str] = {
    "RpcClient": "._client",
    "RpcEventStream": "._client",
    "connect_rpc": "._client",
    "open_rpc_client": "._client",
    "RpcCommandError": "._errors",
    "RpcConnectionError": "._errors",
    "RpcError": "._errors",
    "MAX_LINE_BYTES": "._wire",
    "Abort": "._protocol",
    "AbortRetry": "._protocol",
    "Clone": "._commands_tree",
    "Command": "._protocol",
    "Fork": "._commands_tree",
    "GetForkMessages": "._commands_tree",
    "GetMessages": "._protocol",
    "GetState": "._protocol",
    "LineSplitter": "._wire",
    "NewSession": "._protocol",
    "Overlong": "._wire",
    "Prompt": "._protocol",
    "Rejected": "._wire",
    "Response": "._wire",
    "RetryNow": "._protocol",
    "SetAutoCompaction": "._protocol",
    "SetAutoRetry": "._protocol",
    "SetSessionName": "._commands_tree",
    "SwitchSession": "._commands_tree",
    "encode_line": "._wire",
    "parse_command": "._protocol",
    "response_to_json": "._wire",
    "RpcServer": "._server",
    "SessionFactory": "._host",
    "SessionRequest": "._host",
    "serve_rpc": "._server",
    "serve_stdio": "._stdio",
}

if not TYPE_CHECKING:  # hidden from type checkers, which then flag a misspelt name

    def __getattr__(name: str) -> Any:
        """Import a public name on first use, and keep it: the next use is a plain lookup."""
        module = _EXPORTS.get(name)
        if module is None:
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """The module's own names and every public one, imported or not yet."""
        return sorted({*globals(), *__all__})


__all__ = [
    "MAX_LINE_BYTES",
    "Abort",
    "AbortRetry",
    "Clone",
    "Command",
    "Fork",
    "GetForkMessages",
    "GetMessages",
    "GetState",
    "LineSplitter",
    "NewSession",
    "Overlong",
    "Prompt",
    "Rejected",
    "Response",
    "RetryNow",
    "RpcClient",
    "RpcCommandError",
    "RpcConnectionError",
    "RpcError",
    "RpcEventStream",
    "RpcServer",
    "SessionFactory",
    "SessionRequest",
    "SetAutoCompaction",
    "SetAutoRetry",
    "SetSessionName",
    "SwitchSession",
    "connect_rpc",
    "encode_line",
    "open_rpc_client",
    "parse_command",
    "response_to_json",
    "serve_rpc",
    "serve_stdio",
]
