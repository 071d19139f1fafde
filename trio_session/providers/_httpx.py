"""httpx, imported when first used: a provider that is made but never sends (the ``rpc``
command answering its first commands) does not pay for importing it.

A module that uses httpx says ``httpx = lazy_httpx(globals())`` (outside
``TYPE_CHECKING``); the first attribute read imports httpx and puts the module itself in
that module's ``httpx``, so every later use is a plain global lookup.
"""

from __future__ import annotations

from typing import Any


class _Httpx:
    """Stands for the ``httpx`` module in one module's globals until something of it is
    used, then imports it and puts the module in its place."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
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
