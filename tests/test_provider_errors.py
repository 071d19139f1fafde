"""The pure half of the HTTP adapters: error text mapping (R-52) and SSE decoding."""

from __future__ import annotations

import pytest

from trio_session import parse_retry_after_ms
from trio_session.providers._error_text import (
    event_error_message,
    excerpt,
    html_text,
    http_error_message,
    redact,
)
from trio_session.providers._sse import ServerSentEvent, SSEDecoder

from .provider_support import decision


def decode(lines: list[str]) -> list[ServerSentEvent]:
    """Feed lines to a fresh decoder; return the events dispatched."""
    decoder = SSEDecoder()
    return [e for line in lines if (e := decoder.line(line)) is not None]


# -- SSE ----------------------------------------------------------------------------------


def test_sse_fields_comments_and_multiline_data() -> None:
    """Comments are skipped, data lines join with newlines, one leading space is dropped."""
    events = decode(
        [": keep-alive", "event: delta", "data:a", "data:  b", "id: 7", "retry: 10", "", ""]
    )
    assert events == [ServerSentEvent(event="delta", data="a\n b", id="7")]


def test_sse_event_without_data_is_not_dispatched() -> None:
    """An event name with no data resets at the blank line; the next event is "message"."""
    assert decode(["event: ping", "", "data: x", ""]) == [ServerSentEvent(data="x")]


def test_sse_unterminated_event_is_dropped() -> None:
    """An event cut before its blank line never comes out (a cut stream is not whole)."""
    assert decode(['data: {"a": 1}', "", 'data: {"b"']) == [ServerSentEvent(data='{"a": 1}')]


# -- HTTP error text ------------------------------------------------------------------------


def test_all_hint_headers_in_order() -> None:
    """R-18: every hint header on its own line; retry-after-ms wins in the parser."""
    text = http_error_message(
        429,
        "Too Many Requests",
        "slow down",
        {
            "X-RateLimit-Reset": "30",
            "Retry-After": "2",
            "retry-after-ms": "1500",
            "x-ratelimit-reset-ms": "900",
            "content-type": "text/plain",
        },
    )
    assert text == (
        "429 Too Many Requests: slow down\nretry-after-ms: 1500\nretry-after: 2"
        "\nx-ratelimit-reset-ms: 900\nx-ratelimit-reset: 30"
    )
    assert parse_retry_after_ms(text) == 1500


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_no_hint_lines_where_waiting_cannot_help(status: int) -> None:
    """R-5: a rate-limit header name must not make a 4xx look retryable."""
    text = http_error_message(status, "", "nope", {"x-ratelimit-reset": "3", "retry-after": "1"})
    assert "\n" not in text
    assert decision(text) == "none"


def test_long_plain_body_is_cut() -> None:
    """A long text body is flattened and cut to 300 characters with an ellipsis."""
    text = http_error_message(502, "Bad Gateway", "word\n" * 200)
    assert text == "502 Bad Gateway: " + ("word " * 59) + "word…"
    assert len(text) == len("502 Bad Gateway: ") + 300


def test_html_scripts_and_styles_are_dropped() -> None:
    """Tags, scripts, styles and comments are stripped; entities are decoded."""
    page = (
        "<html><head><title>Oops &amp; sorry</title><script>var x = 1;</script></head>"
        "<body><!-- hidden --><style>p{}</style><p>Try&nbsp;again</p></body></html>"
    )
    assert html_text(page) == "Oops & sorry Try again"  # &nbsp; is whitespace too
    assert excerpt(" a\n\tb ") == "a b"


def test_unknown_json_shape_is_kept_compact() -> None:
    """A JSON body with no known error field is shown as it came, on one line."""
    text = http_error_message(500, "Internal Server Error", '{\n  "oops": true\n}')
    assert text == '500 Internal Server Error: { "oops": true }'


def test_fastapi_detail() -> None:
    """FastAPI servers say ``{"detail": …}``."""
    assert http_error_message(404, "Not Found", '{"detail": "No model qwen-9"}') == (
        "404 Not Found: No model qwen-9"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"detail": "Not Found"}', "404 Not Found"),
        ('{"error": {"message": "not found", "type": "invalid"}}', "404 Not Found (invalid)"),
        ('{"error": "404 Not Found: no route"}', "404 Not Found: no route"),
        ("Not Found.", "404 Not Found"),
        ("Not Founder", "404 Not Found: Not Founder"),
        ('{"detail": "Model Not Found"}', "404 Not Found: Model Not Found"),
    ],
)
def test_a_message_repeating_the_status_is_not_said_twice(body: str, expected: str) -> None:
    """R-52: the status stays in the text, but a message that repeats its phrase is cut."""
    assert http_error_message(404, "Not Found", body) == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, "529 overloaded_error: Overloaded"),
        ({"type": "api_error", "message": "Internal error"}, "500 api_error: Internal error"),
        ({"type": "server_error", "message": "Sorry"}, "500 server_error: Sorry"),
        (
            {"message": "Provider returned error", "code": 502},
            "502 Bad Gateway: Provider returned error",
        ),
        ({"type": "weird_error", "message": "Hm"}, "weird_error: Hm"),
        ({}, "error event without a message"),
    ],
)
def test_error_event_text(error: dict[str, object], expected: str) -> None:
    """An in-stream error gets the status its API documents for the type (or its code)."""
    assert event_error_message(error) == expected


def test_redact_every_form_of_the_key() -> None:
    """The key, its stripped form and its escaped form are all redacted; short keys are not."""
    key = "sk-abc\n"
    assert redact("got sk-abc\n and 'sk-abc\\n' and sk-abc", key) == (
        "got [redacted] and '[redacted]' and [redacted]"
    )
    assert redact("abc", "ab") == "abc"
    assert redact("abc", None) == "abc"
