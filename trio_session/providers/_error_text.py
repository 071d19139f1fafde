"""Failures as text: the one ``error_message`` an HTTP adapter ends a failed request with.

Status, the server's own message, retry-hint headers, an excerpt of a body that was not
JSON: pure functions shared by the HTTP adapters (``._http``, ``._openai``,
``._anthropic``, ``._gemini``), with the API keys in play redacted before any cut.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._core.json_bounds import MAX_JSON_DEPTH, json_depth, loads
from .._retry.classify import USAGE_LIMIT_PATTERN

# -- failures as text (R-52) ------------------------------------------------------------
#
# Every HTTP adapter ends a failed request with one of these texts; the retry policy reads
# nothing else. Their shape, and what the reference classifier makes of it:
#
#   "<status> <reason>: <server's message> (<code or type>)\n<hint-header>: <value>…"
#   "<status> status code (no body)"                        empty error body (R-7 no-body rule)
#   "Connection error: …"                                   network failures → retry
#   "Connection error: stream ended before the response was complete"   a cut stream
#   "<status> <error type>: <message>"                      an error event inside the stream
#   "Invalid response from server: …"                       protocol garbage → no retry
#
# Everything here is pure: no I/O, no httpx. Each function that shortens a text takes the
# ``secrets`` (API keys) in play and redacts them *before* cutting: a key that straddles a
# cut would otherwise lose only its tail, and the later whole-message redaction would not
# recognise what is left of it.

#: Response headers carrying a retry hint, as ``name: value`` lines in this order (R-18).
RETRY_HINT_HEADERS: tuple[str, ...] = (
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-reset-ms",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
)

#: 4xx statuses where waiting may help; these, 5xx and usage limits get hint lines.
_WAITABLE_STATUSES = frozenset({408, 409, 425, 429})

#: The HTTP status each API documents for an error ``type`` (Anthropic's list, plus
#: OpenAI's ``server_error``), used when an error arrives inside a 200 stream.
ERROR_TYPE_STATUS: Mapping[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

#: A stream that stopped before its end marker (reset, EOF, incomplete chunked body).
STREAM_CUT_MESSAGE = "Connection error: stream ended before the response was complete"

#: Longest server message kept from a JSON error body, and from a text or HTML body.
MAX_MESSAGE_CHARS = 1000
MAX_EXCERPT_CHARS = 300
_MAX_HINT_CHARS = 100

_REDACTED = "[redacted]"
_MIN_SECRET_CHARS = 4
_HTML_DROP = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_HTML_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")


def status_reason(status: int, reason: str = "") -> str:
    """``"429 Too Many Requests"``: the status and the server's reason phrase.

    An empty reason (HTTP/1.1 allows it) is filled from ``http.HTTPStatus``; an
    unknown status without a reason is just the number.
    """
    reason = " ".join(reason.split())
    if not reason:
        from http import HTTPStatus  # only now: its enum costs an import a session may not need

        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            return str(status)
    return f"{status} {reason}"


def excerpt(
    text: str, limit: int = MAX_EXCERPT_CHARS, *, secrets: Iterable[str | None] = ()
) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis.

    ``secrets`` are redacted first, so no part of one survives the cut.
    """
    flat = " ".join(redact(text, *secrets).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _tag_free(markup: str) -> str:
    import html  # only for an HTML error page: its entity table costs an import

    return " ".join(html.unescape(_HTML_TAG.sub(" ", markup)).split())


def html_text(markup: str) -> str:
    """The readable text of an HTML page: its title, then its body text, tags stripped.

    The title is left out when the body already says it (nginx pages repeat it).
    """
    title_match = _HTML_TITLE.search(markup)
    title = _tag_free(title_match.group(1)) if title_match else ""
    body = _tag_free(_HTML_DROP.sub(" ", markup))
    if title and title not in body:
        return f"{title} {body}".strip()
    return body


def _text_of(value: Any) -> str:
    """A JSON value as message text: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def error_detail(error: Mapping[str, Any], *, secrets: Iterable[str | None] = ()) -> str:
    """``"<message> (<code or type>)"`` from an ``{"message", "type", "code"}`` object.

    The tag is the string ``code`` if there is one, else ``type``; it is left out when
    the message already contains it. OpenRouter's upstream text (``metadata.raw``) is
    appended when it says more than the message.
    """
    message = _text_of(error.get("message", "")).strip()
    code, kind = error.get("code"), error.get("type")
    tag = code if isinstance(code, str) and code else kind if isinstance(kind, str) else ""
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if raw is not None:
        upstream = body_detail(_text_of(raw), secrets=secrets)
        if upstream and upstream not in message:
            message = f"{message}: {upstream}" if message else upstream
    if not message:
        return tag
    if tag and tag.lower() not in message.lower():
        return f"{message} ({tag})"
    return message


def _json_detail(data: Any, secrets: Iterable[str | None]) -> str | None:
    """The server's message from a JSON error body of any common shape, or ``None``."""
    if not isinstance(data, Mapping):
        return None
    error = data.get("error")
    if isinstance(error, str) and error:  # Ollama: {"error": "model … not found"}
        return error
    if isinstance(error, Mapping):  # OpenAI, Anthropic, OpenRouter, llama.cpp, vLLM
        return error_detail(error, secrets=secrets) or None
    if "message" in data:  # older vLLM: {"object": "error", "message": …, "type": …}
        return error_detail(data, secrets=secrets) or None
    detail = data.get("detail")  # FastAPI-based servers
    if detail:
        return _text_of(detail)
    return None


def body_detail(body: str, content_type: str = "", *, secrets: Iterable[str | None] = ()) -> str:
    """What an error body says, in one line: the JSON message, or a text/HTML excerpt.

    ``secrets`` are redacted before the excerpt is cut (after JSON and HTML decoding,
    which may have unescaped them).
    """
    secrets = tuple(secrets)
    stripped = body.strip()
    if not stripped:
        return ""
    if stripped[0] in "{[":
        try:
            data = loads(stripped)
        except ValueError:
            pass
        else:
            if json_depth(data) > MAX_JSON_DEPTH:  # its message is read as text instead
                return excerpt(stripped, secrets=secrets)
            detail = _json_detail(data, secrets)
            text = detail if detail is not None else stripped
            return excerpt(text, MAX_MESSAGE_CHARS, secrets=secrets)
    if "html" in content_type.lower() or stripped.startswith("<"):
        return excerpt(html_text(stripped), secrets=secrets)
    return excerpt(stripped, secrets=secrets)


def hint_lines(headers: Mapping[str, str], *, secrets: Iterable[str | None] = ()) -> list[str]:
    """``name: value`` lines for the retry-hint headers present (R-18's input form)."""
    secrets = tuple(secrets)
    lower = {name.lower(): value for name, value in headers.items()}
    lines = []
    for name in RETRY_HINT_HEADERS:
        value = lower.get(name)
        if value is not None and value.strip():
            lines.append(f"{name}: {excerpt(value, _MAX_HINT_CHARS, secrets=secrets)}")
    return lines


def http_error_message(
    status: int,
    reason: str = "",
    body: str = "",
    headers: Mapping[str, str] | None = None,
    *,
    content_type: str = "",
    secrets: Iterable[str | None] = (),
) -> str:
    """The ``errorMessage`` for an HTTP error response (R-52).

    ``"<status> <reason>: <server's message>"``, then one ``name: value`` line per
    retry-hint header. A message that begins with the status or its reason phrase does
    not say it twice: ``{"message": "Service Unavailable", "type": "server_error"}``
    gives ``"503 Service Unavailable (server_error)"``. An empty body gives
    ``"<status> status code (no body)"``, the reference's wording, which R-7 reads as an
    overflow for 400 and 413.

    Hint lines are added only where waiting may help — 408, 409, 425, 429, 5xx — or
    when the message is a usage limit (R-17): the header name ``x-ratelimit-reset``
    alone matches R-5's ``rate.?limit``, and must not make a 401 retryable.
    A redirect names its ``location``; it is never followed (R-28a). ``secrets`` are
    redacted before any part of the body or a header is cut short.
    """
    headers = headers or {}
    secrets = tuple(secrets)
    detail = body_detail(body, content_type, secrets=secrets)
    line = status_reason(status, reason)
    if detail:
        rest = _unrepeated(detail, line)
        if rest == detail or not rest.startswith("("):
            text = f"{line}: {rest}" if rest else line
        else:  # what is left of "Service Unavailable (server_error)"
            text = f"{line} {rest}"
    else:
        text = f"{status} status code (no body)"
    lines = [text]
    if status in _WAITABLE_STATUSES or status >= 500 or USAGE_LIMIT_PATTERN.search(detail):
        lines.extend(hint_lines(headers, secrets=secrets))
    if 300 <= status < 400:
        location = {k.lower(): v for k, v in headers.items()}.get("location")
        if location:
            lines.append(f"location: {excerpt(location, MAX_EXCERPT_CHARS, secrets=secrets)}")
    return "\n".join(lines)


def _unrepeated(detail: str, line: str) -> str:
    """``detail`` without a leading copy of the status ``line`` or of its reason phrase.

    ``"Service Unavailable (server_error)"`` after ``"503 Service Unavailable"`` is
    ``"(server_error)"``; a detail that only repeats the status is ``""``.
    """
    _, _, phrase = line.partition(" ")
    for prefix in (line, phrase):
        if prefix and detail.lower().startswith(prefix.lower()):
            rest = detail[len(prefix) :]
            if not rest or not rest[0].isalnum():
                return rest.lstrip(" :.,;-")
    return detail


def event_error_message(
    error: Mapping[str, Any], status: int | None = None, *, secrets: Iterable[str | None] = ()
) -> str:
    """The ``errorMessage`` for an error sent *inside* a stream (an SSE ``error`` event).

    ``"529 overloaded_error: Overloaded"``: the status is the one given, else a numeric
    ``code`` (OpenRouter), else the one the API documents for the error ``type``
    (``ERROR_TYPE_STATUS``); then the type, then the message, kept to one line of
    at most ``MAX_MESSAGE_CHARS`` (``secrets`` redacted first).
    """
    secrets = tuple(secrets)
    kind = error.get("type")
    kind = kind if isinstance(kind, str) else ""
    code = error.get("code")
    if status is None and isinstance(code, int) and 100 <= code <= 599:
        status = code
    if status is None:
        status = ERROR_TYPE_STATUS.get(kind)
    message = error_detail({**error, "type": None} if kind else error, secrets=secrets)
    message = excerpt(message, MAX_MESSAGE_CHARS, secrets=secrets)
    if kind:
        label = f"{status} {kind}" if status else kind
    else:
        label = status_reason(status) if status else ""
    if not message:
        return label or "error event without a message"
    return f"{label}: {message}" if label else message


def invalid_response_message(what: str) -> str:
    """``"Invalid response from server: <what>"`` — protocol garbage, never retried.

    It carries no server text on purpose: a digit run like ``500`` in an excerpt would
    flip the reference classifier (R-5) at random.
    """
    return f"Invalid response from server: {what}"


#: Credentials a server may quote whoever's they are: a URL's password
#: (``scheme://user:PASSWORD@``), an ``Authorization`` or ``Proxy-Authorization``
#: header's value (as a header, or a JSON or form field) after its scheme, and a
#: ``Basic``/``Bearer`` credential standing alone. A value without a scheme, and a
#: credential standing alone, must look like one — 8 characters or more with a digit or
#: one of ``+/=`` — so that "authorization: invalid api key" and "Basic authentication"
#: keep their words (the classifier reads them).
_CREDENTIAL = r"(?=[A-Za-z0-9._~+/-]*[0-9+/=])[A-Za-z0-9._~+/-]{8,}=*"
_HEADER = r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
_QUOTED_CREDENTIALS = (
    (re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:)[^\s?#@]+@"), r"\1[redacted]@"),
    (
        re.compile(_HEADER + r"(?:basic|bearer|digest|negotiate|token)\s+[A-Za-z0-9._~+/=-]+"),
        r"\1[redacted]",
    ),
    (re.compile(_HEADER + _CREDENTIAL), r"\1[redacted]"),
    (re.compile(r"(?i)\b(basic|bearer)\s+" + _CREDENTIAL), r"\1 [redacted]"),
)


def redact(text: str, *secrets: str | None, cut: bool = False) -> str:
    """``text`` with every occurrence of each secret (and its escaped form) replaced, and
    every credential a server quotes (``_QUOTED_CREDENTIALS``), known or not.

    Forms shorter than 4 characters are left alone. With ``cut=True`` the text was cut
    off at its end (the rest was never read), so a start of a secret at its very end —
    4 characters or more — is replaced too. The forms a proxy's password takes on the
    wire (percent-decoded, base64) are secrets of their own (``proxy_secrets``).
    """
    for pattern, replacement in _QUOTED_CREDENTIALS:
        text = pattern.sub(replacement, text)
    forms = sorted(
        {
            form
            for secret in secrets
            if secret
            for form in (secret, secret.strip(), repr(secret)[1:-1])
            if len(form) >= _MIN_SECRET_CHARS
        },
        key=len,
        reverse=True,
    )
    for form in forms:
        text = text.replace(form, _REDACTED)
    if cut:
        for form in forms:
            for size in range(min(len(form) - 1, len(text)), _MIN_SECRET_CHARS - 1, -1):
                if text.endswith(form[:size]):
                    return text[:-size] + _REDACTED
    return text


def os_detail(exc: BaseException) -> str:
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
