"""Backoff: the reference's exponential schedule and the optional R-28 extras (R-16, R-28)."""

from __future__ import annotations

import math
import random

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_session import (
    DelayPlan,
    ProviderRetrySettings,
    RetrySettings,
    exponential_delay_ms,
    parse_retry_after_ms,
    plan_delay,
)
from trio_session._retry.backoff import MAX_WAIT_MS, wait_cap
from trio_session._settings.store import RANGES, Jitter

DRAWS = 2000
#: ``retry.provider.maxRetryDelayMs: 0``: no cap on a server-requested wait.
NO_HINT_CAP = ProviderRetrySettings(max_retry_delay_ms=0)


def waited(plan: DelayPlan) -> int:
    """The delay of a plan that must have one (no refusal)."""
    assert plan.refusal is None
    assert plan.delay_ms is not None
    return plan.delay_ms


# --- R-16 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 2000), (2, 4000), (3, 8000), (4, 16000), (5, 32000)],
)
def test_exponential_delay_doubles(attempt: int, expected: int) -> None:
    """R-16: baseDelayMs * 2 ** (attempt - 1) gives 2000, 4000, 8000, 16000, 32000."""
    assert exponential_delay_ms(attempt, 2000) == expected


def test_exponential_delay_with_zero_base() -> None:
    """R-16: baseDelayMs 0 (allowed by R-38) means no wait at all."""
    assert [exponential_delay_ms(a, 0) for a in range(1, 6)] == [0, 0, 0, 0, 0]


@pytest.mark.parametrize("attempt", [0, -1])
def test_exponential_delay_rejects_attempt_below_one(attempt: int) -> None:
    """R-16: attempts are 1-based; attempt 0 or below raises ValueError."""
    with pytest.raises(ValueError, match=rf"^attempt must be 1 or more, not {attempt}$"):
        exponential_delay_ms(attempt, 2000)


def test_plan_delay_rejects_attempt_zero() -> None:
    """R-16: plan_delay refuses attempt 0 with the same message."""
    with pytest.raises(ValueError, match=r"^attempt must be 1 or more, not 0$"):
        plan_delay(0, RetrySettings())


# --- defaults and cap -----------------------------------------------------------------


def test_default_settings_plan_the_reference_schedule() -> None:
    """R-28: with the extras off, plan_delay is exactly the R-16 exponential."""
    settings = RetrySettings()
    plans = [plan_delay(a, settings) for a in range(1, 6)]
    assert plans == [DelayPlan(d) for d in (2000, 4000, 8000, 16000, 32000)]
    assert all(p.refusal is None for p in plans)


def test_default_settings_ignore_a_hint() -> None:
    """R-28: respectRetryAfter is off by default, so a server hint changes nothing."""
    assert plan_delay(1, RetrySettings(), hint_ms=30000) == DelayPlan(2000)


def test_max_delay_caps_each_wait() -> None:
    """R-28: maxDelayMs caps any single wait; shorter waits are untouched."""
    settings = RetrySettings(max_delay_ms=10000)
    delays = [plan_delay(a, settings).delay_ms for a in range(1, 7)]
    assert delays == [2000, 4000, 8000, 10000, 10000, 10000]


def test_max_delay_equal_to_delay_is_not_a_change() -> None:
    """R-28: a cap equal to the exponential delay leaves it as is."""
    assert plan_delay(3, RetrySettings(max_delay_ms=8000)) == DelayPlan(8000)


# --- jitter ---------------------------------------------------------------------------


def test_full_jitter_stays_in_zero_to_delay() -> None:
    """R-28: jitter "full" draws every wait from [0, d]."""
    rng = random.Random(1234)
    settings = RetrySettings(jitter="full")
    delays = [waited(plan_delay(3, settings, rng=rng)) for _ in range(DRAWS)]
    assert all(0 <= d <= 8000 for d in delays)
    assert len(set(delays)) > DRAWS // 2  # actually random, not a constant
    assert min(delays) < 1000
    assert max(delays) > 7000


def test_equal_jitter_stays_in_half_to_delay() -> None:
    """R-28: jitter "equal" draws every wait from [d/2, d]."""
    rng = random.Random(5678)
    settings = RetrySettings(jitter="equal")
    delays = [waited(plan_delay(3, settings, rng=rng)) for _ in range(DRAWS)]
    assert all(4000 <= d <= 8000 for d in delays)
    assert len(set(delays)) > DRAWS // 2
    assert min(delays) < 4500
    assert max(delays) > 7500


def test_jitter_applies_after_the_cap() -> None:
    """R-28: jitter spreads the capped delay, so no wait exceeds maxDelayMs."""
    rng = random.Random(42)
    settings = RetrySettings(max_delay_ms=5000, jitter="equal")
    delays = [waited(plan_delay(10, settings, rng=rng)) for _ in range(DRAWS)]
    assert all(2500 <= d <= 5000 for d in delays)


def test_seeded_jitter_is_repeatable() -> None:
    """R-28: the same seed gives the same jittered schedule."""
    settings = RetrySettings(jitter="full")
    first = [plan_delay(a, settings, rng=random.Random(7)) for a in range(1, 6)]
    second = [plan_delay(a, settings, rng=random.Random(7)) for a in range(1, 6)]
    assert first == second


def test_no_jitter_ignores_the_rng() -> None:
    """R-28: with jitter "none" the rng is not consulted and the delay is exact."""
    rng = random.Random(99)
    state = rng.getstate()
    assert plan_delay(2, RetrySettings(), rng=rng) == DelayPlan(4000)
    assert rng.getstate() == state


@hypothesis.settings(deadline=None)
@given(
    attempt=st.integers(min_value=1, max_value=20),
    base=st.integers(min_value=0, max_value=10**6),
    cap=st.none() | st.integers(min_value=1, max_value=10**9),
    jitter=st.sampled_from(["none", "full", "equal"]),
    seed=st.integers(),
)
def test_jitter_bounds_property(
    attempt: int, base: int, cap: int | None, jitter: Jitter, seed: int
) -> None:
    """R-28: for any attempt, base, cap and seed the wait lies in the jitter's range."""
    d = base * 2 ** (attempt - 1)
    if cap is not None:
        d = min(d, cap)
    settings = RetrySettings(base_delay_ms=base, max_delay_ms=cap, jitter=jitter)
    plan = plan_delay(attempt, settings, rng=random.Random(seed))
    assert plan.refusal is None
    assert plan.delay_ms is not None
    if jitter == "none":
        assert plan.delay_ms == d
    elif jitter == "full":
        assert 0 <= plan.delay_ms <= d
    else:
        assert d <= 2 * plan.delay_ms  # d/2 <= delay, without float division
        assert plan.delay_ms <= d
    assert plan_delay(attempt, settings, rng=random.Random(seed)) == plan


# --- respectRetryAfter ----------------------------------------------------------------


def test_respect_retry_after_waits_for_a_longer_hint() -> None:
    """R-28: respectRetryAfter waits max(exponential, hint) — here the hint."""
    settings = RetrySettings(respect_retry_after=True)
    assert plan_delay(1, settings, hint_ms=30000) == DelayPlan(30000)


def test_respect_retry_after_keeps_a_longer_exponential() -> None:
    """R-28: respectRetryAfter waits max(exponential, hint) — here the exponential."""
    settings = RetrySettings(respect_retry_after=True)
    assert plan_delay(3, settings, hint_ms=500) == DelayPlan(8000)


def test_respect_retry_after_without_a_hint() -> None:
    """R-28: with no hint, respectRetryAfter changes nothing."""
    settings = RetrySettings(respect_retry_after=True)
    assert plan_delay(2, settings) == DelayPlan(4000)


def test_hint_is_ignored_when_respect_retry_after_is_off() -> None:
    """R-28: with respectRetryAfter false the hint is ignored, even one above the cap."""
    settings = RetrySettings(respect_retry_after=False, max_delay_ms=60000)
    assert plan_delay(1, settings, hint_ms=30000) == DelayPlan(2000)
    assert plan_delay(1, settings, hint_ms=120000) == DelayPlan(2000)


@pytest.mark.parametrize("jitter", ["full", "equal"])
def test_jitter_never_shortens_a_server_wait(jitter: Jitter) -> None:
    """R-28: jitter never shortens a server-requested wait."""
    rng = random.Random(2024)
    settings = RetrySettings(jitter=jitter, respect_retry_after=True)
    for _ in range(DRAWS):
        assert plan_delay(1, settings, hint_ms=5000, rng=rng) == DelayPlan(5000)
    delays = [waited(plan_delay(3, settings, hint_ms=5000, rng=rng)) for _ in range(DRAWS)]
    assert all(5000 <= d <= 8000 for d in delays)
    assert min(delays) == 5000  # the jittered wait fell below the hint and was raised to it


def test_hint_within_the_cap_is_slept() -> None:
    """R-28: a hint equal to maxDelayMs is honoured, not refused."""
    settings = RetrySettings(respect_retry_after=True, max_delay_ms=60000)
    assert plan_delay(1, settings, hint_ms=60000) == DelayPlan(60000)


def test_hint_above_the_cap_is_refused() -> None:
    """R-28: a hint above maxDelayMs is not slept; the plan names the wait and the cap."""
    settings = RetrySettings(max_delay_ms=60000, respect_retry_after=True)
    plan = plan_delay(1, settings, hint_ms=120000)
    assert plan.delay_ms is None
    assert plan.refusal == (
        "server asked to wait 120000 ms before retrying, more than retry.maxDelayMs (60000 ms)"
    )


@pytest.mark.parametrize("jitter", ["none", "full", "equal"])
def test_hint_above_the_cap_is_refused_whatever_the_jitter(jitter: Jitter) -> None:
    """R-28: the refusal does not depend on jitter."""
    settings = RetrySettings(max_delay_ms=60000, respect_retry_after=True, jitter=jitter)
    plan = plan_delay(4, settings, hint_ms=60001, rng=random.Random(0))
    assert plan == DelayPlan(
        None,
        "server asked to wait 60001 ms before retrying, more than retry.maxDelayMs (60000 ms)",
    )


def test_hint_without_a_cap_is_always_slept() -> None:
    """R-28: without maxDelayMs and with provider.maxRetryDelayMs 0, any hint is waited for."""
    settings = RetrySettings(respect_retry_after=True, provider=NO_HINT_CAP)
    assert plan_delay(1, settings, hint_ms=3_600_000) == DelayPlan(3_600_000)


def test_hint_above_the_provider_cap_is_refused_by_default() -> None:
    """R-28: with maxDelayMs unset, provider.maxRetryDelayMs (60000) caps a server wait."""
    settings = RetrySettings(respect_retry_after=True)
    plan = plan_delay(1, settings, hint_ms=60001)
    assert plan == DelayPlan(
        None,
        "server asked to wait 60001 ms before retrying, "
        "more than retry.provider.maxRetryDelayMs (60000 ms)",
    )
    assert plan_delay(1, settings, hint_ms=60000) == DelayPlan(60000)


def test_max_delay_replaces_the_provider_cap() -> None:
    """R-28: a maxDelayMs above provider.maxRetryDelayMs lets a longer hint be slept."""
    settings = RetrySettings(respect_retry_after=True, max_delay_ms=120_000)
    assert plan_delay(1, settings, hint_ms=100_000) == DelayPlan(100_000)


def test_no_wait_is_longer_than_max_wait_ms() -> None:
    """Every setting at its maximum, every attempt, any hint: a wait fits a float and JSON."""
    settings = RetrySettings(
        max_retries=RANGES["retry.maxRetries"][1],
        base_delay_ms=RANGES["retry.baseDelayMs"][1],
        respect_retry_after=True,
        provider=NO_HINT_CAP,
    )
    assert MAX_WAIT_MS == 2**53 - 1
    hint = parse_retry_after_ms("retry-after: " + "9" * 5000)
    assert hint == MAX_WAIT_MS
    for attempt in range(1, settings.max_retries + 1):
        for hint_ms in (None, 0, hint):
            delay = waited(plan_delay(attempt, settings, hint_ms=hint_ms))
            exponential = min(3_600_000 * 2 ** (attempt - 1), MAX_WAIT_MS)
            assert delay == max(exponential, hint_ms or 0)
            assert math.isfinite(delay / 1000)


@hypothesis.settings(deadline=None)
@given(
    attempt=st.integers(min_value=1, max_value=12),
    base=st.integers(min_value=0, max_value=100_000),
    hint=st.integers(min_value=0, max_value=10**8),
    jitter=st.sampled_from(["none", "full", "equal"]),
    seed=st.integers(),
)
def test_server_wait_is_a_floor_property(
    attempt: int, base: int, hint: int, jitter: Jitter, seed: int
) -> None:
    """R-28: with respectRetryAfter and no caps, hint <= wait <= max(exponential, hint)."""
    settings = RetrySettings(
        base_delay_ms=base, jitter=jitter, respect_retry_after=True, provider=NO_HINT_CAP
    )
    plan = plan_delay(attempt, settings, hint_ms=hint, rng=random.Random(seed))
    assert plan.delay_ms is not None
    assert hint <= plan.delay_ms <= max(base * 2 ** (attempt - 1), hint)


def test_wait_cap_is_the_one_cap_rule() -> None:
    """R-28, R-28b: the cap on a hint or a cooldown is retry.maxDelayMs, else
    retry.provider.maxRetryDelayMs unless it is 0, else none."""
    assert wait_cap(RetrySettings(max_delay_ms=5000)) == (5000, "retry.maxDelayMs")
    provider = ProviderRetrySettings(max_retry_delay_ms=9000)
    assert wait_cap(RetrySettings(provider=provider)) == (9000, "retry.provider.maxRetryDelayMs")
    both = RetrySettings(max_delay_ms=5000, provider=provider)
    assert wait_cap(both) == (5000, "retry.maxDelayMs")
    none = RetrySettings(provider=ProviderRetrySettings(max_retry_delay_ms=0))
    assert wait_cap(none) is None
