"""R-69: the rate budget learned from the provider's headers — OpenAI's ``x-ratelimit-*``
and Anthropic's ``anthropic-ratelimit-*``, read from every response over real loopback
HTTP, turn the budget on when the settings name no limit; settings win; garbage and
silence change nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session import Model, RateLimits, RateLimitWaitStart, open_session
from trio_session._agent.rate_budget import _LOCAL, MINUTE_US, BudgetKey, floor_us
from trio_session._core.rate_headers import (
    MAX_LIMIT,
    MAX_RESET_MS,
    RateDimension,
    RateLimitHeaders,
    duration_ms,
    read_rate_limits,
)
from trio_session.conformance import LoopbackLLM, Stream
from trio_session.conformance._server import HttpError, Step, error_body
from trio_session.providers._openai import OpenAIProvider
from trio_session.testing import EventRecorder

from .test_rate_budget import get_state

MODEL_ID = "gpt-test"
#: OpenAI's headers: 2 requests a minute, none left for 30 s.
SPENT = (
    ("x-ratelimit-limit-requests", "2"),
    ("x-ratelimit-remaining-requests", "0"),
    ("x-ratelimit-reset-requests", "30s"),
)


@asynccontextmanager
async def served(
    *steps: Step,
) -> AsyncIterator[tuple[LoopbackLLM, OpenAIProvider, Model]]:
    """A loopback OpenAI server answering ``steps``, and a provider and model pointed at it."""
    server = LoopbackLLM(list(steps))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        async with OpenAIProvider(base_url=server.base_url, api_key="sk-test") as provider:
            yield server, provider, provider.model(MODEL_ID)
        nursery.cancel_scope.cancel()


#: Learning is asked for: a session with no ``rateLimit`` learns nothing (the profiles are
#: pi's until a budget is set, R-69).
LEARN: dict[str, Any] = {"rateLimit": {"learn": True}}


async def prompts(count: int, settings: dict[str, Any] | None, *steps: Step) -> Any:
    """``count`` prompts of one session over loopback HTTP: the request times and events."""
    async with served(*steps) as (server, provider, model):
        async with open_session(provider, model, settings=settings) as session:
            recorder = EventRecorder.attach(session)
            for _ in range(count):
                await session.prompt("Hi")
        return [r.time for r in server.requests], recorder


# -- the parser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("6m0s", 360_000),
        ("1s", 1_000),
        ("20ms", 20),
        ("1h2m3.5s", 3_723_500),
        ("0.5s", 500),
        ("7.66s", 7_660),
        ("48h", MAX_RESET_MS),
        ("", None),
        ("soon", None),
        ("-1s", None),
        ("1s2h", None),
        ("9" * 400 + "s", None),
    ],
)
def test_openai_s_reset_durations(text: str, ms: int | None) -> None:
    """R-69: OpenAI's reset is a Go duration, read to ms (at most a day); anything else is
    no reset."""
    assert duration_ms(text) == ms


def test_openai_s_headers_are_read() -> None:
    """R-69: both of OpenAI's families, limit, remaining and reset."""
    headers = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": "2s",
    }
    assert read_rate_limits(headers, 0.0) == RateLimitHeaders(
        RateDimension(500, 499, 120), RateDimension(30_000, 29_000, 2_000)
    )


def test_anthropic_s_headers_are_read_against_the_response_s_date() -> None:
    """R-69: Anthropic's reset is an RFC 3339 time, counted from the response's ``date``
    (not the local clock, given here as 0); the input/output token families are not read."""
    headers = {
        "date": "Sun, 06 Dec 2026 08:00:00 GMT",
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-12-06T08:00:12Z",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "39000",
        "anthropic-ratelimit-tokens-reset": "2026-12-06T09:00:01.5+01:00",
        "anthropic-ratelimit-input-tokens-limit": "7",
    }
    assert read_rate_limits(headers, 0.0) == RateLimitHeaders(
        RateDimension(50, 0, 12_000), RateDimension(40_000, 39_000, 1_500)
    )


def test_garbage_and_silence_state_nothing() -> None:
    """R-69: no headers, or none usable (a zero limit, a word, a negative, 400 digits), is
    ``None``; a limit past ``MAX_LIMIT`` is that, a remaining past the limit is the limit,
    a reset with no zone is no reset."""
    assert read_rate_limits({}, 0.0) is None
    assert read_rate_limits({"x-ratelimit-limit-requests": "9" * 400}, 0.0) is None
    assert read_rate_limits({"x-ratelimit-limit-requests": "0"}, 0.0) is None
    assert read_rate_limits({"x-ratelimit-limit-tokens": "-5"}, 0.0) is None
    assert read_rate_limits({"anthropic-ratelimit-requests-limit": "many"}, 0.0) is None
    stated = read_rate_limits(
        {
            "anthropic-ratelimit-requests-limit": "9" * 30,
            "anthropic-ratelimit-requests-remaining": "10",
            "anthropic-ratelimit-requests-reset": "2026-12-06T08:00:12",
        },
        0.0,
    )
    assert stated == RateLimitHeaders(RateDimension(MAX_LIMIT, 10, None))
    stated = read_rate_limits(
        {"x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "9"}, 0.0
    )
    assert stated == RateLimitHeaders(RateDimension(3, 3, None))


NAMES = st.sampled_from(
    [
        f"{family}-{part}"
        for family in ("x-ratelimit", "anthropic-ratelimit")
        for part in (
            "limit-requests",
            "remaining-requests",
            "reset-requests",
            "limit-tokens",
            "remaining-tokens",
            "reset-tokens",
            "requests-limit",
            "requests-remaining",
            "requests-reset",
            "tokens-limit",
            "tokens-remaining",
            "tokens-reset",
        )
    ]
    + ["date"]
)
VALUES = st.one_of(
    st.text(max_size=80),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.from_regex(r"\d{1,12}(\.\d{1,12})?(h|m|s|ms)", fullmatch=True),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
)


@settings(deadline=None, max_examples=300)
@given(headers=st.dictionaries(NAMES, VALUES, max_size=13), now=st.floats())
def test_any_headers_give_bounded_limits_or_none(headers: dict[str, str], now: float) -> None:
    """R-69: whatever the headers hold, the reader returns ``None`` or bounded numbers —
    a limit in [1, MAX_LIMIT], remaining in [0, limit], a reset in [0, MAX_RESET_MS] —
    never raises, and gives the budget a floor within a minute and a reset."""
    stated = read_rate_limits(headers, now)
    if stated is None:
        return
    for dimension in (stated.requests, stated.tokens):
        if dimension is None:
            continue
        assert 1 <= dimension.limit <= MAX_LIMIT
        assert dimension.remaining is None or 0 <= dimension.remaining <= dimension.limit
        assert dimension.reset_ms is None or 0 <= dimension.reset_ms <= MAX_RESET_MS
        assert 0 <= floor_us(dimension) <= 2 * MINUTE_US


# -- sessions over loopback HTTP ---------------------------------------------------------


async def test_openai_s_headers_pace_the_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: no ``rateLimit``; the first answer says 2 requests a minute, none left for
    30 s: the second request waits until then (told), the third the budget's 30 s more."""
    times, recorder = await prompts(3, LEARN, Stream(headers=SPENT), Stream(), Stream())
    assert times == [0.0, 30.0, 60.0]
    waits = recorder.of(RateLimitWaitStart)
    assert waits == [
        RateLimitWaitStart(30_000, f"openai/{MODEL_ID}"),
        RateLimitWaitStart(30_000, f"openai/{MODEL_ID}"),
    ]


async def test_what_remains_pre_drains_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: the first answer says 3 requests a minute, 1 left: the next goes at once, the
    one after waits the 20 s the limit refills one in — the budget held no more than the
    server said was left."""
    headers = (
        ("x-ratelimit-limit-requests", "3"),
        ("x-ratelimit-remaining-requests", "1"),
    )
    times, recorder = await prompts(3, LEARN, Stream(headers=headers), Stream(), Stream())
    assert times == [0.0, 0.0, 20.0]
    assert recorder.of(RateLimitWaitStart) == [RateLimitWaitStart(20_000, f"openai/{MODEL_ID}")]


async def test_a_failed_response_s_headers_are_learned_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: headers are read from every response: a 429 (no retry-after) saying none left
    for 30 s — the re-attempt, due after the 2 s backoff, waits for its permit until 30 s."""
    times, _ = await prompts(
        1, LEARN, HttpError(429, error_body("Rate limit reached", "requests"), SPENT), Stream()
    )
    assert times == [0.0, 30.0]


async def test_settings_win_over_the_headers(autojump_clock: trio.testing.MockClock) -> None:
    """R-69: ``rateLimit.requestsPerMinute: 1`` and headers that say 2 with none left for
    30 s: the settings' pace (60 s), the headers ignored for that dimension."""
    settings = {"rateLimit": {"requestsPerMinute": 1, "learn": True}}
    times, _ = await prompts(2, settings, Stream(headers=SPENT), Stream())
    assert times == [0.0, 60.0]


async def test_learning_off_ignores_the_headers(autojump_clock: trio.testing.MockClock) -> None:
    """R-69: ``rateLimit.learn: false``: the headers change nothing, no permit, no event."""
    times, recorder = await prompts(
        2, {"rateLimit": {"learn": False}}, Stream(headers=SPENT), Stream()
    )
    assert times == [0.0, 0.0]
    assert not [t for t in recorder.types if t.startswith("rate_limit")]
    assert _LOCAL.get() is None  # no budget made


async def test_by_default_the_headers_change_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: no ``rateLimit`` at all: headers saying none is left for 30 s change nothing —
    no permit, no event, no budget made: both profiles stay pi's."""
    for profile in ("seed", "pi-1.6"):
        settings = {"retry": {"profile": profile}}
        times, recorder = await prompts(2, settings, Stream(headers=SPENT), Stream())
        assert times == [0.0, 0.0]
        assert not [t for t in recorder.types if t.startswith("rate_limit")]
        assert _LOCAL.get() is None


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("x-ratelimit-limit-requests", "lots"), ("x-ratelimit-reset-requests", "30 s")),
        (("anthropic-ratelimit-requests-limit", "-1"),),
    ],
    ids=["none", "garbage", "negative"],
)
async def test_no_usable_headers_take_no_permit(
    autojump_clock: trio.testing.MockClock, headers: tuple[tuple[str, str], ...]
) -> None:
    """R-69: a server that states no usable limit changes nothing: no budget is made, no
    permit taken, no event told."""
    times, recorder = await prompts(2, LEARN, Stream(headers=headers), Stream())
    assert times == [0.0, 0.0]
    assert not [t for t in recorder.types if t.startswith("rate_limit")]
    assert _LOCAL.get() is None  # no budget made


async def test_the_budget_learned_is_the_provider_key_and_model_s() -> None:
    """R-69: what the headers taught is kept by provider, key and model (``-``: the
    provider's own key), limits only: 2 requests a minute, no token limit stated."""
    async with served(Stream(headers=SPENT)) as (_, provider, model):
        async with open_session(provider, model, settings=LEARN) as session:
            await session.prompt("Hi")
        budget = _LOCAL.get()
        assert budget is not None
        assert await budget.learned(BudgetKey("openai", "-", MODEL_ID)) == RateLimits(2)
        assert await budget.learned(BudgetKey("openai", "-", "other")) is None


async def test_get_state_says_when_a_request_waits_for_a_learned_permit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: with ``learn`` on and no limit set, RPC ``get_state`` has ``isRateLimited``
    too, true while a request waits for the permit the headers' limit gives."""
    async with (
        served(Stream(headers=SPENT), Stream()) as (_, provider, model),
        open_session(provider, model, settings=LEARN) as session,
    ):
        assert (await get_state(session))["isRateLimited"] is False
        await session.prompt("one")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "two")
            await trio.sleep(1)  # the headers said: none left for 30 s
            assert session.is_rate_limited
            assert (await get_state(session))["isRateLimited"] is True
        assert (await get_state(session))["isRateLimited"] is False
