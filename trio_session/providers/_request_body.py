"""The request body as httpx sends it: bytes from a plain iterator, never an async generator.

Given ``content=bytes``, httpx sends a ``ByteStream`` whose ``__aiter__`` is an async
generator, and httpcore iterates it while it writes. An attempt cancelled in the middle of
that write -- an abort, a deadline, a client that leaves -- leaves the generator suspended,
and only the garbage collector finalizes it; trio reports that as a ``ResourceWarning``
(``-W error`` makes it an error; encode/httpx#3686). ``BytesBody`` hands httpcore an
iterator object instead: there is nothing left half-run to finalize.

Imported by ``_http`` once httpx is (the provider's client made it so).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class BytesBody(httpx.AsyncByteStream):
    """One request body, sent as one chunk, as many times as httpx asks for it."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _Once(self._data)


class _Once:
    """An async iterator over exactly one chunk."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data
