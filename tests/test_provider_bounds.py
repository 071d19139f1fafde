"""The HTTP adapters under hostile input and hostile servers (issue 11).

Against a real server on 127.0.0.1: text UTF-8 cannot carry is sent as U+FFFD, a bug
never puts the request or a key into ``errorMessage``, a key is redacted before any
text is cut, every wait has an end (idle timeout, attempt deadline), an undecodable
error body keeps its status, and an event stream line has a size limit.
"""

from __future__ import annotations

import gc
import logging
import math
import warnings
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_session import Model, ProviderRequest, StreamEnd, UserMessage, parse_retry_after_ms
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._error_text import excerpt, http_error_message, redact
from trio_session.providers._http import HttpProvider
from trio_session.providers._http_body import MAX_ERROR_BODY_BYTES
from trio_session.providers._openai import OpenAIProvider
from trio_session.providers._sse import (
    MAX_EVENT_BYTES,
    EventStreamTooLarge,
    ServerSentEvent,
    SSEDecoder,
)

from .http_server import Exchange, ScriptedServer, event_stream, respond, sse
from .provider_support import RecordingSink, decision

KEY = "sk-test-Secret0123456789abcdef"
MODEL = Model(id="test-model", provider="test")
SYSTEM = "You are the secret system prompt."
REQUEST = ProviderRequest(
    MODEL, (UserMessage("Hi", timestamp=0),), system_prompt=SYSTEM, api_key=KEY
)
DONE = "data: [DONE]\n\n"


def chunk(content: str | None = None, finish: str | None = None) -> str:
    """A Chat Completions chunk for choice 0."""
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def anthropic_answer(text: str) -> list[str]:
    """A whole Messages API answer: one text block, then ``end_turn``."""
    return [
        sse({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            }
        ),
        sse({"type": "content_block_stop", "index": 0}),
        sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        sse({"type": "message_stop"}),
    ]


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def openai(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider with the default timeouts, pointed at the server."""
    async with OpenAIProvider(base_url=f"{server.url}/v1") as provider:
        yield provider


async def ask(
    provider: HttpProvider, request: ProviderRequest = REQUEST
) -> tuple[StreamEnd, RecordingSink]:
    """Stream one request; return how it ended and what was streamed."""
    sink = RecordingSink()
    end = await provider.stream(request, sink)
    return end, sink


# -- defect 3: text UTF-8 cannot carry; no request body in an errorMessage -------------------


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_lone_surrogates_are_sent_as_replacement_characters(
    server: ScriptedServer, api: str
) -> None:
    """A lone surrogate goes out as U+FFFD, a split pair is joined; the answer streams."""
    request = ProviderRequest(
        MODEL,
        (UserMessage("I \ud83d you \ud83d\ude00", timestamp=0),),
        system_prompt="Be \udcff brief.",
        api_key=KEY,
    )
    provider: HttpProvider
    if api == "openai":
        provider = OpenAIProvider(base_url=f"{server.url}/v1")
        server.script(event_stream([chunk("ok", finish="stop"), DONE]))
    else:
        provider = AnthropicProvider(base_url=server.url)
        server.script(event_stream(anthropic_answer("ok")))
    async with provider:
        end, sink = await ask(provider, request)
    raw = "stop" if api == "openai" else "end_turn"  # finish_reason / stop_reason
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason=raw)
    assert sink.joined == "ok"
    body = server.requests[0].json()
    if api == "openai":
        assert body["messages"] == [
            {"role": "system", "content": "Be \ufffd brief."},
            {"role": "user", "content": "I \ufffd you \U0001f600"},
        ]
    else:
        assert body["system"] == "Be \ufffd brief."
        assert body["messages"] == [{"role": "user", "content": "I \ufffd you \U0001f600"}]


@pytest.mark.parametrize(
    ("extra", "kind"), [({"seed": {1, 2}}, "TypeError"), ({"temperature": math.nan}, "ValueError")]
)
async def test_body_json_cannot_express_is_a_short_invalid_request(
    server: ScriptedServer, extra: dict[str, Any], kind: str
) -> None:
    """A body value JSON cannot express fails clearly, naming only the exception type."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", extra_body=extra) as provider:
        end, _ = await ask(provider)
    assert end == StreamEnd.error(
        f"Invalid request: the request body cannot be sent as JSON ({kind})"
    )
    assert decision(end.error_message) == "none"
    assert server.requests == []


async def test_adapter_bug_names_only_the_exception_type(
    server: ScriptedServer, openai: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception inside the adapter becomes its type alone: no args, no key, no body."""

    def explode() -> None:
        raise RuntimeError(f"key {KEY} body {SYSTEM}")

    server.script(event_stream([chunk("Hel"), chunk("lo", finish="stop"), DONE]))
    sink = RecordingSink(on_text=explode)
    with caplog.at_level(logging.DEBUG, logger="trio_session"):
        end = await openai.stream(REQUEST, sink)
    assert end == StreamEnd.error("Request failed: the provider adapter raised RuntimeError")
    assert decision(end.error_message) == "none"  # a bug does not heal by waiting
    assert KEY not in caplog.text
    assert SYSTEM not in caplog.text
    assert [r.getMessage().split(" at ")[0] for r in caplog.records] == [
        "an HTTP provider raised RuntimeError"
    ]


# -- defect 6: redact before cutting ---------------------------------------------------------


STRADDLING = [
    pytest.param(
        respond(401, "a" * 280 + f" {KEY} more text"),
        "401 Unauthorized: " + "a" * 280 + " [redacted] more te…",
        id="text-excerpt-cut",
    ),
    pytest.param(
        respond(
            401,
            {"error": {"message": "b" * 980 + f" {KEY} tail", "type": "invalid_request_error"}},
        ),
        "401 Unauthorized: " + "b" * 980 + " [redacted] tail (i…",
        id="json-message-cut",
    ),
    pytest.param(
        respond(401, " " * (MAX_ERROR_BODY_BYTES - 12) + f"{KEY} and the rest"),
        "401 Unauthorized: [redacted]",
        id="error-body-byte-cap",
    ),
    pytest.param(
        event_stream(
            [sse({"error": {"message": "c" * 990 + f" {KEY} tail", "code": 502}})],
            after="wait_for_disconnect",
        ),
        "502 Bad Gateway: " + "c" * 990 + " [redacte…",
        id="stream-error-event-cut",
    ),
]


@pytest.mark.parametrize(("step", "expected"), STRADDLING)
async def test_key_straddling_a_cut_is_redacted_whole(
    server: ScriptedServer, step: Any, expected: str
) -> None:
    """A key that a cut would split is redacted first: no start of it survives."""
    server.script(step)
    async with OpenAIProvider(base_url=f"{server.url}/v1") as provider:
        end, _ = await ask(provider)
    assert end == StreamEnd.error(expected)


async def test_invalid_json_is_logged_without_the_key(
    server: ScriptedServer, openai: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """The debug excerpt of stream garbage is redacted before it is cut to 200 characters."""
    server.script(event_stream(["data: {" + "x" * 185 + f" {KEY} and more\n\n"]))
    with caplog.at_level(logging.DEBUG, logger="trio_session"):
        end, _ = await ask(openai)
    assert end == StreamEnd.error(
        "Invalid response from server: event stream data is not valid JSON"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "event stream data is not valid JSON: '{" + "x" * 185 + " [redacted] a…'"
    ]


def test_redact_a_cut_text_ending_in_the_start_of_a_key() -> None:
    """With cut=True a trailing start of 4+ characters is redacted; 3 are left alone."""
    assert redact("see sk-test-Sec", KEY, cut=True) == "see [redacted]"
    assert redact("see sk-test-Sec", KEY) == "see sk-test-Sec"
    assert redact("see sk-", KEY, cut=True) == "see sk-"
    assert redact(f"{KEY} and sk-t", None, "", KEY, cut=True) == "[redacted] and [redacted]"


def test_excerpt_and_hints_redact_before_cutting() -> None:
    """excerpt() and the hint header lines redact secrets before they cut."""
    assert excerpt("x" * 10 + KEY, 15, secrets=[KEY]) == "x" * 10 + "[red…"
    text = http_error_message(503, "", "", {"retry-after": "9" * 95 + KEY}, secrets=[KEY])
    assert text == "503 status code (no body)\nretry-after: " + "9" * 95 + "[red…"


# -- defect 10: every wait has an end ----------------------------------------------------------


def test_default_timeouts() -> None:
    """120 s of silence, 10 s to connect, 600 s for a whole attempt; both providers take them."""
    assert OpenAIProvider().timeout == httpx.Timeout(120.0, connect=10.0)
    assert OpenAIProvider().attempt_timeout == 600.0
    anthropic = AnthropicProvider(timeout=httpx.Timeout(30.0, connect=5.0), attempt_timeout=None)
    assert anthropic.timeout == httpx.Timeout(30.0, connect=5.0)
    assert anthropic.attempt_timeout is None
    assert OpenAIProvider(attempt_timeout=90).attempt_timeout == 90


@pytest.mark.parametrize("value", [0, -1.0, math.nan, "600", True])
def test_attempt_timeout_must_be_positive(value: object) -> None:
    """attempt_timeout is a positive number of seconds or None; anything else is refused."""
    with pytest.raises(
        ValueError,
        match=r"^attempt_timeout must be a positive number of seconds or None, not "
        + repr(value).replace(".", r"\.")
        + "$",
    ):
        OpenAIProvider(attempt_timeout=value)  # type: ignore[arg-type]


async def test_headers_then_silence_end_at_the_idle_timeout(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Headers, then nothing: the default idle timeout ends the attempt at t+120, retried."""
    server.script(event_stream([], after="silence"))
    start = trio.current_time()
    end, _ = await ask(openai)
    assert trio.current_time() - start == 120.0
    assert end == StreamEnd.error(
        "Connection error: timed out after 120s waiting for more of the response from"
        f" 127.0.0.1:{server.port}"
    )
    assert decision(end.error_message) == "retry"


async def test_keepalive_comments_forever_end_at_the_attempt_deadline(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """SSE comments every 15 s keep the idle timeout quiet; the deadline ends it at t+600."""

    async def keepalive_forever(exchange: Exchange) -> None:
        await exchange.head(200)
        await exchange.chunk(chunk("Hel"))
        while True:
            await trio.sleep(15)
            await exchange.chunk(": keep-alive\n\n")

    server.script(keepalive_forever)
    start = trio.current_time()
    with trio.fail_after(3600):  # the defect: no end at all
        end, sink = await ask(openai)
    assert trio.current_time() - start == 600.0
    assert end == StreamEnd.error(
        "Connection error: timed out after 600s (the limit for one attempt) reading the"
        f" response from 127.0.0.1:{server.port}"
    )
    assert sink.joined == "Hel"
    assert decision(end.error_message) == "retry"


async def test_trickled_error_body_ends_at_the_attempt_deadline(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """A 503 body sent a byte per 0.5 s ends at t+600, status and retry hint kept."""

    async def trickle(exchange: Exchange) -> None:
        await exchange.head(
            503, headers=[("retry-after", "7")], content_type="text/plain", length=100_000
        )
        for _ in range(100_000):
            await exchange.send(b"x")
            await trio.sleep(0.5)

    server.script(trickle)
    start = trio.current_time()
    with trio.fail_after(3600):  # the defect: 64 KiB at 2 bytes a second
        end, _ = await ask(openai)
    assert trio.current_time() - start == 600.0
    assert end == StreamEnd.error(
        "503 Service Unavailable: Connection error: timed out after 600s (the limit for one"
        " attempt) reading the error body\nretry-after: 7"
    )
    assert decision(end.error_message) == "retry"
    assert parse_retry_after_ms(end.error_message or "") == 7000


async def test_no_response_head_ends_at_the_attempt_deadline(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """With no idle timeout at all, the attempt deadline still ends a silent server."""

    async def never_answer(exchange: Exchange) -> None:
        await trio.sleep_forever()

    server.script(never_answer)
    start = trio.current_time()
    async with AnthropicProvider(base_url=server.url, timeout=None, attempt_timeout=50) as p:
        end, _ = await ask(p)
    assert trio.current_time() - start == 50.0
    assert end == StreamEnd.error(
        "Connection error: timed out after 50s (the limit for one attempt) waiting for"
        f" 127.0.0.1:{server.port} to respond"
    )


async def test_pings_forever_end_at_the_attempt_deadline(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """Anthropic pings every 4 s beat a 5 s idle timeout, not a 30 s attempt deadline."""
    pings = [sse({"type": "ping"}, event="ping")] * 20
    server.script(event_stream(anthropic_answer("Hel")[:3] + pings, delay=4))
    start = trio.current_time()
    async with AnthropicProvider(base_url=server.url, timeout=5, attempt_timeout=30) as p:
        end, sink = await ask(p)
    assert trio.current_time() - start == 30.0
    assert end == StreamEnd.error(
        "Connection error: timed out after 30s (the limit for one attempt) reading the"
        f" response from 127.0.0.1:{server.port}"
    )
    assert sink.joined == "Hel"


async def test_no_attempt_timeout_lets_a_long_answer_finish(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """attempt_timeout=None: an answer streaming for 1000 s, a piece every 100 s, finishes."""
    pieces = [chunk(str(i)) for i in range(10)] + [chunk(finish="stop"), DONE]
    server.script(event_stream(pieces, delay=100))
    start = trio.current_time()
    async with OpenAIProvider(base_url=f"{server.url}/v1", attempt_timeout=None) as provider:
        end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert sink.joined == "0123456789"
    assert trio.current_time() - start == 1100.0


# -- defect 11: an error body that cannot be read keeps the status ------------------------------


async def test_undecodable_error_body_keeps_status_and_hint(
    server: ScriptedServer, openai: OpenAIProvider
) -> None:
    """A 503 whose gzip body is garbage keeps its status and retry-after: it is retried."""
    server.script(
        respond(
            503,
            b"this is not gzip",
            [("content-encoding", "gzip"), ("retry-after", "3")],
            content_type="application/json",
        )
    )
    end, _ = await ask(openai)
    assert end == StreamEnd.error(
        "503 Service Unavailable: (the error body could not be decoded)\nretry-after: 3"
    )
    assert decision(end.error_message) == "retry"


async def test_error_body_cut_by_the_server_keeps_the_hint(
    server: ScriptedServer, openai: OpenAIProvider
) -> None:
    """A 429 whose body never comes keeps its retry-after line, as a whole body would."""

    async def head_only(exchange: Exchange) -> None:
        await exchange.head(429, headers=[("retry-after", "4")], length=1000)
        await exchange.close()

    server.script(head_only)
    end, _ = await ask(openai)
    assert end == StreamEnd.error(
        "429 Too Many Requests: (the connection was lost while reading the error body)"
        "\nretry-after: 4"
    )
    assert parse_retry_after_ms(end.error_message or "") == 4000


# -- defect 12: a limit on a line ----------------------------------------------------------------


async def test_endless_line_is_refused_at_the_limit(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """A line with no newline ends the stream at 8 MiB with a clear error; reading stops."""
    sent = 0

    async def endless_line(exchange: Exchange) -> None:
        nonlocal sent
        await exchange.head(200)
        await exchange.chunk("data: ")
        piece = b"x" * 65536
        while sent < 4 * MAX_EVENT_BYTES:
            await exchange.chunk(piece)
            sent += len(piece)
        await exchange.wait_for_disconnect()

    server.script(endless_line)
    end, _ = await ask(openai)
    assert end == StreamEnd.error(
        "Invalid response from server: an event stream line is longer than 8 MiB"
    )
    assert decision(end.error_message) == "none"
    await server.disconnected.wait()
    assert sent < 4 * MAX_EVENT_BYTES  # the client hung up instead of reading on


def test_decoder_never_buffers_past_its_limit() -> None:
    """Piece by piece, an unfinished line is held only up to max_size, then refused."""
    decoder = SSEDecoder(max_size=100)
    piece = b"data: " + b"x" * 24
    for held in (30, 60, 90):
        assert list(decoder.feed(piece)) == []
        assert decoder.buffered == held
    with pytest.raises(
        EventStreamTooLarge, match=r"^an event stream line is longer than 100 bytes$"
    ):
        list(decoder.feed(piece))
    assert decoder.buffered == 90


def test_decoder_refuses_an_event_whose_data_adds_up_past_the_limit() -> None:
    """Many short data lines with no blank line between them are refused at max_size."""
    decoder = SSEDecoder(max_size=100)
    assert list(decoder.feed(b"data: " + b"y" * 40 + b"\n")) == []
    assert list(decoder.feed(b"data: " + b"y" * 40 + b"\n\n")) == [
        ServerSentEvent(data="y" * 40 + "\n" + "y" * 40)
    ]
    with pytest.raises(
        EventStreamTooLarge, match=r"^an event stream event is larger than 100 bytes$"
    ):
        list(decoder.feed(b"data: " + b"z" * 60 + b"\ndata: " + b"z" * 60 + b"\n"))


def test_decoder_splits_lines_only_at_cr_and_lf() -> None:
    """CRLF split across pieces is one line end; U+2028 and form feeds are data."""
    decoder = SSEDecoder()
    pieces = [
        b"data: a\xe2\x80\xa8b\x0c\r",
        b"\n\r",
        b"\ndata: c\r\r",
        b"data: \xf0\x9f",
        b"\x98\x80\n\n",
    ]
    events = [event for piece in pieces for event in decoder.feed(piece)]
    assert events == [
        ServerSentEvent(data="a\u2028b\x0c"),
        ServerSentEvent(data="c"),
        ServerSentEvent(data="\U0001f600"),
    ]


async def test_line_separator_inside_a_delta_is_text(
    server: ScriptedServer, openai: OpenAIProvider
) -> None:
    """A raw U+2028 in a JSON chunk (ensure_ascii off) is part of the text, not a line end."""
    raw = '{"choices": [{"index": 0, "delta": {"content": "a\u2028b"}, "finish_reason": "stop"}]}'
    server.script(event_stream([f"data: {raw}\n\n", DONE]))
    end, sink = await ask(openai)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert sink.joined == "a\u2028b"


# -- a request cancelled while its body is on the way ----------------------------------------


async def test_a_request_cancelled_mid_body_leaves_nothing_to_the_garbage_collector(
    nursery: trio.Nursery,
) -> None:
    """A prompt aborted while its (large) body is still being sent -- the server has read
    the head and a little of the body, then reads no more -- is cancelled at once and
    leaves no half-run async generator for the garbage collector: under ``-X dev -W
    error`` trio's "garbage collected before it had been exhausted" ResourceWarning would
    end the process with an error (encode/httpx#3686 is where httpx's own body does)."""
    body_started = trio.Event()
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def read_a_little_then_stop() -> None:
        async with listeners[0] as listener, await listener.accept() as stream:
            seen = b""
            while b"\r\n\r\n" not in seen or len(seen.split(b"\r\n\r\n", 1)[1]) < 1024:
                seen += await stream.receive_some(65536)
            body_started.set()
            await trio.sleep_forever()  # the rest of the body is never read

    nursery.start_soon(read_a_little_then_stop)
    big = ProviderRequest(MODEL, (UserMessage("x" * 32_000_000, timestamp=0),), api_key=KEY)
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1") as provider:
            with trio.CancelScope() as request_scope:

                async def abort_once_the_body_is_on_the_way() -> None:
                    await body_started.wait()
                    request_scope.cancel()

                nursery.start_soon(abort_once_the_body_is_on_the_way)
                await ask(provider, big)
            assert request_scope.cancelled_caught
        gc.collect()
        await trio.testing.wait_all_tasks_blocked()  # trio closes what the GC hands it
    left = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert left == []
