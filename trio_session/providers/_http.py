"""What the HTTP adapters share: the client, one streamed request, failures as text.

:class:`HttpProvider` does the HTTP half of a provider; a subclass says what to
send (URL, headers, JSON body) and how to read the events that come back (a
:class:`StreamParser`)::

    HttpProvider.stream(request, sink)
    ├── async with client.stream("POST", url, json=body)   closed on every exit,
    │   │                                                   cancellation included
    │   ├── non-2xx  → read ≤ 64 KiB of body → http_error_message()   "503 …: …"
    │   ├── 2xx but not text/event-stream     → "Invalid response from server: …"
    │   └── lines → SSEDecoder → parser.feed(event) → StreamEnd, or None to go on
    │         end of body → parser.finish()   no end marker ⇒ "…stream ended before…"
    ├── httpx exceptions                       → "Connection error: …" texts
    └── the API key is scrubbed from any error text that comes out

Stopping early — at the end event, or once enough of an error body is read — is done
by cancelling a scope around the read loop, not by ``break``: httpx's body iterators
are async generators nested five deep, and leaving the outer one abandons the inner
ones to the garbage collector (trio warns). A cancellation instead unwinds every level
from the innermost read, and httpcore closes the connection on the way out.

Nothing here retries (R-28a): the owned client's transport has ``retries=0`` and
redirects are not followed — a 3xx is an error naming its ``location``. Cancellation
passes straight through; leaving ``client.stream()`` closes the response, and with it
the connection, so the server sees the disconnect at once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, Self

import attrs
import httpx
import trio

from ._base import (
    STREAM_CUT_MESSAGE,
    Model,
    ProviderRequest,
    StreamEnd,
    StreamSink,
    http_error_message,
    invalid_response_message,
    redact,
    status_reason,
)
from ._sse import ServerSentEvent, SSEDecoder

logger = logging.getLogger("trio_session")

#: Default timeouts: 10 s to connect; 600 s for everything else, including the
#: longest silence between two pieces of a streamed answer (a local server may
#: think for minutes over a long prompt before its first byte).
DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)

#: The most of an error body that is read; the rest is dropped with the connection.
MAX_ERROR_BODY_BYTES = 64 * 1024


def _as_timeout(value: httpx.Timeout | float | None) -> httpx.Timeout:
    return value if isinstance(value, httpx.Timeout) else httpx.Timeout(value)


class StreamParser(Protocol):
    """Reads one API's events into a sink; made fresh for every request."""

    def feed(self, event: ServerSentEvent) -> StreamEnd | None:
        """Take one event; return how the stream ended if this event ends it."""
        ...

    def finish(self) -> StreamEnd:
        """The body ended without an end event: how did the stream end?"""
        ...


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _where(url: httpx.URL) -> str:
    return f"{url.host}:{url.port}" if url.port else url.host


def _os_detail(exc: BaseException) -> str:
    """The most specific OS-level reason in an exception's chain ("Connection refused").

    trio reports a failed connect as ``OSError("all attempts … failed")`` caused by an
    exception group of the per-address errors; the first ``strerror`` found wins.
    """
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            # trio's strerror repeats the address; the errno's own text says it plainly.
            if isinstance(current.errno, int) and current.errno > 0:
                return os.strerror(current.errno)
            return current.strerror
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)
        queue.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return str(exc) or type(exc).__name__


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable()


@attrs.define(eq=False)
class HttpProvider:
    """Base of the HTTP adapters: owns the client, sends one request, maps failures.

    Args:
        api_key: used when the request carries none (``ProviderRequest.api_key`` wins).
        base_url: the API root; a :class:`Model` with its own ``base_url`` overrides it.
        name: the provider name credentials are keyed by (``"llama.cpp"`` for a local
            OpenAI-compatible server).
        timeout: an :class:`httpx.Timeout`, seconds for all phases, or ``None`` for
            none; applied to every request, also on a client passed in.
        client: an :class:`httpx.AsyncClient` to use; the caller keeps owning it (it
            must not retry on its own, R-28a). If omitted, one is created at first use
            with ``retries=0`` and closed by :meth:`aclose`.
        headers: extra request headers.
        extra_body: extra top-level JSON fields (``temperature``, ``max_completion_tokens``).
    """

    DEFAULT_NAME: ClassVar[str] = "http"
    DEFAULT_BASE_URL: ClassVar[str] = "http://127.0.0.1"

    _api_key: str | None = attrs.field(default=None, alias="api_key", kw_only=True, repr=False)
    _base_url: str | None = attrs.field(default=None, alias="base_url", kw_only=True)
    _name: str | None = attrs.field(default=None, alias="name", kw_only=True)
    _timeout: httpx.Timeout = attrs.field(
        default=DEFAULT_TIMEOUT, converter=_as_timeout, alias="timeout", kw_only=True
    )
    _client: httpx.AsyncClient | None = attrs.field(
        default=None, alias="client", kw_only=True, repr=False
    )
    _extra_headers: Mapping[str, str] = attrs.field(factory=dict, alias="headers", kw_only=True)
    _extra_body: Mapping[str, Any] = attrs.field(factory=dict, alias="extra_body", kw_only=True)
    _owns_client: bool = attrs.field(init=False, default=False)
    _closed: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        self._owns_client = self._client is None

    # -- configuration -------------------------------------------------------------

    @property
    def name(self) -> str:
        """The provider name credentials are keyed by."""
        return self._name or self.DEFAULT_NAME

    @property
    def base_url(self) -> str:
        """The API root requests go to (unless a model names its own)."""
        return (self._base_url or self.DEFAULT_BASE_URL).rstrip("/")

    @property
    def timeout(self) -> httpx.Timeout:
        """The timeouts applied to every request."""
        return self._timeout

    def model(self, id: str, *, context_window: int = 128_000) -> Model:
        """A :class:`Model` at this provider, with its name and ``base_url``."""
        return Model(
            id=id, provider=self.name, context_window=context_window, base_url=self.base_url
        )

    # -- lifetime ------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the client if this provider made it. Idempotent; no requests after."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(retries=0),
                timeout=self._timeout,
                follow_redirects=False,
            )
        return self._client

    # -- what a subclass provides ---------------------------------------------------

    def _url(self, model: Model) -> str:
        raise NotImplementedError

    def _headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parser(self, sink: StreamSink) -> StreamParser:
        raise NotImplementedError

    def _root(self, model: Model) -> str:
        return (model.base_url or self.base_url).rstrip("/")

    # -- one request -----------------------------------------------------------------

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Send ``request``, stream the answer into ``sink``, return how it ended.

        Never raises for a failed request: every failure is a :class:`StreamEnd` whose
        ``error_message`` the retry policy classifies (R-52). Cancellation propagates,
        after the response has been closed.
        """
        key = request.api_key or self._api_key
        end = await self._exchange(request, sink, key.strip() if key else None)
        if end.error_message is not None:
            text = end.error_message
            for secret in (request.api_key, self._api_key):
                text = redact(text, secret)
            end = StreamEnd.error(text)
        return end

    async def _exchange(
        self, request: ProviderRequest, sink: StreamSink, api_key: str | None
    ) -> StreamEnd:
        if self._closed:
            return StreamEnd.error(f"the {self.name} provider is closed; make a new one")
        if api_key is not None and not _header_safe(api_key):
            return StreamEnd.error(
                "Invalid API key: it contains characters that cannot be sent in an HTTP header"
            )
        headers = {"accept": "text/event-stream", **self._headers(api_key), **self._extra_headers}
        body = {**self._body(request), **self._extra_body}
        responded = False
        url = httpx.URL(self._url(request.model))
        try:
            client = self._get_client()
            async with client.stream(
                "POST",
                url,
                json=body,
                headers=headers,
                timeout=self._timeout,
                follow_redirects=False,  # also on a client passed in (R-28a)
            ) as response:
                responded = True
                if not response.is_success:
                    return StreamEnd.error(await _error_response_message(response))
                return await self._read_events(response, self._parser(sink))
        except httpx.InvalidURL as exc:
            return StreamEnd.error(f"Invalid request: {exc}")
        except httpx.HTTPError as exc:
            return StreamEnd.error(self._failure_message(exc, url, responded=responded))

    async def _read_events(self, response: httpx.Response, parser: StreamParser) -> StreamEnd:
        content_type = response.headers.get("content-type", "")
        if content_type and "event-stream" not in content_type.lower():
            return StreamEnd.error(await _not_a_stream_message(response, content_type))
        decoder = SSEDecoder()
        end: StreamEnd | None = None
        with trio.CancelScope() as reading:
            async for line in response.aiter_lines():
                if end is None and (event := decoder.line(line)) is not None:
                    end = parser.feed(event)
                    if end is not None:
                        reading.cancel(reason="stream ended")
        return end if end is not None else parser.finish()

    def _failure_message(self, exc: httpx.HTTPError, url: httpx.URL, *, responded: bool) -> str:
        """The ``errorMessage`` for a request that failed below HTTP (R-52).

        Everything the network did wrong says ``Connection error`` so that R-5 retries
        it — timeouts included (the reference's SDK says "Request timed out", which R-5
        would not retry; a timeout is as transient as a reset). Mistakes in the request
        itself (a bad URL, a scheme httpx does not speak) say ``Invalid request``.
        """
        where = _where(url)
        if isinstance(exc, httpx.TimeoutException):
            return self._timeout_message(exc, where, responded=responded)
        if isinstance(exc, httpx.ConnectError):
            return f"Connection error: could not connect to {where} ({_os_detail(exc)})"
        if isinstance(exc, httpx.ProxyError):
            return f"Connection error: proxy failed for {where} ({exc})"
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError)):
            return f"Invalid request: {exc}"
        if isinstance(exc, httpx.DecodingError):
            return invalid_response_message("the response body could not be decoded")
        if isinstance(exc, httpx.TransportError):  # read/write/close errors, remote protocol
            if responded:
                return STREAM_CUT_MESSAGE
            return (
                f"Connection error: {where} closed the connection before responding"
                f" ({_os_detail(exc)})"
            )
        return f"Request failed: {type(exc).__name__}: {exc}"

    def _timeout_message(self, exc: httpx.TimeoutException, where: str, *, responded: bool) -> str:
        """``"Connection error: timed out after Ns <doing what>"``: which phase, which limit."""
        timeout = self._timeout
        if isinstance(exc, httpx.ConnectTimeout):
            limit, doing = timeout.connect, f"connecting to {where}"
        elif isinstance(exc, httpx.WriteTimeout):
            limit, doing = timeout.write, f"sending the request to {where}"
        elif isinstance(exc, httpx.PoolTimeout):
            limit, doing = timeout.pool, f"waiting for a free connection to {where}"
        elif responded:
            limit, doing = timeout.read, f"waiting for more of the response from {where}"
        else:
            limit, doing = timeout.read, f"waiting for {where} to respond"
        return f"Connection error: timed out after {_seconds(limit)}s {doing}"


async def _read_capped(response: httpx.Response) -> tuple[str, bool]:
    """Up to :data:`MAX_ERROR_BODY_BYTES` of a body as text, and whether it was cut off."""
    chunks: list[bytes] = []
    size = 0
    cut = False
    try:
        with trio.CancelScope() as reading:  # stop early as _read_events does
            async for chunk in response.aiter_bytes():
                if size < MAX_ERROR_BODY_BYTES:
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= MAX_ERROR_BODY_BYTES:
                        reading.cancel(reason="error body long enough")
    except httpx.TransportError:
        cut = True
    data = b"".join(chunks)[:MAX_ERROR_BODY_BYTES]
    try:
        return data.decode(response.encoding or "utf-8", errors="replace"), cut
    except LookupError:
        return data.decode("utf-8", errors="replace"), cut


async def _error_response_message(response: httpx.Response) -> str:
    body, cut = await _read_capped(response)
    if cut and not body.strip():
        status = status_reason(response.status_code, response.reason_phrase)
        return f"{status}: (the connection was lost while reading the error body)"
    return http_error_message(
        response.status_code,
        response.reason_phrase,
        body,
        response.headers,
        content_type=response.headers.get("content-type", ""),
    )


async def _not_a_stream_message(response: httpx.Response, content_type: str) -> str:
    """A 2xx that is not an event stream: a JSON error in disguise, or the wrong server."""
    body, _ = await _read_capped(response)
    try:
        data = json.loads(body) if "json" in content_type.lower() else None
    except ValueError:
        data = None
    if isinstance(data, Mapping) and data.get("error"):
        return http_error_message(
            response.status_code, response.reason_phrase, body, response.headers
        )
    kind = content_type.split(";")[0].strip()
    logger.debug("expected an event stream, got %s: %.200r", kind, body)
    return invalid_response_message(f"expected an event stream, got {kind!r}")
