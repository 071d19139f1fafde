"""httpx, imported when first used: a provider that is made but never sends (the ``rpc``
command answering its first commands) does not pay for importing it.

A module that uses httpx says ``httpx = lazy_httpx(globals())`` (outside
``TYPE_CHECKING``); the first attribute read imports httpx and puts the module itself in
that module's ``httpx``, so every later use is a plain global lookup.

Every first import of httpx here goes through ``load_httpx``, which leaves out httpx's
command-line tool: httpx's ``__init__`` imports ``httpx._main`` (the ``httpx`` command)
whenever click is installed, and with it rich, pygments and click, some 30 ms before the
first request (two thirds of importing httpx). This package never runs that command.
"""

from __future__ import annotations

import sys
from typing import Any

#: httpx's command-line tool, which its ``__init__`` imports if it can.
_HTTPX_CLI = "httpx._main"


def load_httpx() -> None:
    """Import httpx, if nothing has yet, without its command-line tool.

    While httpx's ``__init__`` runs, ``sys.modules`` says ``httpx._main`` cannot be
    imported, so httpx defines its stand-in ``main`` instead (the one it has for an
    install without ``httpx[cli]``); the entry is removed afterwards, and ``httpx.main``
    becomes ``_tool_on_call``, which imports the tool when it is called: a program that
    calls ``httpx.main`` or imports ``httpx._main`` gets the tool as before. The ``httpx``
    command, a process of its own, is untouched.
    """
    if "httpx" in sys.modules:
        return
    blocked = _HTTPX_CLI not in sys.modules
    if blocked:  # None in sys.modules: "import httpx._main" raises ImportError
        sys.modules[_HTTPX_CLI] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        if blocked:
            sys.modules.pop(_HTTPX_CLI, None)
    if blocked:
        _tool_on_call.stand_in = httpx.main  # type: ignore[attr-defined]
        httpx.main = _tool_on_call  # type: ignore[assignment]


def _tool_on_call(*args: Any, **kwargs: Any) -> Any:
    """``httpx.main`` after ``load_httpx``: httpx's command-line tool, imported now; httpx's
    own stand-in (which says to install ``httpx[cli]``) where the tool cannot be."""
    try:
        from httpx._main import main
    except ImportError:
        main = _tool_on_call.stand_in  # type: ignore[attr-defined]
    return main(*args, **kwargs)


class _Httpx:
    """Stands for the ``httpx`` module in one module's globals until something of it is
    used, then imports it and puts the module in its place."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        load_httpx()
        import httpx

        self._namespace["httpx"] = httpx
        return getattr(httpx, name)


def lazy_httpx(namespace: dict[str, Any]) -> Any:
    """A stand-in for httpx in ``namespace`` (a module's ``globals()``), replaced by the
    module when first used.

    Args:
        namespace: the globals of the module that names httpx ``httpx``.
    """
    return _Httpx(namespace)
