"""Numbers a server sends are bounded before any arithmetic (issue 39, F6).

A 429 whose text said ``retry-after: -99…9`` (400 digits) made the retry hint an
infinity, ``round`` raised OverflowError inside the retry chain, the prompt was not
retried and was answered twice. Token counts of any size reached the cost formula,
where a float times a 400-digit integer raises too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session import (
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    Model,
    ModelCost,
    SessionEvent,
    open_session,
)
from trio_session._core.messages import MAX_TOKEN_COUNT, AssistantMessage
from trio_session._retry.reply import MAX_HINT_MS, parse_retry_after_ms
from trio_session.conformance import LoopbackLLM, Stream
from trio_session.providers._anthropic import MessagesParser
from trio_session.providers._base import token_count
from trio_session.providers._gemini import gemini_usage, retry_delay_seconds
from trio_session.providers._openai import openai_usage
from trio_session.providers._sse import ServerSentEvent
from trio_session.store._history import load_session
from trio_session.tui._layout import format_tokens

from .conftest import err, ok
from .provider_support import RecordingSink
from .test_rpc_pi16 import read_until, served

HUGE = "9" * 400
PRICED = Model(id="m", provider="openai", cost=ModelCost(input=1.0))
HINT_NAMES = ("retry-after-ms", "retry-after", "x-ratelimit-reset-ms", "x-ratelimit-reset")


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        (f"429 Too Many Requests retry-after: -{HUGE}", 0),
        (f"429 retry-after: {HUGE}", MAX_HINT_MS),
        (f"429 retry-after-ms: -{HUGE}", 0),
        (f"429 retry-after-ms: {HUGE}.5", MAX_HINT_MS),
        (f"429 x-ratelimit-reset-ms: -{HUGE}", 0),
        (f"429 x-ratelimit-reset: {HUGE}", MAX_HINT_MS),
        ("429 retry-after: Fri, 31 Dec 9999 23:59:59 GMT", None),
        ("429 retry-after: 2.5", 2500),
    ],
    ids=["neg-s", "huge-s", "neg-ms", "huge-ms", "neg-reset-ms", "huge-reset", "far-date", "plain"],
)
def test_hints_of_any_size_are_clamped(text: str, hint: int | None) -> None:
    """F6: a hint of 400 digits either way is clamped to 0 or MAX_HINT_MS, not raised."""
    now = 1_700_000_000_000.0
    if hint is None:  # a date: its distance from now, in range
        assert parse_retry_after_ms(text, now_ms=now) == round(253402300799000 - now)
    else:
        assert parse_retry_after_ms(text, now_ms=now) == hint


_NUMBERS = st.one_of(
    st.from_regex(r"\A-?\d{1,30}(\.\d{1,20})?\Z"),
    st.builds(
        lambda sign, digit, count: sign + digit * count,
        st.sampled_from(["", "-"]),
        st.sampled_from("19"),
        st.integers(1, 500),
    ),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-1e999", "0x10", "", "   "]),
    st.text(max_size=40),
)


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.sampled_from(HINT_NAMES), _NUMBERS), max_size=4),
    st.text(max_size=60),
    st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=1e15),
)
def test_the_hint_parser_never_raises(
    headers: list[tuple[str, str]], noise: str, now_ms: float
) -> None:
    """F6: any text of hint lines and noise gives no hint or one in [0, MAX_HINT_MS]."""
    text = noise + "".join(f"\n{name}: {value}" for name, value in headers)
    hint = parse_retry_after_ms(text, now_ms=now_ms)
    assert hint is None or (isinstance(hint, int) and 0 <= hint <= MAX_HINT_MS)


async def test_a_429_with_a_huge_negative_hint_is_retried_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """F6: the prompt with such a 429 is retried after the plain backoff (2 s) and answered."""
    text = f"429 Too Many Requests retry-after: -{HUGE}"
    events: list[SessionEvent] = []
    async with open_session(FauxProvider([err(text), ok("Hello!")])) as session:
        session.subscribe(events.append)
        await session.prompt("hi")
        assert session.messages[-1].text == "Hello!"
    retries = [e for e in events if isinstance(e, AutoRetryStart | AutoRetryEnd)]
    assert retries == [AutoRetryStart(1, 3, 2000, text), AutoRetryEnd(True, 1)]
    assert trio.current_time() == 2.0


async def test_the_prompt_of_such_a_429_is_answered_once_over_rpc(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """F6: over RPC the prompt gets one answer ("started"), then the retry and the reply."""
    text = f"429 Too Many Requests retry-after: -{HUGE}"
    async with served([err(text), ok("Hello!")]) as (raw, _):
        await raw.send({"id": 1, "type": "prompt", "message": "hi"})
        lines = await read_until(raw, "agent_settled")
    responses = [line for line in lines if line["type"] == "response"]
    assert responses == [
        {
            "id": 1,
            "type": "response",
            "command": "prompt",
            "success": True,
            "data": {"disposition": "started"},
        }
    ]
    ends = [line for line in lines if line["type"] == "auto_retry_end"]
    assert ends == [{"type": "auto_retry_end", "success": True, "attempt": 1}]


@pytest.mark.parametrize(
    ("value", "count"),
    [(10**400, MAX_TOKEN_COUNT), (-(10**400), 0), (-5, 0), (12, 12), (True, 0), (1.5, 0), ("7", 0)],
)
def test_token_counts_are_bounded(value: Any, count: int) -> None:
    """F6: a token count from a server is an int in [0, MAX_TOKEN_COUNT], else 0."""
    assert token_count(value) == count


def test_usage_of_any_size_gets_a_cost() -> None:
    """F6: usage objects with 400-digit counts from each provider give bounded usage, and
    its cost is a number (a float times such an int raised OverflowError)."""
    huge = 10**400
    usages = [
        openai_usage({"prompt_tokens": huge, "completion_tokens": huge}),
        gemini_usage({"promptTokenCount": huge, "candidatesTokenCount": huge}),
    ]
    sink = RecordingSink()
    usage_event = {"type": "message_delta", "delta": {}, "usage": {"input_tokens": huge}}
    MessagesParser(sink).feed(ServerSentEvent(data=json.dumps(usage_event)))
    usages.append(sink.usages[-1])
    for usage in usages:
        priced = PRICED.priced(usage)
        assert usage.input == MAX_TOKEN_COUNT
        assert priced.cost.input == 1.0 / 1e6 * MAX_TOKEN_COUNT  # pi's order of operations


def test_a_gemini_retry_delay_of_400_digits_is_bounded() -> None:
    """F6: Google's ``retryDelay`` of 400 digits is read as the longest hint, not infinity."""
    error = {
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{HUGE}s"}]
    }
    assert retry_delay_seconds(error) == MAX_HINT_MS / 1000


@pytest.mark.parametrize(
    "length", ["9" * 5000, "²", str(10**12)], ids=["5000-digits", "superscript", "a-terabyte"]
)
async def test_the_kits_server_ends_a_connection_of_a_hostile_length(length: str) -> None:
    """F6: the conformance kit's loopback server hangs up on a request whose Content-Length
    is too long to parse or to read (``int`` raised on 5000 digits and on ``²``), and
    answers the next connection."""
    server = LoopbackLLM([Stream("fine")])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        raw = await trio.open_tcp_stream("127.0.0.1", server.port)
        head = f"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {length}\r\n\r\n"
        await raw.send_all(head.encode())
        with trio.fail_after(10):
            assert await raw.receive_some(65536) == b""
        await raw.aclose()
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{server.base_url}/chat/completions", json={"n": 1})
        assert answer.status_code == 200
        nursery.cancel_scope.cancel()


def test_a_session_files_huge_token_counts_are_bounded(tmp_path: Path) -> None:
    """F6: a session file's answer with a 400-digit token count loads with the count at
    MAX_TOKEN_COUNT, and the footer can show it (dividing it raised OverflowError)."""
    time = "2026-01-01T00:00:00.000Z"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": time, "cwd": "/"}
    message = {
        "role": "assistant",
        "content": [],
        "api": "faux",
        "provider": "faux",
        "model": "m",
        "usage": {"input": 123456789, "output": -5, "cacheRead": 0, "cacheWrite": 0},
        "stopReason": "stop",
        "timestamp": 1,
    }
    entry = {"type": "message", "id": "a", "parentId": None, "timestamp": time, "message": message}
    path = tmp_path / "s.jsonl"
    lines = (json.dumps(header), json.dumps(entry).replace("123456789", "1" + "0" * 400))
    path.write_text("\n".join(lines) + "\n")
    (loaded,) = load_session(path).messages
    assert isinstance(loaded, AssistantMessage)
    assert (loaded.usage.input, loaded.usage.output) == (MAX_TOKEN_COUNT, 0)
    assert format_tokens(loaded.usage.context_tokens) == "9007199255M"
