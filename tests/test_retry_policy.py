"""The retry policy of SPEC §1–§4 and §6, rule by rule, on virtual time."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionStart,
    DropOldestCompactor,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Model,
    PatternClassifier,
    SessionBusyError,
    UserMessage,
    open_session,
)
from trio_session.testing import EventRecorder

from .conftest import (
    ERR_400,
    ERR_503,
    ERR_OVERFLOW,
    PROFILES,
    assert_idle,
    check_retry_events,
    err,
    in_profile,
    ok,
    retry_settings,
)

TWO_503_THEN_OK = [
    "agent_start",
    "turn_start",
    "message_start",  # user
    "message_end",
    "message_start",  # assistant: 503
    "message_end",
    "turn_end",
    "agent_end",
    "auto_retry_start",
    "agent_start",
    "turn_start",
    "message_start",  # assistant: 503
    "message_end",
    "turn_end",
    "agent_end",
    "auto_retry_start",
    "agent_start",
    "turn_start",
    "message_start",  # assistant: Hello
    "message_update",  # text_start
    "message_update",  # text_delta
    "message_update",  # text_end
    "message_end",
    "auto_retry_end",
    "turn_end",
    "agent_end",
    "agent_settled",  # once, after the last agent_end
]


async def run(
    script: list[FauxReply], settings: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[FauxProvider, EventRecorder, AssistantMessage, float]:
    """Prompt once on a fresh session; return provider, events, reply, return time."""
    provider = FauxProvider(script)
    async with open_session(provider, settings=settings, **kwargs) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
        returned_at = trio.current_time()
        assert_idle(session)
    return provider, recorder, reply, returned_at


async def run_in(
    profile: str, script: list[FauxReply], settings: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[FauxProvider, EventRecorder, AssistantMessage, float]:
    """``run`` under the retry profile ``profile`` (R-53)."""
    return await run(script, in_profile(profile, settings), **kwargs)


# -- §1 scope ---------------------------------------------------------------------


async def test_r1_retry_first_and_compaction_skipped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-1: a retryable error starts a chain and the compaction check is skipped."""
    _, rec, reply, _ = await run([err(), ok()])
    assert rec.types.count("auto_retry_start") == 1
    assert not rec.of(CompactionStart)
    assert reply.text == "Hello"


async def test_r2_overflow_is_never_retried(autojump_clock: trio.testing.MockClock) -> None:
    """R-2: an overflow error mentioning 429 and 500 goes to compaction, not retry."""
    text = "429 500 prompt is too long: 213462 tokens > 200000 maximum"
    provider = FauxProvider([ok("first"), err(text), ok("summary"), ok("after compaction")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("one")
        await session.prompt("two")
    assert not rec.of(AutoRetryStart)
    assert rec.types.count("compaction_start") == 1


@pytest.mark.parametrize(
    ("text", "retried"),
    [
        ("529 overloaded_error: Overloaded", True),
        ("429 rate_limit_error: Rate limit exceeded", True),
        ("500 Internal Server Error", True),
        ("Connection error.", True),
        ("fetch failed", True),
        (ERR_OVERFLOW, False),
        (ERR_400, False),
    ],
)
async def test_r3_transient_errors_retry_overflow_compacts(
    autojump_clock: trio.testing.MockClock, text: str, retried: bool
) -> None:
    """R-3: overloaded/rate-limit/server/network errors retry; overflow does not."""
    _, rec, _, _ = await run([err(text), ok()])
    assert bool(rec.of(AutoRetryStart)) is retried


# -- §2 classification ------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        FauxReply(error=""),  # errorMessage empty
        FauxReply(text="503 Service Unavailable"),  # not an error: the text says 503
        FauxReply(error="401 Unauthorized: invalid x-api-key"),  # no pattern match
    ],
    ids=["empty-error-message", "not-an-error", "no-pattern-match"],
)
async def test_r4_retryable_needs_all_conditions(
    autojump_clock: trio.testing.MockClock, reply: FauxReply
) -> None:
    """R-4: error stop reason, a non-empty message and a pattern match are all required."""
    provider, rec, _, returned = await run([reply, ok()])
    assert not rec.of(AutoRetryStart)
    assert not rec.of(AutoRetryEnd)
    assert len(provider.requests) == 1
    assert returned == 0.0


async def test_r6_classifier_is_replaceable(autojump_clock: trio.testing.MockClock) -> None:
    """R-6: an application classifier decides instead of the reference one."""
    import re

    mine = PatternClassifier(name="mine", retryable=re.compile("flaky"), overflow=())
    _, rec, _, _ = await run([err("flaky upstream"), err(ERR_503), ok()], classifier=mine)
    assert [e.attempt for e in rec.of(AutoRetryStart)] == [1]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, ERR_503)]


async def test_r7_silent_overflow_compacts_without_continuing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-7(b): usage above the window on a successful answer compacts, no re-send."""
    from trio_session import Usage

    model = Model(id="small", provider="faux", context_window=1000)
    provider = FauxProvider([ok("a"), ok("b", usage=Usage(input=900, cache_read=200))])
    async with open_session(provider, model, compactor=DropOldestCompactor()) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("one")
        reply = await session.prompt("two")
        assert reply.text == "b"
        assert [m.text for m in session.messages] == ["two", "b"]
    assert rec.types[-3:] == ["compaction_start", "compaction_end", "agent_settled"]
    assert rec.of(AgentEnd)[-1].will_retry is False
    assert len(provider.requests) == 2


async def test_r8_strict_classifier_setting(autojump_clock: trio.testing.MockClock) -> None:
    """R-8: retry.classifier "strict" does not retry a 429 that is a billing error."""
    quota = "429 insufficient_quota: You exceeded your current quota, check your billing"
    _, ref, _, _ = await run([err(quota), ok()])
    _, strict, _, _ = await run([err(quota), ok()], retry_settings(classifier="strict"))
    assert len(ref.of(AutoRetryStart)) == 1
    assert strict.of(AutoRetryStart) == []


# -- §3 lifecycle ---------------------------------------------------------------------


async def test_r9_r10_attempt_and_is_retrying_follow_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-9, R-10: retry_attempt counts 1, 2 during the chain; is_retrying only then."""
    provider = FauxProvider([err(), err(), ok()])
    seen: list[tuple[float, bool, int]] = []
    async with open_session(provider) as session:
        assert (session.is_retrying, session.retry_attempt) == (False, 0)

        async def watch() -> None:
            for t in (1.0, 3.0, 7.0):
                await trio.sleep_until(t)
                seen.append((t, session.is_retrying, session.retry_attempt))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await session.prompt("Hi")
        assert_idle(session)
    assert seen == [(1.0, True, 1), (3.0, True, 2), (7.0, False, 0)]


async def test_r11_settings_are_read_at_each_retry(autojump_clock: trio.testing.MockClock) -> None:
    """R-11: lowering maxRetries during the backoff applies at the next error."""
    provider = FauxProvider([err(), err(), err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            session.settings_store.set("retry.maxRetries", 1)
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, ERR_503)]


async def test_r12_disabled_means_no_chain_and_no_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-12: with retry.enabled false the error ends the prompt, silently."""
    provider, rec, reply, returned = await run([err(), ok()], retry_settings(enabled=False))
    assert reply.error_message == ERR_503
    assert not any(t.startswith("auto_retry") for t in rec.types)
    assert rec.of(AgentEnd)[-1].will_retry is False
    assert (len(provider.requests), returned) == (1, 0.0)


async def test_r13_r15_r27_counter_before_max_check(autojump_clock: trio.testing.MockClock) -> None:
    """R-13, R-15, R-27: maxRetries 2 ⇒ starts 1, 2 then end reporting attempt 2."""
    provider, rec, reply, _ = await run([err()] * 4, retry_settings(maxRetries=2))
    assert [e.attempt for e in rec.of(AutoRetryStart)] == [1, 2]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(success=False, attempt=2, final_error=ERR_503)]
    assert len(provider.requests) == 3
    assert reply.error_message == ERR_503


async def test_r14_one_chain_for_all_attempts(autojump_clock: trio.testing.MockClock) -> None:
    """R-14: three attempts are one chain: three starts, one end."""
    _, rec, _, _ = await run([err(), err(), err(), ok()])
    assert rec.types.count("auto_retry_start") == 3
    assert rec.types.count("auto_retry_end") == 1
    assert check_retry_events(rec.events) == 1


async def test_r15_over_max_with_defaults(autojump_clock: trio.testing.MockClock) -> None:
    """R-15: defaults, four 503s ⇒ re-attempts at 2, 6, 14 s; end reports attempt 3."""
    provider, rec, _, returned = await run([err()] * 5)
    assert provider.request_times == [0.0, 2.0, 6.0, 14.0]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 3, ERR_503)]
    assert rec.times_of("auto_retry_end") == [14.0]
    assert returned == 14.0


async def test_r15_max_retries_zero(autojump_clock: trio.testing.MockClock) -> None:
    """R-15: maxRetries 0 ⇒ no start, an end with attempt 0, no re-attempt."""
    provider, rec, _, _ = await run([err(), ok()], retry_settings(maxRetries=0))
    assert rec.of(AutoRetryStart) == []
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 0, ERR_503)]
    assert len(provider.requests) == 1


async def test_r15a_error_stays_in_context_after_max(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-15a: after the maximum, the last error stays in the runtime context."""
    provider = FauxProvider([err()] * 2)
    async with open_session(provider, settings=retry_settings(maxRetries=1)) as session:
        await session.prompt("Hi")
        assert [m.role for m in session.messages] == ["user", "assistant"]
        last = session.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.error_message == ERR_503
        assert [m.role for m in session.history] == ["user", "assistant", "assistant"]


async def test_r16_default_delays(autojump_clock: trio.testing.MockClock) -> None:
    """R-16: defaults wait 2000, 4000, 8000 ms; re-attempts at t = 2, 6, 14 s."""
    provider, rec, reply, returned = await run([err(), err(), err(), ok()])
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [2000, 4000, 8000]
    assert provider.request_times == [0.0, 2.0, 6.0, 14.0]
    assert (reply.text, returned) == ("Hello", 14.0)


async def test_r16_base_delay_setting(autojump_clock: trio.testing.MockClock) -> None:
    """R-16: baseDelayMs 500 ⇒ 500, 1000 ms."""
    provider, rec, _, _ = await run([err(), err(), ok()], retry_settings(baseDelayMs=500))
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [500, 1000]
    assert provider.request_times == [0.0, 0.5, 1.5]


USAGE_LIMIT = "429 usage_limit_reached: The usage limit has been reached\nretry-after: 600"


async def test_r17_usage_limit_rotates_credential(autojump_clock: trio.testing.MockClock) -> None:
    """R-17: a usage limit with a spare key ⇒ delayMs 0, the re-attempt uses the spare."""
    store = InMemoryCredentialStore(keys={"faux": ["key-one", "key-two"]}, clock=trio.current_time)
    provider, rec, reply, returned = await run([err(USAGE_LIMIT), ok()], credentials=store)
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [0]
    assert [r.api_key for r in provider.requests] == ["key-one", "key-two"]
    assert store.blocked_until("faux", 0) == 600.0  # retry-after: 600 s from t = 0
    assert (reply.text, returned) == ("Hello", 0.0)


async def test_r17_usage_limit_without_spare_keeps_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-17: with no other key, the hint only informs the store; the delay stays 2000."""
    store = InMemoryCredentialStore(keys={"faux": ["only"]}, clock=trio.current_time)
    provider, rec, _, _ = await run([err(USAGE_LIMIT), ok()], credentials=store)
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [2000]
    assert provider.request_times == [0.0, 2.0]
    assert [r.api_key for r in provider.requests] == ["only", "only"]


async def test_r17_usage_limit_without_store(autojump_clock: trio.testing.MockClock) -> None:
    """R-17: without a credential store a usage limit is an ordinary retry."""
    _, rec, _, _ = await run([err(USAGE_LIMIT), ok()])
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [2000]


async def test_r19_start_event_fields(autojump_clock: trio.testing.MockClock) -> None:
    """R-19: auto_retry_start carries attempt, maxAttempts (= maxRetries), delayMs, error."""
    _, rec, _, _ = await run([err("502 Bad Gateway"), ok()], retry_settings(maxRetries=5))
    assert rec.of(AutoRetryStart) == [AutoRetryStart(1, 5, 2000, "502 Bad Gateway")]


async def test_r20_r51_error_leaves_context_stays_in_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-20, R-51: retried errors leave the runtime context but stay in the history."""
    provider = FauxProvider([err(), err("500 Internal Server Error"), ok()])
    async with open_session(provider) as session:
        await session.prompt("Hi")
        context = [(m.role, m.text) for m in session.messages]
        assert context == [("user", "Hi"), ("assistant", "Hello")]
        errors = [
            m.error_message
            for m in session.history
            if isinstance(m, AssistantMessage) and m.stop_reason == "error"
        ]
        assert errors == [ERR_503, "500 Internal Server Error"]


async def test_r20a_failed_messages_are_never_sent(autojump_clock: trio.testing.MockClock) -> None:
    """R-20a: an error left in the context (retry off) is not in the next request."""
    provider = FauxProvider([err(), ok("second")])
    async with open_session(provider, settings=retry_settings(enabled=False)) as session:
        await session.prompt("one")
        assert [m.role for m in session.messages] == ["user", "assistant"]
        await session.prompt("two")
    sent = provider.requests[1].messages
    assert [(m.role, m.text) for m in sent] == [("user", "one"), ("user", "two")]


async def test_r22_reattempt_sends_no_new_user_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-22: the re-attempt re-sends the context without the error, with no new user message."""
    provider, _, _, _ = await run([err(), ok()])
    first, second = provider.requests
    assert first.messages == second.messages
    assert [type(m) for m in second.messages] == [UserMessage]


async def test_r23_r23a_success_event_order(autojump_clock: trio.testing.MockClock) -> None:
    """R-23, R-23a: message_end → auto_retry_end(success) → turn_end → agent_end."""
    _, rec, _, _ = await run([err(), err(), ok()])
    assert rec.types == TWO_503_THEN_OK
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(success=True, attempt=2)]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, True, False]


async def test_r23a_numbering_restarts_each_prompt(autojump_clock: trio.testing.MockClock) -> None:
    """R-23a, R-24: a later prompt's chain starts again at attempt 1."""
    provider = FauxProvider([err(), ok("a"), err(), err(), ok("b")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("one")
        await session.prompt("two")
    assert [e.attempt for e in rec.of(AutoRetryStart)] == [1, 1, 2]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 1), AutoRetryEnd(True, 2)]


async def test_r24_fresh_chain_after_reset_within_one_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-24: success (a tool call) resets; a later error in the same run starts a new chain."""
    from trio_session import Tool, ToolCall

    async def echo(args: Any) -> str:
        return str(args["x"])

    calls = (ToolCall(id="c1", name="echo", arguments={"x": 1}),)
    provider = FauxProvider([err(), FauxReply(tool_calls=calls), err(), ok()])
    tool = Tool(name="echo", execute=echo)
    async with open_session(provider, tools=[tool]) as session:
        rec = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
        returned = trio.current_time()
        assert_idle(session)
    assert [e.attempt for e in rec.of(AutoRetryStart)] == [1, 1]
    assert rec.times_of("auto_retry_start") == [0.0, 2.0]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 1), AutoRetryEnd(True, 1)]
    assert check_retry_events(rec.events) == 2
    assert (reply.text, returned) == ("Hello", 4.0)


@PROFILES
async def test_r25_reattempt_ends_non_retryable(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-25: a re-attempt ending in a 400 ends the chain with that error, no more tries."""
    provider, rec, reply, returned = await run_in(profile, [err(), err(ERR_400), ok()])
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, ERR_400)]
    assert (len(provider.requests), reply.error_message, returned) == (2, ERR_400, 2.0)


@PROFILES
async def test_r25_reattempt_overflow_goes_to_compaction(
    autojump_clock: trio.testing.MockClock,
    profile: str,
) -> None:
    """R-25: a re-attempt that overflows ends the chain, then compaction runs."""
    provider = FauxProvider([ok("earlier"), err(), err(ERR_OVERFLOW), ok("compacted")])
    # keepRecentTokens 1: pi 1.6.0's cut leaves "one" to compact (R-56a)
    settings = in_profile(profile, {"compaction": {"keepRecentTokens": 1}})
    async with open_session(
        provider, settings=settings, compactor=DropOldestCompactor()
    ) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("one")
        reply = await session.prompt("two")
    i = rec.types.index("auto_retry_end")
    assert rec.types[i : i + 2] == ["auto_retry_end", "compaction_start"]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, ERR_OVERFLOW)]
    assert reply.text == "compacted"


# -- §4 backoff extras (R-28) ------------------------------------------------------------


async def test_r26_defaults(autojump_clock: trio.testing.MockClock) -> None:
    """R-26: enabled, 3 retries, 2000 ms base, unless settings say otherwise."""
    async with open_session(FauxProvider([])) as session:
        retry = session.settings.retry
        assert (retry.enabled, retry.max_retries, retry.base_delay_ms) == (True, 3, 2000)


@PROFILES
async def test_r28_max_delay_caps_each_wait(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-28: maxDelayMs 3000 ⇒ waits 2000, 3000, 3000."""
    provider, rec, _, _ = await run_in(
        profile, [err()] * 3 + [ok()], retry_settings(maxDelayMs=3000)
    )
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [2000, 3000, 3000]
    assert provider.request_times == [0.0, 2.0, 5.0, 8.0]


@PROFILES
async def test_r28_respect_retry_after(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-28: respectRetryAfter waits max(exponential, hint) on any retryable error."""
    text = "429 Too Many Requests\nretry-after: 7"
    provider, rec, _, _ = await run_in(
        profile, [err(text), err(text), ok()], retry_settings(respectRetryAfter=True)
    )
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [7000, 7000]
    assert provider.request_times == [0.0, 7.0, 14.0]


@PROFILES
async def test_r28_hint_above_cap_ends_chain(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-28: a hint above maxDelayMs is not slept: the chain ends naming the wait."""
    text = "429 Too Many Requests\nretry-after: 120"
    settings = retry_settings(respectRetryAfter=True, maxDelayMs=60000)
    provider, rec, _, returned = await run_in(profile, [err(text), ok()], settings)
    final = "server asked to wait 120000 ms before retrying, more than retry.maxDelayMs (60000 ms)"
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, final)]
    assert rec.of(AutoRetryStart) == []
    assert (len(provider.requests), returned) == (1, 0.0)


@PROFILES
async def test_r28_huge_hint_is_refused_by_the_provider_cap(
    autojump_clock: trio.testing.MockClock,
    profile: str,
) -> None:
    """R-28: retry-after 1e23 s, no maxDelayMs: provider.maxRetryDelayMs ends the chain."""
    text = "429 Too Many Requests\nretry-after: 100000000000000000000000"
    provider, rec, _, returned = await run_in(
        profile, [err(text), ok()], retry_settings(respectRetryAfter=True)
    )
    final = (
        "server asked to wait 9007199254740991 ms before retrying, "
        "more than retry.provider.maxRetryDelayMs (60000 ms)"
    )
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, final)]
    assert rec.of(AutoRetryStart) == []
    assert (len(provider.requests), returned) == (1, 0.0)


@PROFILES
async def test_r28_uncapped_endless_hint_sleeps_without_overflow(
    autojump_clock: trio.testing.MockClock,
    profile: str,
) -> None:
    """R-28: maxRetryDelayMs 0 and a 5000-digit retry-after: a long sleep, no OverflowError."""
    text = "429 Too Many Requests\nretry-after: " + "9" * 5000
    settings = {"retry": {"respectRetryAfter": True, "provider": {"maxRetryDelayMs": 0}}}
    provider, rec, reply, _ = await run_in(profile, [err(text), ok()], settings)
    longest = 2**53 - 1
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [longest]
    assert provider.request_times == [0.0, longest / 1000]
    assert reply.text == "Hello"


@PROFILES
async def test_r28_usage_limit_above_the_provider_cap_rotates(
    autojump_clock: trio.testing.MockClock,
    profile: str,
) -> None:
    """R-28, R-17: a usage-limit hint above the cap rotates to a spare key instead of ending."""
    store = InMemoryCredentialStore(keys={"faux": ["key-one", "key-two"]}, clock=trio.current_time)
    settings = retry_settings(respectRetryAfter=True)  # retry-after: 600 s > 60 s
    provider, rec, reply, returned = await run_in(
        profile, [err(USAGE_LIMIT), ok()], settings, credentials=store
    )
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [0]
    assert [r.api_key for r in provider.requests] == ["key-one", "key-two"]
    assert (reply.text, returned) == ("Hello", 0.0)


@PROFILES
async def test_r28_jitter_stays_within_bounds(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-28: full jitter draws each wait from [0, exponential]."""
    _, rec, _, _ = await run_in(profile, [err()] * 3 + [ok()], retry_settings(jitter="full"))
    delays = [e.delay_ms for e in rec.of(AutoRetryStart)]
    assert all(0 <= d <= cap for d, cap in zip(delays, [2000, 4000, 8000], strict=True))


# -- §6 prompt completion -----------------------------------------------------------------


@PROFILES
async def test_r35_prompt_returns_when_chain_ends(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-35: prompt() returns at t = 6 s, right after the chain's success end."""
    _, rec, _, returned = await run_in(profile, [err(), err(), ok()])
    assert rec.times_of("auto_retry_end") == [6.0]
    assert returned == 6.0


@PROFILES
async def test_r36_second_prompt_is_refused(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-36: a second prompt() while one runs raises SessionBusyError; nothing interleaves."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider, settings=in_profile(profile)) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "first")
            await trio.sleep(1)
            with pytest.raises(SessionBusyError, match=r"^the session is already processing"):
                await session.prompt("second")
        assert [m.text for m in session.messages] == ["first", "Hello"]


async def test_busy_error_points_at_the_queues(autojump_clock: trio.testing.MockClock) -> None:
    """R-36, issue 12: the refusal says how to queue instead (steer / follow_up)."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        nursery.start_soon(session.prompt, "first")
        await trio.sleep(1)  # in the backoff sleep: still busy
        assert session.is_retrying
        with pytest.raises(SessionBusyError) as caught:
            await session.prompt("second")
    assert "steer()" in str(caught.value)
    assert "follow_up()" in str(caught.value)
    assert "streamingBehavior" in str(caught.value)


async def test_r37_programmatic_toggle(autojump_clock: trio.testing.MockClock) -> None:
    """R-37: set_auto_retry_enabled writes retry.enabled; auto_retry_enabled reads it."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        assert session.auto_retry_enabled is True
        session.set_auto_retry_enabled(False)
        assert session.auto_retry_enabled is False
        assert session.settings.retry.enabled is False
        rec = EventRecorder.attach(session)
        await session.prompt("Hi")
        assert rec.of(AutoRetryStart) == []
        session.set_auto_retry_enabled(True)
        assert session.auto_retry_enabled is True
