"""``decide``: the one decision after a run, and the one maximum check (SPEC §1, R-12, R-15).

Pure: each case is a message and the values handed in, and the step that follows.
"""

from __future__ import annotations

import pytest

from trio_session import REFERENCE_CLASSIFIER, STRICT_CLASSIFIER, Settings, Usage
from trio_session._core.messages import AssistantMessage, TextContent
from trio_session._retry.decide import Next, asks_for_a_key, decide
from trio_session._settings.store import SettingsStore

from .conftest import PROFILES

ERROR_503 = AssistantMessage(stop_reason="error", error_message="503 Service Unavailable")
OVERFLOW = AssistantMessage(stop_reason="error", error_message="prompt is too long")
AUTH = AssistantMessage(stop_reason="error", error_message="401 Unauthorized")
ANSWER = AssistantMessage(content=(TextContent("hi"),))


def _settings(profile: str = "seed", **groups: dict[str, object]) -> Settings:
    retry = {**groups.pop("retry", {}), "profile": profile}
    return SettingsStore.coerce({**groups, "retry": retry}).current


def _decide(
    message: AssistantMessage,
    settings: Settings | None = None,
    *,
    attempt: int = 0,
    compacted: bool = False,
    window: int | None = None,
) -> Next:
    return decide(
        message,
        settings or _settings(),
        REFERENCE_CLASSIFIER,
        context_window=window,
        attempt=attempt,
        compacted=compacted,
    )


@PROFILES
@pytest.mark.parametrize(
    ("attempt", "max_retries", "step"),
    [(0, 3, Next.RETRY), (2, 3, Next.RETRY), (3, 3, Next.GIVE_UP), (0, 0, Next.GIVE_UP)],
)
def test_the_one_maximum_check(attempt: int, max_retries: int, step: Next, profile: str) -> None:
    """R-13, R-15, R-27: the next attempt (attempt + 1) may not exceed maxRetries, in
    both profiles."""
    settings = _settings(profile, retry={"maxRetries": max_retries})
    assert _decide(ERROR_503, settings, attempt=attempt) is step


@PROFILES
def test_retry_disabled_is_done(profile: str) -> None:
    """R-12: retryable, but retry.enabled is false: nothing follows (no chain, no event)."""
    assert _decide(ERROR_503, _settings(profile, retry={"enabled": False})) is Next.DONE


@PROFILES
def test_overflow_compacts_once(profile: str) -> None:
    """R-2, R-50: an overflow error compacts and continues; after a compaction, not again;
    with compaction off, nothing (both profiles)."""
    assert _decide(OVERFLOW, _settings(profile)) is Next.COMPACT
    assert _decide(OVERFLOW, _settings(profile), compacted=True) is Next.DONE
    off = _settings(profile, compaction={"enabled": False})
    assert _decide(OVERFLOW, off) is Next.DONE


def test_a_silent_overflow_compacts_without_continuing() -> None:
    """R-7(b), R-50: an answer whose usage passed the window is compacted, not re-sent."""
    big = AssistantMessage(content=(TextContent("hi"),), usage=Usage(input=2000))
    assert _decide(big, window=1000) is Next.COMPACT_ONLY
    assert _decide(big) is Next.DONE  # no window known: nothing overflowed


@PROFILES
def test_anything_else_is_done(profile: str) -> None:
    """R-1: a good answer or a non-retryable error: nothing follows (both profiles)."""
    assert _decide(ANSWER, _settings(profile)) is Next.DONE
    assert _decide(AUTH, _settings(profile)) is Next.DONE


def test_the_classifier_decides_what_retries() -> None:
    """R-8: the strict classifier does not retry a quota error the reference retries."""
    quota = AssistantMessage(stop_reason="error", error_message="429 insufficient_quota")
    settings = _settings()
    assert _decide(quota, settings) is Next.RETRY
    step = decide(
        quota, settings, STRICT_CLASSIFIER, context_window=None, attempt=0, compacted=False
    )
    assert step is Next.DONE


@pytest.mark.parametrize(
    ("step", "will_retry", "retries"),
    [
        (Next.DONE, False, False),
        (Next.RETRY, True, True),
        (Next.GIVE_UP, False, True),
        (Next.COMPACT, True, False),
        (Next.COMPACT_ONLY, False, False),
    ],
)
def test_will_retry_and_retries(step: Next, will_retry: bool, retries: bool) -> None:
    """R-45a: ``agent_end.willRetry`` is true when a re-attempt or a continuation follows;
    a chain acts on RETRY and GIVE_UP."""
    assert step.will_retry is will_retry
    assert step.retries is retries


LIMIT = AssistantMessage(stop_reason="error", error_message="429 usage_limit_reached")


@pytest.mark.parametrize(("rotated", "step"), [(True, Next.RETRY), (False, Next.DONE)])
def test_the_store_answers_for_a_usage_limit(rotated: bool, step: Next) -> None:
    """R-53b, R-55: the store was asked: a free key retries, none left ends (no exponential
    wait), whatever the classifier says of the text."""
    settings = _settings("pi-1.6")
    got = decide(
        LIMIT,
        settings,
        REFERENCE_CLASSIFIER,
        context_window=None,
        attempt=0,
        compacted=False,
        rotated=rotated,
    )
    assert got is step


@pytest.mark.parametrize(
    ("profile", "message", "retry", "attempt", "asked"),
    [
        ("pi-1.6", LIMIT, {}, 0, True),
        ("pi-1.6", LIMIT, {}, 2, True),
        ("seed", LIMIT, {}, 0, False),  # the seed's chain asks, after deciding
        ("pi-1.6", ERROR_503, {}, 0, False),  # not a usage limit
        ("pi-1.6", LIMIT, {"enabled": False}, 0, False),  # nothing follows anyway
        ("pi-1.6", LIMIT, {}, 3, False),  # past the budget, nothing could follow
    ],
)
def test_when_pi16_asks_the_store(
    profile: str, message: AssistantMessage, retry: dict[str, object], attempt: int, asked: bool
) -> None:
    """R-53b: only pi-1.6 asks the store before deciding, only for a usage limit that
    could be retried."""
    settings = _settings(profile, retry=retry)
    got = asks_for_a_key(
        message, settings, REFERENCE_CLASSIFIER, context_window=None, attempt=attempt
    )
    assert got is asked
