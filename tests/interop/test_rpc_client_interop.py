"""pi's own RpcClient, unchanged, against pi 0.73.1 and against ``trio-session rpc``.

The driver (``driver.mjs``) runs one scenario — every RpcClient method, a prompt during
a retry backoff with and without ``streamingBehavior`` — against both agents in this test
run, each talking to its own copy of the same loopback model server. Each step's
outcome (returned value or thrown message, plus the raw responses of its own commands)
and the events it saw are compared step by step: ``test_result_matches_pi[STEP]`` and
``test_events_match_pi[STEP]``.

Nothing is forgiven but what docs/rpc.md declares for pi 0.73.1 in its table of
differences (``differences.py`` reads it and applies each row), and every row it declares
must have forgiven something in this run (``test_every_declared_row_is_needed``). A step
the table expects to differ (``retried-after-compaction``) is a strict xfail: a step that
starts to match fails until its row is taken off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.interop.conftest import Agent, run_scenario
from tests.interop.differences import (
    Declared,
    Scenario,
    compare,
    unused_rows,
)

#: The driver's steps, in order (``test_steps_are_the_scenario`` keeps this in sync).
STEPS = (
    "getState.initial",
    "getAvailableModels",
    "getCommands",
    "getLastAssistantText.empty",
    "getMessages.empty",
    "promptAndWait",
    "getMessages",
    "getLastAssistantText",
    "getSessionStats",
    "getForkMessages",
    "setSessionName",
    "getState.named",
    "setModel",
    "setModel.unknown",
    "cycleModel",
    "setThinkingLevel",
    "cycleThinkingLevel",
    "setSteeringMode",
    "setFollowUpMode",
    "setAutoCompaction",
    "setAutoRetry",
    "getState.configured",
    "bash",
    "abortBash",
    "prompt.retry",
    "prompt.duringBackoff",
    "send.promptDuringBackoff.steer",
    "waitForIdle.afterRetry",
    "abortRetry",
    "collectEvents.steerFollowUp",
    "abort",
    "waitForIdle",
    "compact",
    "setAutoCompaction.on",
    "getSessionStats.end",
    "exportHtml",
    "clone",
    "getForkMessages.cloned",
    "fork",
    "getState.forked",
    "switchSession",
    "getMessages.switched",
    "steer.idle",
    "followUp.idle",
    "getState.afterQueues",
    "newSession",
    "getState.final",
)

#: pi 0.73.1's driver: its steps, and the commands its idle waits send (their answers count
#: only in the steps of the method named, ``run-to-run``).
SCENARIO = Scenario(STEPS, {"get_state": "getState"})

DECLARED = Declared.for_version("0.73.1")


def _xfail(kind: str, step: str) -> list[pytest.MarkDecorator]:
    expected = kind == "result" and step in DECLARED.names("retried-after-compaction")
    if not expected:
        return []
    reason = DECLARED.rows["retried-after-compaction"].why
    return [pytest.mark.xfail(reason=f"declared (retried-after-compaction): {reason}", strict=True)]


def _params(kind: str) -> list[Any]:
    return [pytest.param(step, id=step, marks=_xfail(kind, step)) for step in STEPS]


@pytest.fixture(scope="module")
def compared(transcripts: dict[Agent, dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Each step's (pi, ours) result and events, after the rows docs/rpc.md declares."""
    return compare(transcripts, DECLARED, SCENARIO)


def _dump(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)


# -- the tests -------------------------------------------------------------------------------


def _client_methods(pi_package: Path) -> set[str]:
    source = (pi_package / "dist" / "modes" / "rpc" / "rpc-client.js").read_text()
    declared = set(re.findall(r"^    (?:async )?([a-z]\w*)\(", source, re.MULTILINE))
    plumbing = {"constructor", "start", "stop", "onEvent", "getStderr", "handleLine", "getData"}
    return declared - plumbing


def test_steps_are_the_scenario(transcripts: dict[Agent, dict[str, Any]]) -> None:
    """Both runs completed the driver's whole scenario, step for step."""
    for agent, transcript in transcripts.items():
        assert transcript["fatal"] is None, f"{agent}: {transcript['fatal']}"
        assert tuple(s["step"] for s in transcript["steps"]) == STEPS, agent


def test_every_client_method_is_exercised(
    pi_package: Path, transcripts: dict[Agent, dict[str, Any]]
) -> None:
    """Every public method of pi's RpcClient is called, and pi answers each without a
    driver timeout (a hang would make the comparison meaningless)."""
    methods = _client_methods(pi_package)
    assert len(methods) >= 30, methods
    called = {s["method"] for s in transcripts["pi"]["steps"]}
    assert methods - called == set()
    timeouts = [s["step"] for s in transcripts["pi"]["steps"] if "driver:" in s.get("error", "")]
    assert timeouts == []


def test_pi_handles_a_prompt_during_backoff(transcripts: dict[Agent, dict[str, Any]]) -> None:
    """The reference behaviour the comparison pins: during a retry backoff pi accepts a
    plain prompt and runs it at once (nothing streams between attempts), the retry ends
    with its answer, and a prompt with ``streamingBehavior: "steer"`` sent meanwhile is
    queued and delivered after that turn."""
    steps = {s["step"]: s for s in transcripts["pi"]["steps"]}
    (plain,) = steps["prompt.duringBackoff"]["responses"]
    assert plain["success"] is True
    assert steps["send.promptDuringBackoff.steer"]["value"]["success"] is True
    span = ("prompt.duringBackoff", "send.promptDuringBackoff.steer", "waitForIdle.afterRetry")
    events = [e for step in span for e in steps[step]["events"]]
    users = [
        e["message"]["content"][0]["text"]
        for e in events
        if e["type"] == "message_start" and e["message"]["role"] == "user"
    ]
    assert users == [
        "[interop:gate-backoff-plain] And this?",
        "[interop:backoff-steer] Also this.",
    ]
    assert {"type": "auto_retry_end", "success": True, "attempt": 1} in events
    queued = [e["steering"] for e in events if e["type"] == "queue_update"]
    assert queued == [["[interop:backoff-steer] Also this."], []]  # queued, then delivered


@pytest.mark.parametrize("step", _params("result"))
def test_result_matches_pi(step: str, compared: dict[str, tuple[Any, Any]]) -> None:
    """The step returned (or threw) the same as pi, with the same responses, up to the
    differences docs/rpc.md declares for pi 0.73.1."""
    pi, ours = compared[f"result:{step}"]
    assert ours == pi, f"pi:\n{_dump(pi)}\ntrio-session:\n{_dump(ours)}"


@pytest.mark.parametrize("step", _params("events"))
def test_events_match_pi(step: str, compared: dict[str, tuple[Any, Any]]) -> None:
    """The step's events equal pi's, in order and in every field, up to the differences
    docs/rpc.md declares for pi 0.73.1."""
    pi, ours = compared[f"events:{step}"]
    if isinstance(pi, list) and isinstance(ours, list):
        assert [e.get("type") for e in ours] == [e.get("type") for e in pi]
    assert ours == pi, f"pi:\n{_dump(pi)}\ntrio-session:\n{_dump(ours)}"


def test_every_declared_row_is_needed(transcripts: dict[Agent, dict[str, Any]]) -> None:
    """Every row docs/rpc.md declares for pi 0.73.1 forgave something in this run: without
    it some step's result or events would be further from pi's. A fixed difference fails
    here until its row is deleted. (A timing row is not asked to: ``unused_rows``.)"""
    unused = unused_rows(transcripts, DECLARED, SCENARIO)
    assert unused == []


# -- a killed agent --------------------------------------------------------------------------


def _kill_outcomes(transcript: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(step, outcome, error) of a kill run."""
    assert transcript["fatal"] is None, transcript["fatal"]
    return [(s["step"], s["outcome"], s.get("error") or None) for s in transcript["steps"]]


def test_killed_agent_fails_waiting_calls_like_pi(
    pi_package: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SIGKILL of the agent mid-reply: pi's client notices only through its own timeouts —
    ``waitForIdle`` and ``collectEvents`` throw — and it does the same against us, up to
    the agent's stderr the client appends (empty from both)."""
    base = tmp_path_factory.mktemp("interop-kill")
    pi_run = run_scenario("pi", pi_package, base / "pi", "kill")
    our_run = run_scenario("trio-session", pi_package, base / "ours", "kill")
    pi = _kill_outcomes(pi_run)
    assert pi == [
        ("prompt.gate", "returned", None),
        ("kill", "returned", None),
        ("waitForIdle.afterKill", "threw", "Timeout waiting for agent to become idle. Stderr: "),
        ("collectEvents.afterKill", "threw", "Timeout collecting events. Stderr: "),
    ]
    assert _kill_outcomes(our_run) == pi
