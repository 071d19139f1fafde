"""The terminal UI's event controller (SPEC §9), transition by transition."""

from __future__ import annotations

import pytest

from trio_session import (
    AgentEnd,
    AgentStart,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    RateLimitWaitEnd,
    RateLimitWaitStart,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    UserMessage,
)
from trio_session.tui import EventController, loader_text


class Keys:
    """Records which action Esc triggered."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def abort_retry(self) -> None:
        self.calls.append("abort_retry")

    def abort(self) -> None:
        self.calls.append("abort")

    def custom(self) -> None:
        self.calls.append("custom")


def start(attempt: int, delay_ms: int = 2000, max_attempts: int = 3) -> AutoRetryStart:
    return AutoRetryStart(attempt, max_attempts, delay_ms, "503 Service Unavailable")


@pytest.fixture
def keys() -> Keys:
    return Keys()


@pytest.fixture
def ui(keys: Keys) -> EventController:
    return EventController(abort_retry=keys.abort_retry, esc=keys.abort)


@pytest.mark.parametrize(
    ("delay_ms", "text"),
    [
        (2000, "Retrying (1/3) in 2s… (esc to cancel)"),
        (2500, "Retrying (1/3) in 3s… (esc to cancel)"),  # Math.round: half up
        (1499, "Retrying (1/3) in 1s… (esc to cancel)"),
        (0, "Retrying (1/3)… (esc to cancel)"),
        (400, "Retrying (1/3) in 1s… (esc to cancel)"),  # never "in 0s" while waiting
    ],
)
def test_r46_loader_text(delay_ms: int, text: str) -> None:
    """R-46: N = round(delayMs / 1000), rounding half up like the reference."""
    assert loader_text(1, 3, delay_ms) == text


def test_r46_start_binds_esc_and_counts_down(ui: EventController, keys: Keys) -> None:
    """R-46: on start Esc calls abort_retry and the loader counts down."""
    ui.handle(start(1, 4000), now=10.0)
    assert ui.loader_text(10.0) == "Retrying (1/3) in 4s… (esc to cancel)"
    assert ui.loader_text(11.2) == "Retrying (1/3) in 3s… (esc to cancel)"
    assert ui.loader_text(13.1) == "Retrying (1/3) in 1s… (esc to cancel)"
    assert ui.loader_text(13.9) == "Retrying (1/3) in 1s… (esc to cancel)"  # rounded up
    assert ui.loader_text(14.0) == "Retrying (1/3)… (esc to cancel)"
    ui.press_esc()
    assert keys.calls == ["abort_retry"]


def test_r47_success_restores_esc_and_clears(ui: EventController, keys: Keys) -> None:
    """R-47: on a successful end the previous Esc handler is back, no loader, no status."""
    ui.handle(start(1), now=0)
    ui.handle(AutoRetryEnd(True, 1), now=2)
    assert ui.loader_text(2) is None
    assert ui.status is None
    ui.press_esc()
    assert keys.calls == ["abort"]


def test_r47_failure_shows_the_final_error(ui: EventController, keys: Keys) -> None:
    """R-47: a failed end shows "Retry failed after N attempts: <finalError>"."""
    ui.handle(start(1), now=0)
    ui.handle(AutoRetryEnd(False, 3, "503 Service Unavailable"), now=14)
    assert ui.status == "Retry failed after 3 attempts: 503 Service Unavailable"
    assert ui.loader_text(14) is None
    ui.press_esc()
    assert keys.calls == ["abort"]


def test_r47_cancelled_chain(ui: EventController, keys: Keys) -> None:
    """R-47: Esc during the loader ends the chain; the UI says it was cancelled."""
    ui.handle(start(1), now=0)
    ui.press_esc()
    ui.handle(AutoRetryEnd(False, 1, "Retry cancelled"), now=0.5)
    assert keys.calls == ["abort_retry"]
    assert ui.status == "Retry failed after 1 attempts: Retry cancelled"


def test_repeated_starts_keep_the_original_handler(ui: EventController, keys: Keys) -> None:
    """R-46: attempts 2 and 3 of one chain never save the retry binding as "previous"."""
    ui.esc = keys.custom
    for attempt in (1, 2, 3):
        ui.handle(start(attempt), now=attempt)
    ui.handle(AutoRetryEnd(True, 3), now=20)
    ui.press_esc()
    assert keys.calls == ["custom"]


def test_consecutive_chains(ui: EventController, keys: Keys) -> None:
    """R-24: a second chain after the first ended saves and restores again."""
    ui.handle(start(1), now=0)
    ui.handle(AutoRetryEnd(True, 1), now=2)
    ui.handle(start(1), now=5)
    ui.press_esc()
    ui.handle(AutoRetryEnd(False, 1, "Retry cancelled"), now=5)
    ui.press_esc()
    assert keys.calls == ["abort_retry", "abort"]


def test_end_without_start(ui: EventController, keys: Keys) -> None:
    """R-15: maxRetries 0 gives an end with no start: nothing to restore, failure shown."""
    ui.handle(AutoRetryEnd(False, 0, "503 Service Unavailable"), now=0)
    assert ui.status == "Retry failed after 0 attempts: 503 Service Unavailable"
    ui.press_esc()
    assert keys.calls == ["abort"]


def aborted_run_end() -> AgentEnd:
    return AgentEnd(messages=(AssistantMessage(stop_reason="aborted"),), will_retry=False)


def test_r48_abort_after_retries(ui: EventController) -> None:
    """R-48: aborting a run that had retried shows "Aborted after N retry attempt(s)"."""
    ui.handle(MessageEnd(UserMessage("hi")), now=0)
    ui.handle(start(1), now=0)
    ui.handle(start(2), now=2)
    ui.handle(AutoRetryEnd(True, 2), now=6)
    ui.handle(aborted_run_end(), now=7)
    assert ui.status == "Aborted after 2 retry attempt(s)"


def test_abort_without_retries(ui: EventController) -> None:
    """R-48: an abort with no retry before it just says "Aborted"; a new prompt clears it."""
    ui.handle(MessageEnd(UserMessage("hi")), now=0)
    ui.handle(aborted_run_end(), now=1)
    assert ui.status == "Aborted"
    ui.handle(MessageEnd(UserMessage("again")), now=2)
    assert ui.status is None


def test_abort_during_reattempt_reports_the_cancelled_chain(ui: EventController) -> None:
    """R-31, R-47: an aborted re-attempt inside a chain is reported by the chain's end."""
    ui.handle(start(1), now=0)
    ui.handle(aborted_run_end(), now=3)
    assert ui.status is None
    ui.handle(AutoRetryEnd(False, 1, "Retry cancelled"), now=3)
    assert ui.status == "Retry failed after 1 attempts: Retry cancelled"


def test_busy_follows_will_retry(ui: EventController) -> None:
    """R-45a: the UI stays busy across an intermediate agent_end (willRetry true)."""
    ui.handle(AgentStart(), now=0)
    assert ui.busy
    ui.handle(AgentEnd(will_retry=True), now=0)
    assert ui.busy
    ui.handle(AgentEnd(will_retry=False), now=6)
    assert not ui.busy


def test_compaction_loader(ui: EventController) -> None:
    """R-50: compaction shows its own loader line until it ends."""
    ui.handle(CompactionStart(reason="overflow"), now=0)
    assert ui.loader_text(0) == "Compacting the conversation…"
    ui.handle(CompactionEnd(reason="overflow", result=None, aborted=False, will_retry=False), now=1)
    assert ui.loader_text(1) is None


def test_r56f_summary_retry_shows_as_a_retry(ui: EventController, keys: Keys) -> None:
    """R-56f: a summary request's retry shows the retry loader with its countdown; Esc
    aborts (it ends the compaction); the attempt's start goes back to the compaction's
    loader, and the retry's end clears its line."""
    ui.handle(CompactionStart(reason="overflow"), now=0)
    ui.handle(SummarizationRetryScheduled(1, 3, 2000, "503 Service Unavailable"), now=0)
    assert ui.loader_text(0) == "Retrying (1/3) in 2s… (esc to cancel)"
    assert ui.loader_text(1.5) == "Retrying (1/3) in 1s… (esc to cancel)"
    ui.press_esc()
    assert keys.calls == ["abort"]
    ui.handle(SummarizationRetryAttemptStart("compaction", "overflow"), now=2)
    assert ui.loader_text(2) == "Compacting the conversation…"
    ui.handle(SummarizationRetryScheduled(2, 3, 4000, "503 Service Unavailable"), now=2)
    assert ui.loader_text(3) == "Retrying (2/3) in 3s… (esc to cancel)"
    ui.handle(SummarizationRetryFinished(), now=3)
    assert ui.loader_text(3) == "Compacting the conversation…"
    ui.handle(CompactionEnd("overflow", None, True, False), now=3)
    assert ui.loader_text(3) is None


def test_r56f_compaction_end_clears_a_summary_retry(ui: EventController) -> None:
    """R-56f: a compaction that ends in its summary retry's wait leaves no loader."""
    ui.handle(CompactionStart(reason="overflow"), now=0)
    ui.handle(SummarizationRetryScheduled(1, 3, 2000, "503 Service Unavailable"), now=0)
    ui.handle(CompactionEnd("overflow", None, True, False), now=1)
    assert ui.loader_text(1) is None


def test_a_running_tool_is_named_on_the_loader_line(ui: EventController) -> None:
    """While bash runs the loader line names it and says Esc aborts it, output or not
    (the output shows above it: test_tui_tool_view.py); the tool's end clears it."""
    ui.handle(ToolExecutionStart("c1", "bash", {"command": "make"}), 0.0)
    assert ui.loader_text(0.0) == "running bash… (esc to abort)"
    ui.handle(ToolExecutionUpdate("c1", "bash", partial_result="cc -c a.c\n  cc   -c b.c\n\n"), 0.1)
    assert ui.loader_text(0.1) == "running bash… (esc to abort)"
    ui.handle(ToolExecutionEnd("c1", "bash", "done"), 0.2)
    assert ui.loader_text(0.2) is None


def test_a_rate_limit_wait_shows_and_counts_down(ui: EventController, keys: Keys) -> None:
    """R-69: ``rate_limit_wait_start`` shows the wait, counting down, until its end; Esc
    still aborts (which ends the wait)."""
    ui.handle(RateLimitWaitStart(delay_ms=30_000, model="faux/m"), now=5.0)
    assert ui.loader_text(5.0) == "Waiting for the rate limit (30s)… (esc to cancel)"
    assert ui.loader_text(20.5) == "Waiting for the rate limit (15s)… (esc to cancel)"
    assert ui.loader_text(40.0) == "Waiting for the rate limit (1s)… (esc to cancel)"
    ui.press_esc()
    assert keys.calls == ["abort"]
    ui.handle(RateLimitWaitEnd(model="faux/m"), now=21.0)
    assert ui.loader_text(21.0) is None
    ui.handle(RateLimitWaitStart(delay_ms=None, model="faux/m"), now=22.0)
    assert ui.loader_text(22.0) == "Waiting for the rate limit… (esc to cancel)"
