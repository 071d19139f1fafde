"""Today's pi, drop-in: pi 1.6.0's own RpcClient, unchanged, against pi 1.6.0 and against
``trio-session rpc`` in the same test run (issue 27, acceptance 1).

``driver16.mjs`` calls every method of pi 1.6.0's ``RpcClient`` (run by the node 22 that
is installed beside it) against both agents, each pointed at its own copy of the same
loopback model server through the same pi agent dir. Each step's outcome (what the call
returned or threw, with the raw responses of its own commands) and the events it saw are
compared: ``test_result_matches_pi16[STEP]`` and ``test_events_match_pi16[STEP]``.

Nothing is forgiven but what docs/rpc.md declares in its table of differences
(``differences.py`` reads it; a row applies only to the versions it names). trio-session
runs with ``retry.profile: "pi-1.6"``, as a pi 1.6.0 user sets it (R-53). The steps the
table expects to differ (``backoff-prompt-joins``: a prompt during a backoff joins the
re-attempt, R-55) are strict xfails, and ``test_backoff_prompt_joins_the_retry`` checks our
side of them on its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.interop.conftest import Agent
from tests.interop.differences import (
    RULES,
    Declared,
    Scenario,
    compare,
    expected_to_differ,
    read_table,
    unused_rows,
)

DECLARED = Declared.for_version("1.6.0")

#: The driver's steps, in order (``test_steps_are_the_scenario`` keeps this in sync).
STEPS = (
    "getState.initial",
    "getAvailableModels",
    "getAvailableThinkingLevels",
    "getCommands",
    "getLastAssistantText.empty",
    "getMessages.empty",
    "getEntries.empty",
    "getTree.empty",
    "clearQueue.empty",
    "promptAndWait",
    "getMessages",
    "getLastAssistantText",
    "getSessionStats",
    "getForkMessages",
    "getEntries",
    "getEntries.since",
    "getEntries.sinceUnknown",
    "getTree",
    "setSessionName",
    "getState.named",
    "setModel",
    "setModel.unknown",
    "getAvailableThinkingLevels.reasoning",
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
    "prompt.duringBackoff.steer",
    "waitForIdle.afterRetry",
    "abortRetry",
    "collectEvents.steerFollowUp",
    "clearQueue",
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
    "getTree.forked",
    "switchSession",
    "getMessages.switched",
    "steer.idle",
    "followUp.idle",
    "getState.afterQueues",
    "clearQueue.idle",
    "newSession",
    "getState.final",
    "stop",
)


def _xfail(kind: str, step: str) -> list[pytest.MarkDecorator]:
    """A strict xfail for a step the table expects to differ (``backoff-prompt-joins``):
    one that starts to match pi fails the test until the row is changed."""
    if f"{kind}:{step}" not in expected_to_differ(DECLARED):
        return []
    reason = DECLARED.rows["backoff-prompt-joins"].why
    return [pytest.mark.xfail(reason=f"declared (backoff-prompt-joins): {reason}", strict=True)]


def _params(kind: str) -> list[Any]:
    return [pytest.param(step, id=step, marks=_xfail(kind, step)) for step in STEPS]


#: pi 1.6.0's driver: its steps, and the command its idle waits send (its answers count
#: only in the steps of the method named, ``run-to-run``).
SCENARIO = Scenario(STEPS, {"get_state": "getState"})


@pytest.fixture(scope="module")
def compared16(transcripts16: dict[Agent, dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Each step's (pi, ours) result and events, after the rows docs/rpc.md declares."""
    return compare(transcripts16, DECLARED, SCENARIO)


def _dump(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)


def client_methods(pi_package: Path) -> set[str]:
    """The public methods of the package's RpcClient, from its compiled source."""
    source = (pi_package / "dist" / "modes" / "rpc" / "rpc-client.js").read_text()
    declared = set(re.findall(r"^    (?:async )?([a-z]\w*)\(", source, re.MULTILINE))
    internal = {"constructor", "handleLine", "getData", "send"}
    internal |= {"createProcessExitError", "rejectPendingRequests"}
    return declared - internal


def test_steps_are_the_scenario(transcripts16: dict[Agent, dict[str, Any]]) -> None:
    """Both runs completed the driver's whole scenario, step for step."""
    for agent, transcript in transcripts16.items():
        assert transcript["fatal"] is None, f"{agent}: {transcript['fatal']}"
        assert tuple(s["step"] for s in transcript["steps"]) == STEPS, agent


def test_every_client_method_is_exercised(
    pi16_package: Path, transcripts16: dict[Agent, dict[str, Any]]
) -> None:
    """Every public method of pi 1.6.0's RpcClient is called (start, onEvent and getStderr
    by the driver itself), and pi answers each without a driver timeout."""
    methods = client_methods(pi16_package)
    assert len(methods) == 40, sorted(methods)
    called = {s["method"] for s in transcripts16["pi"]["steps"]}
    assert methods - called == {"start", "onEvent", "getStderr"}
    pi = transcripts16["pi"]["steps"]
    assert [s["step"] for s in pi if "driver:" in s.get("error", "")] == []
    threw = [s["step"] for s in pi if s["outcome"] == "threw"]
    assert threw == [
        "getEntries.sinceUnknown",
        "setModel.unknown",
        "prompt.duringBackoff",
    ]


def test_pi16_settles_and_exits_as_its_docs_say(transcripts16: dict[Agent, dict[str, Any]]) -> None:
    """The reference the comparison pins: pi 1.6.0 answers a prompt with a disposition,
    ends its runs with ``agent_settled``, and exits 143 on the client's SIGTERM."""
    steps = {s["step"]: s for s in transcripts16["pi"]["steps"]}
    assert steps["prompt.retry"]["value"] == "started"
    assert steps["collectEvents.steerFollowUp"]["value"]["dispositions"] == [
        "started",
        "queued",
        "queued",
    ]
    assert steps["promptAndWait"]["value"][-1] == {"type": "agent_settled", "aborted": False}
    assert steps["stop"]["value"] == {"code": 143, "signal": None}


def _compare(pi: Any, ours: Any) -> None:
    assert ours == pi, f"pi:\n{_dump(pi)}\ntrio-session:\n{_dump(ours)}"


@pytest.mark.parametrize("step", _params("result"))
def test_result_matches_pi16(step: str, compared16: dict[str, tuple[Any, Any]]) -> None:
    """The step returned (or threw) what it returns against pi 1.6.0, with the same
    responses, up to the differences docs/rpc.md declares."""
    _compare(*compared16[f"result:{step}"])


@pytest.mark.parametrize("step", _params("events"))
def test_events_match_pi16(step: str, compared16: dict[str, tuple[Any, Any]]) -> None:
    """The step's events equal pi 1.6.0's, in order and in every field, up to the
    differences docs/rpc.md declares."""
    pi, ours = compared16[f"events:{step}"]
    if isinstance(pi, list) and isinstance(ours, list):
        assert [e.get("type") for e in ours] == [e.get("type") for e in pi]
    _compare(pi, ours)


def test_every_declared_row_is_needed(transcripts16: dict[Agent, dict[str, Any]]) -> None:
    """Every row docs/rpc.md declares for pi 1.6.0 forgave something in this run: without
    it some step's result or events would be further from pi's. A fixed difference fails
    here until its row is deleted (or no longer names 1.6.0). (A timing row is not asked
    to: ``unused_rows``.)"""
    assert unused_rows(transcripts16, DECLARED, SCENARIO) == []


def test_the_table_and_the_rules_agree() -> None:
    """docs/rpc.md's table of differences declares exactly the rules the comparison
    implements, each with versions, what differs, how it is compared and why."""
    table = read_table()
    assert set(table) == RULES
    for row in table.values():
        assert row.versions, row
        assert row.versions <= {"0.73.1", "1.6.0"}, row
        assert all((row.what, row.compared, row.why)), row


def test_expected_differences_name_real_steps() -> None:
    """Every key ``backoff-prompt-joins`` expects to differ names a kind and a step."""
    keys = expected_to_differ(DECLARED)
    assert keys
    for key in keys:
        kind, _, step = key.partition(":")
        assert kind in {"result", "events"}, key
        assert step in STEPS, key


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    """Event types, a message's with its role and first text (``message_end:user:…``)."""
    kinds = []
    for event in events:
        kind = event["type"]
        if kind in ("message_update", "queue_update"):
            continue
        message = event.get("message")
        if kind == "message_end" and isinstance(message, dict):
            texts = [p.get("text", "") for p in message.get("content", []) if isinstance(p, dict)]
            first = (texts or [""])[0].split("]")[0].removeprefix("[interop:")
            kind = f"{kind}:{message['role']}:{first}"
        kinds.append(kind)
    return kinds


def test_backoff_prompt_joins_the_retry(transcripts16: dict[Agent, dict[str, Any]]) -> None:
    """Our side of ``backoff-prompt-joins`` (R-36, R-55): the plain prompt sent during the
    backoff is answered ``queued``; the re-attempt carries it, in one run with one
    ``auto_retry_end`` (a success); the steer sent after it is the next turn's; the run
    settles once."""
    steps = {s["step"]: s for s in transcripts16["trio-session"]["steps"]}
    assert steps["prompt.duringBackoff"]["value"] == "queued"
    span = ("prompt.duringBackoff", "prompt.duringBackoff.steer", "waitForIdle.afterRetry")
    events = [e for step in span for e in steps[step]["events"]]
    ends = [e for e in events if e["type"] == "auto_retry_end"]
    assert [(e["success"], e["attempt"]) for e in ends] == [(True, 1)]
    assert _kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end:user:gate-backoff-plain",
        "message_start",
        "message_end:assistant:Reply to gate-backoff-plain.",
        "auto_retry_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end:user:backoff-steer",
        "message_start",
        "message_end:assistant:Reply to backoff-steer.",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
