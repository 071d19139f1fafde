"""Reading an HTTP response body: an event stream decoded and fed to a ``StreamParser``,
an error body read up to a cap and worded as the ``errorMessage``.

``HttpProvider`` (``._http``) calls these for each response; ``EventReader.take`` is on
the per-chunk path. httpx is imported when first used, as in ``._http``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from .._core.classes import define
from .._core.failure import http_failure
from .._core.json_bounds import loads
from .._retry.classify import parse_retry_after_ms
from ._base import StreamEnd
from ._error_text import (
    excerpt,
    http_error_message,
    invalid_response_message,
    redact,
)
from ._httpx import lazy_httpx
from ._sse import EventStreamTooLarge, ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    import httpx
else:
    httpx = lazy_httpx(globals())

logger = logging.getLogger("trio_session")

#: The most of an error body that is read; the rest is dropped with the connection.
MAX_ERROR_BODY_BYTES = 64 * 1024

UNDECODABLE = invalid_response_message("the response body could not be decoded")

#: ``http_error_message``'s signature: what an adapter uses to word an HTTP error response.
ErrorWording = Callable[..., str]


class StreamParser(Protocol):
    """Reads one API's events into a sink; made fresh for every request."""

    def feed(self, event: ServerSentEvent) -> StreamEnd | None:
        """Take one event; return how the stream ended if this event ends it."""
        ...

    def finish(self) -> StreamEnd:
        """The body ended without an end event: how did the stream end?"""
        ...


class _ContentDecoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


def content_decoder(response: httpx.Response) -> _ContentDecoder:
    """The ``content-encoding`` decoder httpx would use for ``response``.

    The body is read with ``aiter_raw()`` and decoded here, in the reader's own frame:
    inside httpx's ``aiter_bytes()`` a ``DecodingError`` would leave the raw iterator
    under it suspended and abandoned to the garbage collector (trio warns), while here
    it is caught and the read loop is left by cancellation like any early stop.
    ``_get_content_decoder`` is httpx's own: private, but in every httpx this package
    supports, and what ``aiter_bytes()`` itself calls.
    """
    decoder: _ContentDecoder = response._get_content_decoder()
    return decoder


@define(eq=False)
class EventReader:
    """Raw body pieces → content decoding → SSE lines and events → the parser."""

    _content: _ContentDecoder
    _parser: StreamParser
    _events: SSEDecoder = attrs.field(factory=SSEDecoder)

    def take(self, raw: bytes) -> StreamEnd | None:
        """Feed one raw piece of the body; the end, if it came (or a failure)."""
        try:
            data = self._content.decode(raw)
        except httpx.DecodingError:
            return StreamEnd.error(UNDECODABLE)
        return self._feed(data)

    def finish(self) -> StreamEnd:
        """The body ended: what the content decoder still held, then the parser's verdict."""
        try:
            end = self._feed(self._content.flush())
        except httpx.DecodingError:
            end = StreamEnd.error(UNDECODABLE)
        return end if end is not None else self._parser.finish()

    def _feed(self, data: bytes) -> StreamEnd | None:
        try:
            for event in self._events.feed(data):
                if (end := self._parser.feed(event)) is not None:
                    return end
        except EventStreamTooLarge as exc:
            return StreamEnd.error(invalid_response_message(str(exc)))
        return None


async def read_capped(response: httpx.Response, secrets: tuple[str, ...]) -> tuple[str, str | None]:
    """Up to ``MAX_ERROR_BODY_BYTES`` of a body as text, secrets redacted, and what
    went wrong reading it (``None`` if nothing did).

    A body cut at the limit or by a lost connection may end in the start of a key; that
    start is redacted too (``redact`` with ``cut=True``).
    """
    content = content_decoder(response)
    chunks: list[bytes] = []
    size = 0
    problem: str | None = None
    try:
        with trio.CancelScope() as reading:  # stop early as _read_events does
            async for raw in response.aiter_raw():
                if size >= MAX_ERROR_BODY_BYTES or problem is not None:
                    continue  # the cancellation lands at the next checkpoint
                try:
                    chunk = content.decode(raw)
                except httpx.DecodingError:  # content-encoding: gzip, and something else
                    problem = "the error body could not be decoded"
                    reading.cancel(reason="error body undecodable")
                    continue
                chunks.append(chunk)
                size += len(chunk)
                if size >= MAX_ERROR_BODY_BYTES:
                    reading.cancel(reason="error body long enough")
    except httpx.TransportError:
        problem = "the connection was lost while reading the error body"
    if problem is None and size < MAX_ERROR_BODY_BYTES:
        try:
            chunks.append(content.flush())
        except httpx.DecodingError:
            problem = "the error body could not be decoded"
    data = b"".join(chunks)[:MAX_ERROR_BODY_BYTES]
    try:
        text = data.decode(response.encoding or "utf-8", errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    cut = problem is not None or size >= MAX_ERROR_BODY_BYTES
    return redact(text, *secrets, cut=cut), problem


async def error_response_end(
    response: httpx.Response,
    secrets: tuple[str, ...],
    wording: ErrorWording = http_error_message,
) -> StreamEnd:
    """A non-2xx response as the failed ``StreamEnd``: the text the policy reads (R-52,
    ``wording``'s) and the response as data beside it (``ProviderFailure``, R-64)."""
    body, problem = await read_capped(response, secrets)
    content_type = response.headers.get("content-type", "")
    if problem is not None and not body.strip():
        body, content_type = f"({problem})", "text/plain"
    text = wording(
        response.status_code,
        response.reason_phrase,
        body,
        response.headers,
        content_type=content_type,
        secrets=secrets,
    )
    failure = http_failure(
        response.status_code,
        response.headers,
        body,
        clean=lambda value: redact(value, *secrets),
        hint=parse_retry_after_ms,
    )
    return StreamEnd.error(text, failure)


async def not_a_stream_message(
    response: httpx.Response,
    content_type: str,
    secrets: tuple[str, ...],
    wording: ErrorWording = http_error_message,
) -> str:
    """A 2xx that is not an event stream: a JSON error in disguise, or the wrong server."""
    body, _ = await read_capped(response, secrets)
    try:
        data = loads(body) if "json" in content_type.lower() else None
    except ValueError:  # not JSON, or too deep for the parser
        data = None
    if isinstance(data, list) and len(data) == 1:  # Gemini wraps its error in a list
        data = data[0]
    if isinstance(data, Mapping) and data.get("error"):
        return wording(
            response.status_code, response.reason_phrase, body, response.headers, secrets=secrets
        )
    kind = content_type.split(";")[0].strip()
    logger.debug("expected an event stream, got %s: %r", kind, excerpt(body, 200, secrets=secrets))
    return invalid_response_message(f"expected an event stream, got {kind!r}")
