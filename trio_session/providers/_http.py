"""What the HTTP adapters share: the client, one streamed request, failures as text.

``HttpProvider`` does the HTTP half of a provider; a subclass says what to
send (URL, headers, JSON body) and how to read the events that come back (a
``StreamParser``):

```text
HttpProvider.stream(request, sink)
└── move_on_after(attempt_timeout)                  the whole attempt, 600 s by default
    ├── body → JSON → UTF-8 bytes                   lone surrogates sent as U+FFFD
    ├── client.send(POST url, body, stream=True)   the response closed on every exit,
    │   │                                          cancellation included; the body
    │   │                                          is a plain iterator (_request_body)
    │   ├── any status: rate-limit headers → read_rate_limits() → StreamEnd.rate_limits
    │   ├── non-2xx  → read ≤ 64 KiB of body → http_error_message()   "503 …: …"
    │   ├── 2xx but not text/event-stream     → "Invalid response from server: …"
    │   └── bytes → SSEDecoder (lines ≤ 8 MiB) → parser.feed(event) → StreamEnd, or
    │         None to go on; end of body → parser.finish()  no end marker ⇒ "…cut…"
    ├── httpx exceptions                    → "Connection error: …" texts
    ├── any other exception (a bug)         → "Request failed: … raised <type>"
    └── the API key is redacted before any text is cut, and from every error text
```

Two clocks bound an attempt. httpx's read timeout (``timeout``, 120 s by default) is the
longest *silence*: no byte for that long and the attempt fails. It cannot catch a server
that keeps talking without answering — SSE keep-alive comments forever, an error body
trickled a byte at a time — so a trio cancel scope puts a deadline on the attempt as a
whole (``attempt_timeout``, 600 s by default): connecting, the headers, the whole stream
and any error body. Both end as ``"Connection error: timed out after …"``, retried by R-5.

Stopping early — at the end event, or once enough of an error body is read — is done
by cancelling a scope around the read loop, not by ``break``: httpx's body iterators
are async generators nested several deep, and leaving the outer one abandons the inner
ones to the garbage collector (trio warns). A cancellation instead unwinds every level
from the innermost read, and httpcore closes the connection on the way out.

Nothing here retries (R-28a): the owned client's transports have ``retries=0`` (the
direct one, and one per proxy of the environment: ``HTTPS_PROXY``, ``NO_PROXY``, see
``_proxy``), and redirects are not followed: a 3xx is an error naming its ``location``.
Cancellation passes straight through; the response is closed on every way out, and with
it the connection, so the server sees the disconnect at once. The body goes out through
``BytesBody`` rather than httpx's own async generator, so a cancellation mid-send leaves
nothing for the garbage collector to finish (``_request_body``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias

import attrs
import trio

from .._core.classes import define
from .._core.rate_headers import RateLimitHeaders, read_rate_limits
from .._core.text import valid_unicode
from ._base import Model, ProviderRequest, StreamEnd, StreamSink
from ._error_text import (
    STREAM_CUT_MESSAGE,
    http_error_message,
    os_detail,
    redact,
)
from ._http_body import (
    UNDECODABLE,
    EventReader,
    StreamParser,
    content_decoder,
    error_response_end,
    not_a_stream_message,
)
from ._httpx import lazy_httpx
from ._pool import check_limits, make_client_off_loop, pool_stats
from ._proxy import proxy_secrets

if TYPE_CHECKING:
    import httpx

    from ._pool import LimitsValue
else:
    httpx = lazy_httpx(globals())

logger = logging.getLogger("trio_session")

#: Default timeouts: 10 s to connect; 120 s for everything else — the longest silence
#: between two pieces of a streamed answer (or before the first: a local server may
#: think for a minute over a long prompt), and for a request write or a free connection.
#: As httpx's ``(connect, read, write, pool)``; ``DEFAULT_TIMEOUT`` is the same as an
#: ``httpx.Timeout``, made when first asked for.
DEFAULT_TIMEOUTS = (10.0, 120.0, 120.0, 120.0)


if TYPE_CHECKING:
    DEFAULT_TIMEOUT: httpx.Timeout
else:

    def __getattr__(name: str) -> Any:
        if name == "DEFAULT_TIMEOUT":
            return httpx.Timeout(DEFAULT_TIMEOUTS)
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)


#: Default limit on one attempt as a whole, in seconds: connecting, the headers, the whole
#: streamed answer and any error body.
DEFAULT_ATTEMPT_TIMEOUT = 600.0


if TYPE_CHECKING:
    #: What ``timeout`` may be given as: what ``httpx.Timeout`` takes.
    TimeoutValue: TypeAlias = (
        httpx.Timeout | float | tuple[float | None, float | None, float | None, float | None] | None
    )


def _as_timeout(value: TimeoutValue) -> httpx.Timeout:
    return value if isinstance(value, httpx.Timeout) else httpx.Timeout(value)


def _timeout_repr(value: TimeoutValue) -> str:
    return repr(_as_timeout(value))


def _check_attempt_timeout(_: object, __: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        msg = f"attempt_timeout must be a positive number of seconds or None, not {value!r}"
        raise ValueError(msg)


def json_body(body: Mapping[str, Any]) -> bytes:
    """``body`` as compact UTF-8 JSON (httpx's own form), never failing on bad text.

    Text UTF-8 cannot encode (lone surrogates) is sent with U+FFFD in its place, and a
    warning is logged — without the text.

    Raises:
        TypeError, ValueError: a value JSON cannot express (an object, NaN).
    """
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        logger.warning("the request had text that is not valid Unicode; sent U+FFFD instead")
        return valid_unicode(text).encode("utf-8")


@define(eq=False)
class _Attempt:
    """How far one attempt got: what a deadline message says it was doing."""

    url: httpx.URL | None = None
    response: httpx.Response | None = None
    timeout: httpx.Timeout | None = None  #: this attempt's httpx timeouts
    limit: float | None = None  #: this attempt's ``attempt_timeout``
    rate_limits: RateLimitHeaders | None = None  #: what the response's headers stated


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _where(url: httpx.URL) -> str:
    return f"{url.host}:{url.port}" if url.port else url.host


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable()


def unexpected_failure_message(exc: BaseException) -> str:
    """The ``errorMessage`` for an exception no rule expected: a bug, not a bad network.

    It names the exception type only — never its text, which may quote the request
    (``UnicodeEncodeError`` carries the whole body) or a key — and it is not retried:
    a bug does the same thing again. The log gets the type and where it was raised.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    logger.error("an HTTP provider raised %s%s", type(exc).__name__, where)
    return f"Request failed: the provider adapter raised {type(exc).__name__}"


@define(eq=False)
class HttpProvider:
    """Base of the HTTP adapters: owns the client, sends one request, maps failures.

    Args:
        api_key: used when the request carries none (``ProviderRequest.api_key`` wins).
        base_url: the API root; a ``Model`` with its own ``base_url`` overrides it.
            Omitted (or ``None``), it is the environment variable ``BASE_URL_VARIABLE``
            of the subclass (``OPENAI_BASE_URL`` …) if that is set and not blank, read
            once when the provider is made, else ``DEFAULT_BASE_URL``.
        name: the provider name credentials are keyed by (``"llama.cpp"`` for a local
            OpenAI-compatible server).
        timeout: an ``httpx.Timeout``, seconds for all phases, ``None`` for none, or
            httpx's tuple ``(connect, read, write, pool)``; applied to every request,
            also on a client passed in. Its read timeout is the longest silence
            allowed; the default is ``DEFAULT_TIMEOUT`` (120 s, 10 s to connect).
        attempt_timeout: seconds one attempt may take as a whole — connecting, the
            headers, the whole streamed answer, any error body — or ``None`` for no
            limit; 600 by default.
        limits: the connection pool of the client the provider makes: an
            ``httpx.Limits`` (``max_connections``, ``max_keepalive_connections``,
            ``keepalive_expiry``), or an int for ``max_connections`` (and as many kept
            alive, for 5 s); ``None`` is httpx's defaults (100, 20 kept alive for 5 s).
            Shared by every session using the provider: give it at least as many
            connections as requests may be in flight at once. Not with ``client=``.
        client: an ``httpx.AsyncClient`` to use; the caller keeps owning it and its
            pool (it must not retry on its own, R-28a). If omitted, one is created at
            first use — in a worker thread, so that importing httpx and building TLS
            contexts does not stall the event loop — with ``retries=0``, and closed
            by ``aclose``.
        headers: extra request headers.
        extra_body: extra top-level JSON fields (``temperature``, ``max_completion_tokens``).
    """

    DEFAULT_NAME: ClassVar[str] = "http"
    DEFAULT_BASE_URL: ClassVar[str] = "http://127.0.0.1"
    #: The environment variable that gives the base URL when none is passed.
    BASE_URL_VARIABLE: ClassVar[str | None] = None

    _api_key: str | None = attrs.field(default=None, alias="api_key", kw_only=True, repr=False)
    _base_url: str | None = attrs.field(default=None, alias="base_url", kw_only=True)
    _name: str | None = attrs.field(default=None, alias="name", kw_only=True)
    # Kept as given, and made an ``httpx.Timeout`` (importing httpx) when first used.
    _timeout: TimeoutValue = attrs.field(
        default=DEFAULT_TIMEOUTS, alias="timeout", kw_only=True, repr=_timeout_repr
    )
    _attempt_timeout: float | None = attrs.field(
        default=DEFAULT_ATTEMPT_TIMEOUT,
        validator=_check_attempt_timeout,
        alias="attempt_timeout",
        kw_only=True,
    )
    _limits: LimitsValue = attrs.field(
        default=None, validator=lambda _, __, v: check_limits(v), alias="limits", kw_only=True
    )
    _client: httpx.AsyncClient | None = attrs.field(
        default=None, alias="client", kw_only=True, repr=False
    )
    _extra_headers: Mapping[str, str] = attrs.field(factory=dict, alias="headers", kw_only=True)
    _extra_body: Mapping[str, Any] = attrs.field(factory=dict, alias="extra_body", kw_only=True)
    _owns_client: bool = attrs.field(init=False, default=False)
    _closed: bool = attrs.field(init=False, default=False)
    _in_flight: int = attrs.field(init=False, default=0)
    _making_client: trio.Lock | None = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self._client is not None and self._limits is not None:
            msg = "limits= is for the client the provider makes; a client= keeps its own pool"
            raise ValueError(msg)
        self._owns_client = self._client is None
        if self._base_url is None:
            self._base_url = env_base_url(type(self))

    @property
    def base_url_is_default(self) -> bool:
        """Whether requests go to ``DEFAULT_BASE_URL`` (no base URL given, none in the
        environment): the provider's own service, which needs a key."""
        return self.base_url == self.DEFAULT_BASE_URL.rstrip("/")

    # -- configuration -------------------------------------------------------------

    def secrets(self) -> tuple[str, ...]:
        """The secrets this provider holds — its own ``api_key``, if it was given one —
        for a session to keep out of its logs and spans (see ``Provider``).

        Returns:
            The provider's own key, or nothing.
        """
        return (self._api_key,) if self._api_key else ()

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
        """The timeouts applied to every request: connect, and the longest silence."""
        if not isinstance(self._timeout, httpx.Timeout):
            self._timeout = _as_timeout(self._timeout)
        timeout: httpx.Timeout = self._timeout
        return timeout

    @property
    def attempt_timeout(self) -> float | None:
        """Seconds one attempt may take as a whole, or ``None`` for no limit."""
        return self._attempt_timeout

    def model(self, id: str, *, context_window: int = 128_000) -> Model:
        """A ``Model`` at this provider, with its name and ``base_url``.

        Args:
            id: the model id.
            context_window: the model's context window, in tokens.
        """
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

    async def _get_client(self) -> httpx.AsyncClient:
        """The client; made at first use in a worker thread (see ``_pool``), once."""
        if self._client is None:
            if self._making_client is None:
                self._making_client = trio.Lock()
            async with self._making_client:
                if self._client is None:
                    self._client = await make_client_off_loop(self._timeout, self._limits)
        return self._client

    def pool_stats(self) -> dict[str, int]:
        """What the provider's connection pool holds now, for tests and health checks.

        Returns:
            ``requests_in_flight`` (``stream`` calls under way), ``requests_waiting``
            (for a free connection: the pool is full), ``connections`` (open or
            opening), ``connections_in_use`` and ``connections_idle`` (kept alive
            for the next request). All 0 before the first request; the connection
            counts are those of the client passed in, if one was.
        """
        return pool_stats(self._client, self._in_flight)

    def _request_timeout(self, request: ProviderRequest) -> httpx.Timeout:
        """This request's httpx timeouts: the provider's, with the request's
        ``idle_timeout`` as read, write and pool timeout if it has one."""
        timeout, idle = self.timeout, request.idle_timeout
        if idle is None:
            return timeout
        return httpx.Timeout(connect=timeout.connect, read=idle, write=idle, pool=idle)

    # -- what a subclass provides ---------------------------------------------------

    def _url(self, model: Model) -> str:
        raise NotImplementedError

    def _headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parser(self, sink: StreamSink, secrets: tuple[str, ...]) -> StreamParser:
        """A parser for one response; ``secrets`` are to be redacted from what it reports."""
        raise NotImplementedError

    def _root(self, model: Model) -> str:
        return (model.base_url or self.base_url).rstrip("/")

    def _http_error_message(
        self,
        status: int,
        reason: str = "",
        body: str = "",
        headers: Mapping[str, str] | None = None,
        *,
        content_type: str = "",
        secrets: tuple[str, ...] = (),
    ) -> str:
        """The ``errorMessage`` of an HTTP error response; ``http_error_message`` unless
        the API words its errors in its own shape (Gemini)."""
        return http_error_message(
            status, reason, body, headers, content_type=content_type, secrets=secrets
        )

    # -- one request -----------------------------------------------------------------

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Send ``request``, stream the answer into ``sink``, return how it ended.

        Never raises for a failed request: every failure is a ``StreamEnd`` whose
        ``error_message`` the retry policy classifies (R-52), with the API key redacted.
        An exception from a bug (here or in ``sink``) becomes a short message naming
        its type. Cancellation propagates, after the response has been closed.

        Args:
            request: the model, context, tools and key of the request.
            sink: where the streamed text, thinking, tool calls and usage go.
        """
        key = request.api_key or self._api_key
        secrets = (*(s for s in (request.api_key, self._api_key) if s), *proxy_secrets())
        limit = request.attempt_timeout
        limit = self._attempt_timeout if limit is None else limit
        attempt = _Attempt(limit=limit)
        if self._client is None and not self._closed:
            await self._get_client()  # outside the attempt's deadline
        self._in_flight += 1
        try:
            with trio.move_on_after(math.inf if limit is None else limit) as deadline:
                try:
                    end = await self._exchange(
                        request, sink, key.strip() if key else None, secrets, attempt
                    )
                except Exception as exc:  # a bug must not become a crash, or leak the body
                    end = StreamEnd.error(unexpected_failure_message(exc))
        finally:
            self._in_flight -= 1
        if deadline.cancelled_caught:
            end = StreamEnd.error(self._deadline_message(attempt, secrets))
        if end.error_message is not None:
            end = StreamEnd.error(redact(end.error_message, *secrets), end.failure)
        if attempt.rate_limits is not None:
            end = attrs.evolve(end, rate_limits=attempt.rate_limits)
        return end

    async def _exchange(
        self,
        request: ProviderRequest,
        sink: StreamSink,
        api_key: str | None,
        secrets: tuple[str, ...],
        attempt: _Attempt,
    ) -> StreamEnd:
        if self._closed:
            return StreamEnd.error(f"the {self.name} provider is closed; make a new one")
        if api_key is not None and not _header_safe(api_key):
            return StreamEnd.error(
                "Invalid API key: it contains characters that cannot be sent in an HTTP header"
            )
        try:
            content = json_body({**self._body(request), **self._extra_body})
        except (TypeError, ValueError) as exc:
            return StreamEnd.error(
                f"Invalid request: the request body cannot be sent as JSON ({type(exc).__name__})"
            )
        headers = {
            "accept": "text/event-stream",
            "content-type": "application/json",
            **self._headers(api_key),
            **self._extra_headers,
        }
        client = await self._get_client()  # before httpx is used: it imports httpx
        from ._request_body import BytesBody  # imports httpx itself: after the line above

        timeout = attempt.timeout = self._request_timeout(request)
        url = attempt.url = httpx.URL(self._url(request.model))
        try:
            sent = client.build_request(
                "POST", url, content=content, headers=headers, timeout=timeout
            )
            sent.stream = BytesBody(content)  # not httpx's async generator (see the module)
            response = await client.send(
                sent,
                stream=True,
                follow_redirects=False,  # also on a client passed in (R-28a)
            )
            try:
                attempt.response = response
                attempt.rate_limits = read_rate_limits(response.headers, time.time())
                if not response.is_success:
                    return await error_response_end(response, secrets, self._http_error_message)
                return await self._read_events(response, self._parser(sink, secrets), secrets)
            finally:
                await response.aclose()  # on every exit, cancellation included
        except httpx.InvalidURL as exc:
            return StreamEnd.error(f"Invalid request: {exc}")
        except httpx.HTTPError as exc:
            responded = attempt.response is not None
            return StreamEnd.error(
                self._failure_message(exc, url, responded=responded, timeout=timeout)
            )

    async def _read_events(
        self, response: httpx.Response, parser: StreamParser, secrets: tuple[str, ...]
    ) -> StreamEnd:
        content_type = response.headers.get("content-type", "")
        if content_type and "event-stream" not in content_type.lower():
            return StreamEnd.error(
                await not_a_stream_message(
                    response, content_type, secrets, self._http_error_message
                )
            )
        reader = EventReader(content_decoder(response), parser)
        end: StreamEnd | None = None
        failure: Exception | None = None
        with trio.CancelScope() as reading:
            async for raw in response.aiter_raw():
                if end is not None or failure is not None:
                    continue  # the cancellation below lands at the next checkpoint
                try:
                    end = reader.take(raw)
                except Exception as exc:  # a bug in a parser or the sink: out cleanly first
                    failure = exc
                if end is not None or failure is not None:
                    reading.cancel(reason="stream ended")
        if failure is not None:
            raise failure
        return end if end is not None else reader.finish()

    def _failure_message(
        self,
        exc: httpx.HTTPError,
        url: httpx.URL,
        *,
        responded: bool,
        timeout: httpx.Timeout | None = None,
    ) -> str:
        """The ``errorMessage`` for a request that failed below HTTP (R-52).

        Everything the network did wrong says ``Connection error`` so that R-5 retries
        it — timeouts included (the reference's SDK says "Request timed out", which R-5
        would not retry; a timeout is as transient as a reset). Mistakes in the request
        itself (a bad URL, a scheme httpx does not speak) say ``Invalid request``.
        """
        where = _where(url)
        if isinstance(exc, httpx.TimeoutException):
            return self._timeout_message(exc, where, responded=responded, timeout=timeout)
        if isinstance(exc, httpx.ConnectError):
            return f"Connection error: could not connect to {where} ({os_detail(exc)})"
        if isinstance(exc, httpx.ProxyError):
            return f"Connection error: proxy failed for {where} ({exc})"
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError)):
            return f"Invalid request: {exc}"
        if isinstance(exc, httpx.DecodingError):
            return UNDECODABLE
        if isinstance(exc, httpx.TransportError):  # read/write/close errors, remote protocol
            if responded:
                return STREAM_CUT_MESSAGE
            return (
                f"Connection error: {where} closed the connection before responding"
                f" ({os_detail(exc)})"
            )
        return f"Request failed: {type(exc).__name__}"

    def _timeout_message(
        self,
        exc: httpx.TimeoutException,
        where: str,
        *,
        responded: bool,
        timeout: httpx.Timeout | None = None,
    ) -> str:
        """``"Connection error: timed out after Ns <doing what>"``: which phase, which limit."""
        timeout = self.timeout if timeout is None else timeout
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

    def _deadline_message(self, attempt: _Attempt, secrets: tuple[str, ...]) -> str:
        """The ``errorMessage`` for an attempt stopped by ``attempt_timeout``: retried (R-5).

        ``"Connection error: timed out after 600s (the limit for one attempt) <doing
        what>"``; cut in an error body, the status and its retry hints are kept in front.
        """
        timed_out = f"Connection error: timed out after {_seconds(attempt.limit)}s"
        timed_out += " (the limit for one attempt)"
        where = _where(attempt.url) if attempt.url is not None else "the server"
        response = attempt.response
        if response is None:
            return f"{timed_out} waiting for {where} to respond"
        if response.is_success:
            return f"{timed_out} reading the response from {where}"
        return http_error_message(
            response.status_code,
            response.reason_phrase,
            f"{timed_out} reading the error body",
            response.headers,
            content_type="text/plain",
            secrets=secrets,
        )


def env_base_url(cls: type[HttpProvider], environ: Mapping[str, str] = os.environ) -> str | None:
    """The base URL ``cls.BASE_URL_VARIABLE`` holds, stripped; ``None`` if unset or blank."""
    variable = cls.BASE_URL_VARIABLE
    value = environ.get(variable, "").strip() if variable else ""
    return value or None
