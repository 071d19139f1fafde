"""``retry.profile`` (SPEC §12, docs/spec.md R-53 … R-56): the seed's rules and pi 1.6.0's,
side by side on virtual time.

Each scenario runs a real session on ``autojump_clock`` under both profiles and asserts
the exact delays and request times of each: where the profiles agree, one expectation;
where they differ, one per profile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    SettingsError,
    UserMessage,
    open_session,
)
from trio_session._retry.backoff import agent_delay_cap, plan_delay
from trio_session._settings.store import RetrySettings, SettingsStore
from trio_session.testing import EventRecorder

from .conftest import ERR_503, assert_idle, check_retry_events, err, hang, ok
from .test_cli import rpc_process, trio_session, write_settings
from .test_rpc_server import in_memory

PROFILES = pytest.mark.parametrize("profile", ["seed", "pi-1.6"])
USAGE_LIMIT = "429 usage_limit_reached: The usage limit has been reached\nretry-after: 600"


def profiled(profile: str, **retry: Any) -> dict[str, Any]:
    """Settings in file form: the ``retry`` group with ``profile`` and ``retry``."""
    return {"retry": {"profile": profile, **retry}}


async def run(
    script: list[FauxReply], settings: dict[str, Any], **kwargs: Any
) -> tuple[FauxProvider, EventRecorder, AssistantMessage, float]:
    """Prompt once on a fresh session; return provider, events, reply, return time."""
    provider = FauxProvider(script)
    async with open_session(provider, settings=settings, **kwargs) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
        returned = trio.current_time()
        assert_idle(session)
    assert check_retry_events(recorder.events) <= 1
    return provider, recorder, reply, returned


def delays(rec: EventRecorder) -> list[int]:
    return [e.delay_ms for e in rec.of(AutoRetryStart)]


def will_retry(rec: EventRecorder) -> list[bool]:
    return [e.will_retry for e in rec.of(AgentEnd)]


# -- the setting (R-53) --------------------------------------------------------------------


def test_r53_the_default_profile_is_the_seed() -> None:
    """R-53: retry.profile defaults to "seed"; maxAgentDelayMs to 60 000, as pi 1.6.0's."""
    retry = SettingsStore.coerce(None).current.retry
    assert (retry.profile, retry.max_agent_delay_ms) == ("seed", 60_000)


def test_r53_a_profile_from_a_settings_file(tmp_path: Path) -> None:
    """R-53: a settings file selects the profile and pi 1.6.0's maxAgentDelayMs."""
    path = write_settings(tmp_path, profiled("pi-1.6", maxAgentDelayMs=5000))
    store = SettingsStore.from_files(path)
    assert (store.current.retry.profile, store.current.retry.max_agent_delay_ms) == ("pi-1.6", 5000)


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        (
            {"profile": "pi-2"},
            'retry.profile must be one of "seed", "pi-1.6", not \'pi-2\' (in <programmatic>)',
        ),
        (
            {"profile": None},
            'retry.profile must be one of "seed", "pi-1.6", not None (in <programmatic>)',
        ),
        (
            {"maxAgentDelayMs": -1},
            "retry.maxAgentDelayMs must be an integer from 0 to 86400000, not -1 "
            "(in <programmatic>)",
        ),
    ],
)
async def test_r53_a_bad_profile_is_named(retry: dict[str, Any], message: str) -> None:
    """R-53, R-38: a bad retry.profile or maxAgentDelayMs is refused, naming the value."""
    with pytest.raises(SettingsError) as caught:
        async with open_session(FauxProvider([]), settings={"retry": retry}):
            pass
    assert str(caught.value) == message


def test_r53_cli_flag_selects_the_profile(tmp_path: Path) -> None:
    """R-53: demo --retry-profile pi-1.6, baseDelayMs 90 above maxAgentDelayMs 60, waits
    60 twice (R-53a); without the flag, the seed's 90 and 180."""
    path = write_settings(tmp_path, {"retry": {"baseDelayMs": 90, "maxAgentDelayMs": 60}})
    waits = {}
    for flag in ([], ["--retry-profile", "pi-1.6"]):
        result = trio_session("demo", "--json", "--settings", str(path), *flag)
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines()]
        waits[bool(flag)] = [e["delayMs"] for e in events if e["type"] == "auto_retry_start"]
    assert waits == {False: [90, 180], True: [60, 60]}


def test_r53_cli_flag_names_a_bad_value(tmp_path: Path) -> None:
    """R-53: --retry-profile pi-2 is a usage error naming the value and the choices."""
    result = trio_session("demo", "--retry-profile", "pi-2")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "trio-session demo: error: argument --retry-profile: invalid choice: 'pi-2' "
        "(choose from 'seed', 'pi-1.6')"
    )


async def test_r53_get_state_shows_the_profile(tmp_path: Path) -> None:
    """R-53: over RPC, get_state reports retryProfile: the settings' or --retry-profile's."""
    script = write_settings(tmp_path, [], name="script.json")
    settings = write_settings(tmp_path, profiled("pi-1.6"))
    base = ["rpc", "--provider", "faux", "--faux", str(script)]
    for args, shown in (
        (base, "seed"),
        ([*base, "--settings", str(settings)], "pi-1.6"),
        ([*base, "--settings", str(settings), "--retry-profile", "seed"], "seed"),
    ):
        async with rpc_process(tmp_path, *args) as (_, lines):
            await lines.send({"id": "1", "type": "get_state"})
            assert (await lines.read())["data"]["retryProfile"] == shown


# -- the delay cap (R-53a) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "base", "max_agent", "waits"),
    [
        ("seed", 2000, 60_000, [2000, 4000, 8000]),
        ("pi-1.6", 2000, 60_000, [2000, 4000, 8000]),
        ("seed", 40_000, 60_000, [40_000, 80_000, 160_000]),
        ("pi-1.6", 40_000, 60_000, [40_000, 60_000, 60_000]),
        ("pi-1.6", 90_000, 60_000, [60_000, 60_000, 60_000]),
        ("pi-1.6", 2000, 3000, [2000, 3000, 3000]),
        ("pi-1.6", 2000, 0, [0, 0, 0]),
        ("seed", 2000, 0, [2000, 4000, 8000]),
    ],
)
def test_r53a_the_one_cap_rule(profile: str, base: int, max_agent: int, waits: list[int]) -> None:
    """R-53a, R-16: pi-1.6 cuts each exponential wait to maxAgentDelayMs and goes on (0:
    no wait); the seed has no such cap."""
    settings = RetrySettings(profile=profile, base_delay_ms=base, max_agent_delay_ms=max_agent)  # type: ignore[arg-type]
    assert [plan_delay(n, settings).delay_ms for n in (1, 2, 3)] == waits
    assert agent_delay_cap(settings) == (max_agent if profile == "pi-1.6" else None)


@PROFILES
async def test_r53a_two_503s_then_success(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-53a, R-16: two 503s then an answer: the same schedule in both profiles, 2 s then 4 s,
    the answer at t = 6."""
    provider, rec, reply, returned = await run([err(), err(), ok()], profiled(profile))
    assert delays(rec) == [2000, 4000]
    assert provider.request_times == [0.0, 2.0, 6.0]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 2)]
    assert (reply.text, returned) == ("Hello", 6.0)


@PROFILES
async def test_r53a_over_the_maximum(autojump_clock: trio.testing.MockClock, profile: str) -> None:
    """R-53a, R-15, R-45a, R-56: four 503s: three re-attempts, then the same final failure
    (attempt 3), willRetry false on the last run only, in both profiles."""
    provider, rec, reply, returned = await run([err()] * 4, profiled(profile))
    assert provider.request_times == [0.0, 2.0, 6.0, 14.0]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 3, ERR_503)]
    assert will_retry(rec) == [True, True, True, False]
    assert (reply.error_message, returned) == (ERR_503, 14.0)


@pytest.mark.parametrize(
    ("profile", "waits", "times"),
    [
        ("seed", [40_000, 80_000, 160_000], [0.0, 40.0, 120.0, 280.0]),
        ("pi-1.6", [40_000, 60_000, 60_000], [0.0, 40.0, 100.0, 160.0]),
    ],
)
async def test_r53a_waits_past_the_cap(
    autojump_clock: trio.testing.MockClock, profile: str, waits: list[int], times: list[float]
) -> None:
    """R-53a: baseDelayMs 40 000, four 503s: pi-1.6 waits 40, 60, 60 s (capped, not given
    up); the seed 40, 80, 160 s; both end over the maximum."""
    settings = profiled(profile, baseDelayMs=40_000)
    provider, rec, _, returned = await run([err()] * 4, settings)
    assert delays(rec) == waits
    assert provider.request_times == times
    assert (rec.of(AutoRetryEnd), returned) == ([AutoRetryEnd(False, 3, ERR_503)], times[-1])


async def test_r53a_a_base_delay_above_the_cap(autojump_clock: trio.testing.MockClock) -> None:
    """R-53a: pi-1.6, baseDelayMs 90 000 above maxAgentDelayMs 60 000: every wait is the
    cap, 60 s, and the answer comes at t = 120."""
    settings = profiled("pi-1.6", baseDelayMs=90_000)
    provider, rec, reply, returned = await run([err(), err(), ok()], settings)
    assert delays(rec) == [60_000, 60_000]
    assert provider.request_times == [0.0, 60.0, 120.0]
    assert (reply.text, returned) == ("Hello", 120.0)


@PROFILES
async def test_r53a_retry_after_is_not_an_agent_wait(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-53a, R-28: a 503 with retry-after: 30 waits the exponential 2 s in both profiles
    (pi 1.6.0 ignores hints at the agent level); respectRetryAfter [beyond] waits the 30 s
    in both, the hint not cut to maxAgentDelayMs 10 000."""
    text = f"{ERR_503}\nretry-after: 30"
    provider, rec, _, _ = await run([err(text), ok()], profiled(profile, maxAgentDelayMs=10_000))
    assert (delays(rec), provider.request_times) == ([2000], [0.0, 2.0])
    settings = profiled(profile, maxAgentDelayMs=10_000, respectRetryAfter=True)
    provider, rec, _, _ = await run([err(text), ok()], settings)  # from t = 2
    assert (delays(rec), provider.request_times) == ([30_000], [2.0, 32.0])


# -- usage limits (R-53b, R-55) -----------------------------------------------------------


@attrs.define(eq=False)
class TellingStore(InMemoryCredentialStore):
    """An in-memory store that records what it is told, in order."""

    told: list[str] = attrs.field(factory=list, init=False)

    async def mark_usage_limit_reached(
        self,
        provider: str,
        session_id: str,
        *,
        retry_after_ms: int | None = None,
        base_url: str | None = None,
    ) -> bool:
        key = await self.api_key(provider, session_id)
        self.told.append(f"usage limit on {key} at {trio.current_time():g}")
        return await super().mark_usage_limit_reached(
            provider, session_id, retry_after_ms=retry_after_ms, base_url=base_url
        )

    async def share_cooldown(
        self, provider: str, session_id: str, *, base_url: str | None, wait_ms: int
    ) -> None:
        key = await self.api_key(provider, session_id)
        self.told.append(f"cooldown {wait_ms} on {key}")
        await super().share_cooldown(provider, session_id, base_url=base_url, wait_ms=wait_ms)


def two_keys() -> TellingStore:
    return TellingStore(keys={"faux": ["key-one", "key-two"]}, clock=trio.current_time)


@PROFILES
async def test_r55_a_usage_limit_with_a_second_key_switches_at_once(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-55, R-17, R-53b: a usage limit with a free key: delayMs 0, the re-attempt on the
    other key at t = 0, the store told once — in both profiles."""
    store = two_keys()
    provider, rec, reply, returned = await run(
        [err(USAGE_LIMIT), ok()], profiled(profile), credentials=store
    )
    assert delays(rec) == [0]
    assert will_retry(rec) == [True, False]
    assert [r.api_key for r in provider.requests] == ["key-one", "key-two"]
    assert provider.request_times == [0.0, 0.0]
    assert store.told == ["usage limit on key-one at 0"]
    assert store.blocked_until("faux", 0) == 600.0
    assert (reply.text, returned) == ("Hello", 0.0)


@PROFILES
async def test_r28b_the_fleet_hears_the_same_in_both_profiles(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-28b, R-53b: with sharedCooldown a usage limit's hint is shared on the key that hit
    it, then the store moves the session: the same calls, in the same order, either way."""
    store = two_keys()
    settings = profiled(profile, sharedCooldown=True)
    provider, rec, _, _ = await run([err(USAGE_LIMIT), ok()], settings, credentials=store)
    assert store.told == ["cooldown 600000 on key-one", "usage limit on key-one at 0"]
    assert (delays(rec), provider.request_times) == ([0], [0.0, 0.0])


@pytest.mark.parametrize("store", ["one key", "no store"])
async def test_r55_a_usage_limit_with_no_key_left_seed_waits(
    autojump_clock: trio.testing.MockClock, store: str
) -> None:
    """R-55, R-17: seed, a usage limit and no free key: the exponential 2 s, then again."""
    keys = TellingStore(keys={"faux": ["only"]}, clock=trio.current_time)
    extra = {"credentials": keys} if store == "one key" else {}
    provider, rec, reply, returned = await run([err(USAGE_LIMIT), ok()], profiled("seed"), **extra)
    assert delays(rec) == [2000]
    assert will_retry(rec) == [True, False]
    assert provider.request_times == [0.0, 2.0]
    assert (reply.text, returned) == ("Hello", 2.0)


@pytest.mark.parametrize("store", ["one key", "no store"])
async def test_r53b_a_usage_limit_with_no_key_left_pi16_ends(
    autojump_clock: trio.testing.MockClock, store: str
) -> None:
    """R-53b, R-55, R-56: pi-1.6, a usage limit and no free key: no retry, no auto_retry
    event, agent_end.willRetry false, prompt() returns the error at t = 0."""
    keys = TellingStore(keys={"faux": ["only"]}, clock=trio.current_time)
    extra = {"credentials": keys} if store == "one key" else {}
    provider, rec, reply, returned = await run(
        [err(USAGE_LIMIT), ok()], profiled("pi-1.6"), **extra
    )
    assert rec.of(AutoRetryStart) == []
    assert rec.of(AutoRetryEnd) == []
    assert will_retry(rec) == [False]
    assert len(provider.requests) == 1
    assert (reply.error_message, returned) == (USAGE_LIMIT, 0.0)
    assert keys.told == (["usage limit on only at 0"] if store == "one key" else [])


async def test_r53b_a_usage_limit_on_a_reattempt_ends_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-53b, R-25: pi-1.6, a 503 then a usage limit with no key left: the chain ends at
    t = 2 with the usage limit as its final error; that run's willRetry is false."""
    keys = TellingStore(keys={"faux": ["only"]}, clock=trio.current_time)
    provider, rec, reply, returned = await run(
        [err(), err(USAGE_LIMIT), ok()], profiled("pi-1.6"), credentials=keys
    )
    assert delays(rec) == [2000]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, USAGE_LIMIT)]
    assert will_retry(rec) == [True, False]
    assert provider.request_times == [0.0, 2.0]
    assert (reply.error_message, returned) == (USAGE_LIMIT, 2.0)
    assert keys.told == ["usage limit on only at 2"]


#: Codex's connection lifetime limit, as pi-ai's provider words it: R-17's ``limit_reached``
#: matches it, but it is no usage limit.
CONNECTION_LIMIT = "Codex error: websocket_connection_limit_reached"


@pytest.mark.parametrize("store", ["two keys", "no store"])
async def test_r53b_a_connection_limit_is_no_usage_limit_under_pi16(
    autojump_clock: trio.testing.MockClock, store: str
) -> None:
    """R-53b: pi-1.6, Codex's websocket_connection_limit_reached is retried as pi 1.6.0
    retries it — the exponential 2 s, on the same key — and the store is never told of a
    usage limit; with no store it is retried all the same."""
    keys = two_keys()
    extra = {"credentials": keys} if store == "two keys" else {}
    provider, rec, reply, returned = await run(
        [err(CONNECTION_LIMIT), ok()], profiled("pi-1.6"), **extra
    )
    assert delays(rec) == [2000]
    assert will_retry(rec) == [True, False]
    assert provider.request_times == [0.0, 2.0]
    assert (reply.text, returned) == ("Hello", 2.0)
    if store == "two keys":
        assert keys.told == []
        assert [r.api_key for r in provider.requests] == ["key-one", "key-one"]


async def test_r5_seed_does_not_retry_a_connection_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The seed's counterpart: R-5's pattern does not call the connection limit transient,
    so nothing is retried and no store is asked (pi 0.73.1 ends there too)."""
    keys = two_keys()
    provider, rec, reply, returned = await run(
        [err(CONNECTION_LIMIT), ok()], profiled("seed"), credentials=keys
    )
    assert (will_retry(rec), rec.of(AutoRetryStart), keys.told) == ([False], [], [])
    assert (len(provider.requests), reply.error_message, returned) == (1, CONNECTION_LIMIT, 0.0)


async def test_r53b_the_store_is_not_asked_past_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-53b, R-15: pi-1.6 with maxRetries 0: the usage limit is not reported (no retry
    could follow); the seed's one maximum check ends it as it would."""
    keys = two_keys()
    settings = profiled("pi-1.6", maxRetries=0)
    provider, rec, _, _ = await run([err(USAGE_LIMIT), ok()], settings, credentials=keys)
    assert keys.told == []
    assert (len(provider.requests), rec.of(AutoRetryStart)) == (1, [])


# -- our [beyond] rules in both profiles (R-55) ---------------------------------------------


@PROFILES
@pytest.mark.parametrize("cancel", ["abort_retry", "abort"])
async def test_r55_cancel_in_the_backoff(
    autojump_clock: trio.testing.MockClock, profile: str, cancel: str
) -> None:
    """R-55, R-29, R-30, R-32: abort_retry() or abort() 1.5 s into the 2 s wait: "Retry
    cancelled" at t = 1.5, one request, in both profiles."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider, settings=profiled(profile)) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1.5)
            if cancel == "abort":
                await session.abort()
            else:
                session.abort_retry()
        assert_idle(session)
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, "Retry cancelled")]
    assert rec.times_of("auto_retry_end") == [1.5]
    assert len(provider.requests) == 1


@PROFILES
async def test_r31_abort_retry_cancels_the_reattempt(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-31, R-55: abort_retry() at t = 3 while the re-attempt streams aborts it, in both
    profiles."""
    provider = FauxProvider([err(), hang()])
    async with open_session(provider, settings=profiled(profile)) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(3)
            session.abort_retry()
        last = session.history[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(False, 1, "Retry cancelled")]
    assert (provider.request_times, rec.times_of("auto_retry_end")) == ([0.0, 2.0], [3.0])


@PROFILES
async def test_r34a_r36_a_prompt_in_the_backoff_joins_the_reattempt(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-36, R-34a, R-55: a prompt 0.5 s into the backoff joins the re-attempt, sent at
    once with it (pi 1.6.0 would refuse it), in both profiles."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider, settings=profiled(profile)) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(0.5)
            assert session.join_retry("x") is True
    sent = [m.text for m in provider.requests[1].messages if isinstance(m, UserMessage)]
    assert (sent, provider.request_times) == (["p", "x"], [0.0, 0.5])
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 1)]


def without_timestamps(value: Any) -> Any:
    """A JSON value with every ``timestamp`` key left out, however deep."""
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value


async def test_r54_the_protocol_is_the_same_in_both_profiles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-54: over RPC, two 503s then an answer read the same in both profiles, line for
    line (willRetry and our other fields included); get_state differs in retryProfile only."""
    seen: dict[str, list[dict[str, Any]]] = {}
    states: dict[str, dict[str, Any]] = {}
    for profile in ("seed", "pi-1.6"):
        script: list[Any] = [{"error": ERR_503}, {"error": ERR_503}, {"text": "ok"}]
        async with in_memory(script, profiled(profile)) as s:
            await s.raw.send({"id": 1, "type": "prompt", "message": "p"})
            lines = []
            while (obj := await s.raw.read()).get("type") != "agent_settled":
                lines.append(obj)
            lines.append(obj)
            await s.raw.send({"id": 2, "type": "get_state"})
            states[profile] = (await s.raw.read())["data"]
        seen[profile] = [without_timestamps(o) for o in lines]
    assert seen["seed"] == seen["pi-1.6"]
    assert [o["type"] for o in seen["seed"]].count("auto_retry_start") == 2
    assert states["seed"].pop("retryProfile") == "seed"
    assert states["pi-1.6"].pop("retryProfile") == "pi-1.6"
    states["seed"].pop("sessionId")
    states["pi-1.6"].pop("sessionId")
    assert states["seed"] == states["pi-1.6"]
