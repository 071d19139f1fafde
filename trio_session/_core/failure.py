"""A failed request as data: the response's status, hint, ids and error code (R-64).

The retry policy reads only a failure's text, ``AssistantMessage.error_message`` (R-52),
and that text stays exactly as it is. An application wants more than text: the HTTP
status without parsing it back, the request id to quote to the provider's support, the
server's wait hint in milliseconds, the error's ``type`` and ``code`` from its body.
``ProviderFailure`` holds them, built once by the HTTP adapter from the response it
had in hand, and rides on the failed reply as ``AssistantMessage.failure``.

It is ours and it stays in memory: no event, RPC message or session file carries it
(pi's wire shapes have no such field), so a reply read back from a file has none.

Pure: values and a function of a response's parts, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .classes import frozen
from .json_bounds import loads

#: The response headers kept, lower-cased, in this order: the retry hints the error
#: text also shows (R-18), the rate-limit counters, and the request ids.
KEPT_HEADERS: tuple[str, ...] = (
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-reset-ms",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-request-id",
    "request-id",
    "x-amzn-requestid",
)

#: The headers a request id is read from, first found wins; then the body's ``request_id``.
REQUEST_ID_HEADERS: tuple[str, ...] = ("x-request-id", "request-id", "x-amzn-requestid")

#: The longest value kept of a header, a request id, or an error's type or code.
MAX_VALUE_CHARS = 200


def _frozen_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


@frozen
class ProviderFailure:
    """What a failed HTTP response said, as data (R-64); its text is ``error_message``.

    Attributes:
        status: the HTTP status code.
        retry_after_ms: the server's wait hint in milliseconds, read from the kept
            headers by R-18's rule (the same number the policy reads from the text).
        request_id: the provider's id of the request (``x-request-id``,
            ``request-id``, ``x-amzn-requestid``, or the body's ``request_id``).
        error_type: the body's ``error.type`` (OpenAI, Anthropic) or ``error.status``
            (Gemini: ``"RESOURCE_EXHAUSTED"``).
        error_code: the body's ``error.code`` as text (``"insufficient_quota"``, ``"429"``).
        headers: the kept headers (``KEPT_HEADERS``) that were present, names lower-cased.
    """

    status: int | None = None
    retry_after_ms: int | None = None
    request_id: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_headers, hash=False)


def http_failure(
    status: int,
    headers: Mapping[str, str],
    body: str,
    *,
    clean: Callable[[str], str] = lambda text: text,
    hint: Callable[[str], int | None] = lambda text: None,
) -> ProviderFailure:
    """The ``ProviderFailure`` of an HTTP error response.

    Args:
        status: the response's status code.
        headers: its headers (any case).
        body: the start of its body, as text (a JSON error object, or anything).
        clean: applied to every text kept: the adapter's key redaction.
        hint: R-18's reader of ``name: value`` lines, for ``retry_after_ms``.

    Returns:
        The failure; fields the response did not have are ``None``.
    """
    lower = {str(name).lower(): str(value) for name, value in headers.items()}
    kept = {
        name: clean(lower[name].strip())[:MAX_VALUE_CHARS]
        for name in KEPT_HEADERS
        if lower.get(name, "").strip()
    }
    error, body_request_id = _body_error(body)
    request_id = next((kept[name] for name in REQUEST_ID_HEADERS if name in kept), None)
    if request_id is None and body_request_id is not None:
        request_id = clean(body_request_id)[:MAX_VALUE_CHARS]
    kind = _text(error.get("type")) or _text(error.get("status"))
    code = _text(error.get("code"))
    lines = "\n".join(f"{name}: {value}" for name, value in kept.items())
    return ProviderFailure(
        status=status,
        retry_after_ms=hint(lines) if lines else None,
        request_id=request_id,
        error_type=clean(kind)[:MAX_VALUE_CHARS] if kind else None,
        error_code=clean(code)[:MAX_VALUE_CHARS] if code else None,
        headers=kept,
    )


def _body_error(body: str) -> tuple[Mapping[str, Any], str | None]:
    """The body's ``error`` object (empty if none) and its top-level ``request_id``."""
    try:
        data = loads(body) if body.lstrip().startswith(("{", "[")) else None
    except ValueError:  # not JSON, or too deep for the parser
        data = None
    if isinstance(data, list) and len(data) == 1:  # Gemini wraps its error in a list
        data = data[0]
    if not isinstance(data, Mapping):
        return {}, None
    error = data.get("error")
    request_id = data.get("request_id")
    return (
        error if isinstance(error, Mapping) else {},
        request_id if isinstance(request_id, str) and request_id else None,
    )


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int):
        return str(value)
    return None
