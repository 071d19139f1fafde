"""A service's retry policy (issue 31): the total retry budget, the service preset,
the last real error behind an aborted reply, and structured failure data.

Each test runs on Trio's autojump clock and checks exact virtual times where time
matters; the sessions use ``FauxProvider`` (the provider seam) unless the test is
about what the HTTP adapter reads off a real response.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_session import (
    SERVICE_SETTINGS,
    AgentSession,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    MessageEnd,
    MessageUpdate,
    OpenAIProvider,
    OverloadedError,
    ProviderError,
    RetrySettings,
    SettingsError,
    event_to_json,
    message_to_json,
    open_session,
    settings_with,
)
from trio_session._core.failure import ProviderFailure, http_failure
from trio_session._retry.backoff import over_budget
from trio_session._retry.chain import RetryChain
from trio_session._retry.decide import Next
from trio_session.providers._error_text import redact
from trio_session.testing import EventRecorder, faux_script

from .http_server import ScriptedServer, respond
from .test_retry_chain import ERROR, ScriptHost

BUDGET_END = (
    "retry budget spent: waiting 4000 ms more would take this chain to 6000 ms, "
    "past retry.maxTotalMs (5000 ms); last error: 503 Service Unavailable"
)


# -- retry.maxTotalMs --------------------------------------------------------------


async def test_r61_the_chain_gives_up_before_a_wait_past_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61: with maxTotalMs 5000 the first wait (2 s) fits, the second (4 s, to 6 s)
    does not: the chain ends at 2 s, attempt 1, with the one-line finalError."""
    host = ScriptHost([(ERROR, Next.RETRY)], RetryChain())
    host.settings = RetrySettings(max_total_ms=5000)
    assert await host.chain.run(host, ERROR, Next.RETRY) is None
    assert host.events == [
        AutoRetryStart(1, 3, 2000, "503 Service Unavailable"),
        AutoRetryEnd(False, 1, BUDGET_END),
    ]
    assert host.reattempts == [2.0]
    assert trio.current_time() == 2.0


async def test_r61_the_budget_counts_the_reattempts_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61: a re-attempt that takes 3 s counts too: at 5 s, the 4 s wait would end at
    9 s, past a 8000 ms budget (without it, 2 + 3 + 4 = 9 s would be allowed)."""
    host = ScriptHost([(ERROR, Next.RETRY)], RetryChain(), streams_for=3.0)
    host.settings = RetrySettings(max_total_ms=8000)
    await host.chain.run(host, ERROR, Next.RETRY)
    assert host.events[-1] == AutoRetryEnd(
        False,
        1,
        "retry budget spent: waiting 4000 ms more would take this chain to 9000 ms, "
        "past retry.maxTotalMs (8000 ms); last error: 503 Service Unavailable",
    )
    assert trio.current_time() == 5.0


def test_r61_no_budget_by_default() -> None:
    """R-61, R-16: the default has no budget: any wait fits; the last error's first
    line ends the message."""
    assert RetrySettings().max_total_ms is None
    assert over_budget(10**9, 10**9, RetrySettings(), "x") is None
    refusal = over_budget(1, 2, RetrySettings(max_total_ms=2), "503 x\nretry-after: 9")
    assert refusal == (
        "retry budget spent: waiting 2 ms more would take this chain to 3 ms, "
        "past retry.maxTotalMs (2 ms); last error: 503 x"
    )


async def test_r61_a_session_gives_up_on_its_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61 through a session: three 503s under maxTotalMs 5000 end at 2 s with the
    budget's finalError; the prompt's reply is the second 503."""
    provider = FauxProvider(faux_script(["!503 Service Unavailable"] * 3))
    settings = {"retry": {"maxTotalMs": 5000}}
    async with open_session(provider, settings=settings) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert provider.request_times == [0.0, 2.0]
    ends = recorder.of(AutoRetryEnd)
    assert ends == [AutoRetryEnd(False, 1, BUDGET_END)]
    assert reply.error_message == "503 Service Unavailable"


# -- the service preset ------------------------------------------------------------


async def _one_session(settings: object, waits: list[int]) -> None:
    provider = FauxProvider(faux_script(["!503 Service Unavailable", "ok"]))
    async with open_session(provider, settings=settings) as session:  # type: ignore[arg-type]
        session.subscribe(
            lambda e: waits.append(e.delay_ms) if isinstance(e, AutoRetryStart) else None
        )
        await session.prompt("hi")


async def test_r62_defaults_retry_in_lock_step(autojump_clock: trio.testing.MockClock) -> None:
    """R-16: under the defaults 200 sessions that fail together all wait exactly 2000 ms."""
    waits: list[int] = []
    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(_one_session, None, waits)
    assert set(waits) == {2000}
    assert trio.current_time() == 2.0


async def test_r62_the_service_preset_spreads_200_sessions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-62: under SERVICE_SETTINGS the 200 first waits are spread over [1000, 2000] ms
    (equal jitter): many different waits, none shorter than half of 2 s."""
    waits: list[int] = []
    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(_one_session, SERVICE_SETTINGS, waits)
    assert len(waits) == 200
    assert min(waits) >= 1000
    assert max(waits) <= 2000
    assert len(set(waits)) > 100
    assert trio.current_time() == max(waits) / 1000


async def test_r62_the_service_preset_waits_what_the_server_asks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-62: under SERVICE_SETTINGS a 503 with retry-after 30 is retried at 30 s (the
    defaults retry at 2 s), and the budget of 60 s is in effect."""
    error = "503 Service Unavailable\nretry-after: 30"
    provider = FauxProvider([FauxReply(error=error), FauxReply(text="ok")])
    async with open_session(provider, settings=SERVICE_SETTINGS) as session:
        assert session.settings.retry.max_total_ms == 60_000
        await session.prompt("hi")
    assert provider.request_times == [0.0, 30.0]


async def test_settings_with_changes_one_key_of_the_preset() -> None:
    """Issue 45: ``settings_with`` gives the preset with one key changed, no dict-splat;
    the preset itself is untouched, the result read-only, and a session runs on it."""
    settings = settings_with(SERVICE_SETTINGS, {"retry": {"maxRetries": 5}})
    assert settings == {
        "retry": {
            "jitter": "equal",
            "respectRetryAfter": True,
            "maxTotalMs": 60_000,
            "maxRetries": 5,
        }
    }
    assert "maxRetries" not in SERVICE_SETTINGS["retry"]
    with pytest.raises(TypeError):
        settings["retry"]["maxRetries"] = 6
    async with open_session(FauxProvider([]), settings=settings) as session:
        retry = session.settings.retry
    assert (retry.max_retries, retry.jitter, retry.max_total_ms) == (5, "equal", 60_000)


def test_settings_with_merges_groups_at_any_depth() -> None:
    """A change to ``retry.provider`` keeps the rest of ``retry`` and of ``retry.provider``;
    a derived preset derives again; a value that is not a group replaces the one below."""
    mine = settings_with(SERVICE_SETTINGS, {"retry": {"provider": {"timeoutMs": 30_000}}})
    again = settings_with(
        mine, {"retry": {"provider": {"idleTimeoutMs": 5_000}, "maxTotalMs": None}}
    )
    assert again == {
        "retry": {
            "jitter": "equal",
            "respectRetryAfter": True,
            "maxTotalMs": None,
            "provider": {"timeoutMs": 30_000, "idleTimeoutMs": 5_000},
        }
    }
    assert mine["retry"]["maxTotalMs"] == 60_000


def test_settings_with_refuses_a_bad_key_at_once() -> None:
    """A misspelt key or a bad value is refused when the preset is derived, naming the
    key, not later when a session opens."""
    known = (
        "enabled, maxRetries, baseDelayMs, maxDelayMs, jitter, respectRetryAfter, "
        "classifier, profile, maxAgentDelayMs, sharedCooldown, maxTotalMs, "
        "provider.maxRetryDelayMs, provider.timeoutMs, provider.idleTimeoutMs, "
        "provider.maxRetries"
    )
    unknown = f"retry.maxRetrys is not a known setting (known retry keys: {known})"
    with pytest.raises(SettingsError, match=f"^{re.escape(unknown)} \\(in <programmatic>\\)$"):
        settings_with(SERVICE_SETTINGS, {"retry": {"maxRetrys": 5}})
    with pytest.raises(
        SettingsError,
        match=r"^retry\.maxRetries must be an integer from 0 to 100, not -1 \(in <programmatic>\)$",
    ):
        settings_with(SERVICE_SETTINGS, {"retry": {"maxRetries": -1}})


# -- the last real error behind an aborted reply -------------------------------------


def _hanging_after_a_503() -> FauxProvider:
    return FauxProvider([FauxReply(error="503 Service Unavailable"), FauxReply(hang=True)])


async def test_r63_a_deadline_keeps_the_503_on_the_aborted_reply(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-63: a caller's 3 s deadline lands in the re-attempt (sent at 2 s): the reply
    ends aborted, and its last_error is the 503 that caused the wait."""
    provider = _hanging_after_a_503()
    async with open_session(provider) as session:
        with trio.move_on_after(3) as deadline:
            await session.prompt("hi")
        aborted = session.history[-1]
    assert deadline.cancelled_caught
    assert trio.current_time() == 3.0
    assert isinstance(aborted, AssistantMessage)
    assert aborted.stop_reason == "aborted"
    assert aborted.last_error is not None
    assert aborted.last_error.error_message == "503 Service Unavailable"
    assert aborted.last_error is session.history[-2]


async def test_r63_abort_returns_an_aborted_reply_naming_the_503(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-63: abort() during the re-attempt: prompt() returns the aborted reply, whose
    last_error is the 503; a reply of a first run carries none."""
    provider = _hanging_after_a_503()
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        nursery.start_soon(_abort_at, session, 2.5)
        reply = await session.prompt("hi")
    assert reply.stop_reason == "aborted"
    assert reply.last_error is not None
    assert reply.last_error.error_message == "503 Service Unavailable"
    assert reply.last_error.last_error is None


async def _abort_at(session: AgentSession, when: float) -> None:
    await trio.sleep_until(when)
    await session.abort()


async def test_r63_raise_on_error_chains_the_retried_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-63: a 503 retried into a 400 raises the 400's ProviderError with the 503's
    OverloadedError as its __cause__."""
    provider = FauxProvider(faux_script(["!503 Service Unavailable", "!400 Bad Request: no"]))
    async with open_session(provider) as session:
        with pytest.raises(ProviderError, match=r"^400 Bad Request: no$") as info:
            await session.prompt("hi", raise_on_error=True)
    cause = info.value.__cause__
    assert isinstance(cause, OverloadedError)
    assert str(cause) == "503 Service Unavailable"


async def test_r63_the_wire_shapes_do_not_change(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-63, R-64: the aborted reply's JSON (message_end, session file) has pi's keys
    only: no lastError, no failure. The caller cancels once the re-attempt streams."""
    provider = FauxProvider(
        [FauxReply(error="503 Service Unavailable"), FauxReply(text="par", hang=True)]
    )
    path = tmp_path / "s.jsonl"
    streaming = trio.Event()
    ends: list[dict[str, object]] = []

    def watch(event: object) -> None:
        if isinstance(event, MessageUpdate):
            streaming.set()
        if isinstance(event, MessageEnd):
            ends.append(event_to_json(event))

    async with open_session(provider, history=path) as session:
        session.subscribe(watch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "hi")
            await streaming.wait()
            nursery.cancel_scope.cancel()
        aborted = session.history[-1]
    assert isinstance(aborted, AssistantMessage)
    assert aborted.stop_reason == "aborted"
    assert aborted.last_error is not None
    data = message_to_json(aborted)
    assert "lastError" not in data
    assert "failure" not in data
    assert ends[-1]["message"] == data
    text = path.read_text()
    assert "Request was aborted" in text
    assert "lastError" not in text
    assert '"failure"' not in text


# -- a failure as data ----------------------------------------------------------------

RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "code": "rate_limit_exceeded",
    }
}


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


async def test_r64_the_reply_carries_the_response_as_data(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """R-64, R-52: a real 429 over HTTP: the reply's failure has the status, the wait
    hint, the request id, the kept headers and the body's type and code; the text the
    classifier reads is the same as before, and the JSON shape has no failure key."""
    headers = [
        ("retry-after", "7"),
        ("x-request-id", "req_abc123"),
        ("x-ratelimit-remaining-requests", "0"),
        ("set-cookie", "session=not-kept"),
    ]
    server.script(respond(429, RATE_LIMITED, headers=headers))
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test", settings={"retry": {"enabled": False}}) as session,
    ):
        reply = await session.prompt("hi")
    assert reply.error_message == (
        "429 Too Many Requests: Rate limit reached for requests (rate_limit_exceeded)\n"
        "retry-after: 7"
    )
    assert reply.failure == ProviderFailure(
        status=429,
        retry_after_ms=7000,
        request_id="req_abc123",
        error_type="requests",
        error_code="rate_limit_exceeded",
        headers={
            "retry-after": "7",
            "x-ratelimit-remaining-requests": "0",
            "x-request-id": "req_abc123",
        },
    )
    assert "failure" not in message_to_json(reply)


def test_r64_anthropic_and_gemini_bodies() -> None:
    """R-64: Anthropic's body request_id and error type; Gemini's listed error with a
    numeric code and a status; a body that is not JSON gives the status alone."""
    anthropic = http_failure(
        529,
        {"Request-Id": "req_011"},
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
        '"request_id":"req_body"}',
    )
    assert (anthropic.request_id, anthropic.error_type, anthropic.error_code) == (
        "req_011",
        "overloaded_error",
        None,
    )
    assert anthropic.headers == {"request-id": "req_011"}
    gemini = http_failure(
        429,
        {},
        '[{"error":{"code":429,"message":"Quota","status":"RESOURCE_EXHAUSTED"}}]',
    )
    assert (gemini.error_type, gemini.error_code, gemini.request_id) == (
        "RESOURCE_EXHAUSTED",
        "429",
        None,
    )
    body_id = http_failure(500, {}, '{"request_id":"req_body","error":{}}')
    assert body_id.request_id == "req_body"
    assert http_failure(502, {}, "<html>bad gateway</html>") == ProviderFailure(status=502)


def test_r64_secrets_never_reach_the_failure() -> None:
    """R-64: every kept text passes the adapter's redaction."""
    secret = "sk-proj-SECRETxxxxxxxxxxxxxxxx"
    failure = http_failure(
        401,
        {"x-request-id": f"id-{secret}"},
        f'{{"error":{{"type":"auth","code":"{secret}"}}}}',
        clean=lambda text: redact(text, secret),
    )
    assert secret not in repr(failure)
    assert failure.error_code == "[redacted]"
