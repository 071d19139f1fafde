"""``decide``: the one decision after a run, and the one maximum check (SPEC §1, R-12, R-15).

Pure: each case is a message and the values handed in, and the step that follows.
"""

from __future__ import annotations

import pytest

from trio_session import REFERENCE_CLASSIFIER, STRICT_CLASSIFIER, Settings, Usage
from trio_session._messages import AssistantMessage, TextContent
from trio_session._retry.decide import Next, decide
from trio_session._settings import SettingsStore

ERROR_503 = AssistantMessage(stop_reason="error", error_message="503 Service Unavailable")
OVERFLOW = AssistantMessage(stop_reason="error", error_message="prompt is too long")
AUTH = AssistantMessage(stop_reason="error", error_message="401 Unauthorized")
ANSWER = AssistantMessage(content=(TextContent("hi"),))


def _settings(**groups: dict[str, object]) -> Settings:
    return SettingsStore.coerce(groups).current


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


@pytest.mark.parametrize(
    ("attempt", "max_retries", "step"),
    [(0, 3, Next.RETRY), (2, 3, Next.RETRY), (3, 3, Next.GIVE_UP), (0, 0, Next.GIVE_UP)],
)
def test_the_one_maximum_check(attempt: int, max_retries: int, step: Next) -> None:
    """R-13, R-15, R-27: the next attempt (attempt + 1) may not exceed maxRetries."""
    settings = _settings(retry={"maxRetries": max_retries})
    assert _decide(ERROR_503, settings, attempt=attempt) is step


def test_retry_disabled_is_done() -> None:
    """R-12: retryable, but retry.enabled is false: nothing follows (no chain, no event)."""
    assert _decide(ERROR_503, _settings(retry={"enabled": False})) is Next.DONE


def test_overflow_compacts_once() -> None:
    """R-2, R-50: an overflow error compacts and continues; after a compaction, not again;
    with compaction off, nothing."""
    assert _decide(OVERFLOW) is Next.COMPACT
    assert _decide(OVERFLOW, compacted=True) is Next.DONE
    assert _decide(OVERFLOW, _settings(compaction={"enabled": False})) is Next.DONE


def test_a_silent_overflow_compacts_without_continuing() -> None:
    """R-7(b), R-50: an answer whose usage passed the window is compacted, not re-sent."""
    big = AssistantMessage(content=(TextContent("hi"),), usage=Usage(input=2000))
    assert _decide(big, window=1000) is Next.COMPACT_ONLY
    assert _decide(big) is Next.DONE  # no window known: nothing overflowed


def test_anything_else_is_done() -> None:
    """R-1: a good answer or a non-retryable error: nothing follows."""
    assert _decide(ANSWER) is Next.DONE
    assert _decide(AUTH) is Next.DONE


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
