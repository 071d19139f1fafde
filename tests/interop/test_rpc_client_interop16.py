"""Today's pi, drop-in: pi 1.6.0's own RpcClient, unchanged, against pi 1.6.0 and against
``trio-session rpc`` in the same test run (issue 27, acceptance 1).

``driver16.mjs`` calls every method of pi 1.6.0's ``RpcClient`` (run by the node 22 that
is installed beside it) against both agents, each pointed at its own copy of the same
loopback model server through the same pi agent dir. Each step's outcome (what the call
returned or threw, with the raw responses of its own commands) and the events it saw are
compared: ``test_result_matches_pi16[STEP]`` and ``test_events_match_pi16[STEP]``.

Nothing is forgiven but what docs/rpc.md declares in its table of differences
(``differences.py`` reads it; a row applies only to the versions it names). A step that
differs from pi today and should not is in ``PENDING_RPC_SURFACE``: a strict xfail, so an
entry that starts to pass fails the test until it is taken off the list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.interop.conftest import Agent
from tests.interop.differences import (
    RULES,
    Declared,
    Scenario,
    compare,
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

#: What differs in every step that streams a reply (or, for a failed attempt, its
#: message fields), besides what its entry names.
_SHAPE = (
    "; and pi 1.6.0's message shape: an assistant message_start says stopReason "
    '"pending", a message_update carries usage and no message or partial, an assistant '
    "message has durationMs, thinkingLevel, usage.reasoning, cost.totalFromProvider"
)

# pending: rpc surface (issue 27)
#: Steps that still differ from pi 1.6.0, each with what differs. Strict xfails: an entry
#: that starts to pass fails the test until it is taken off the list. The RPC surface of
#: issue 27 (agent_settled, dispositions, clear_queue, get_available_thinking_levels,
#: get_entries, get_tree, bash_execution_update, the exit statuses) has landed; what is
#: left is pi 1.6.0's message shape, its system message, the seed profile's retry and
#: compaction rules, and a prompt during a backoff (R-36, R-55), none of them declared
#: as a row yet.
PENDING_RPC_SURFACE: Mapping[str, str] = {
    "result:getEntries": "pi 1.6.0's assistant message fields" + _SHAPE,
    "result:getEntries.since": "pi 1.6.0's assistant message fields" + _SHAPE,
    "result:getTree": "pi 1.6.0's assistant message fields" + _SHAPE,
    "result:getTree.forked": "leafId's placeholder: pi 1.6.0 writes more entries before it "
    "(its system entries), so ids are numbered apart",
    "events:clearQueue": "the cleared messages are delivered" + _SHAPE,
    "result:promptAndWait": "the events it returns" + _SHAPE,
    "events:promptAndWait": "the reply's events" + _SHAPE,
    "events:prompt.retry": "the failed attempt's events" + _SHAPE,
    "result:prompt.duringBackoff": "pi 1.6.0 refuses a plain prompt during a backoff "
    "(isStreaming stays true), we join the retry (R-36, R-55)",
    "events:prompt.duringBackoff": "pi 1.6.0 refuses a plain prompt during a backoff, we join "
    "the retry (R-36, R-55)" + _SHAPE,
    "events:prompt.duringBackoff.steer": "pi 1.6.0 refuses a plain prompt during a backoff, "
    "we join the retry (R-36, R-55)" + _SHAPE,
    "events:waitForIdle.afterRetry": "pi 1.6.0 refuses a plain prompt during a backoff, we "
    "join the retry (R-36, R-55); no entry_appended under the seed profile" + _SHAPE,
    "events:abortRetry": "no entry_appended event: pi 1.6.0 announces the context_edit that "
    "drops the failed attempt, which we write only under retry.profile pi-1.6 (R-56e)" + _SHAPE,
    "events:collectEvents.steerFollowUp": "the replies' events" + _SHAPE,
    "events:abort": "the aborted reply's events" + _SHAPE,
    "events:waitForIdle": "the reply's events" + _SHAPE,
    "events:setModel": "we send thinking_level_changed when the new model clamps the level "
    "(as pi 0.73.1); pi 1.6.0 does not",
    "events:cycleModel": "we send thinking_level_changed when the new model clamps the level "
    "(as pi 0.73.1); pi 1.6.0 does not",
    "result:getMessages": "pi 1.6.0's assistant message fields" + _SHAPE,
    "result:getSessionStats": "totalMessages: pi 1.6.0 counts its system message",
    "result:getState.named": "messageCount: pi 1.6.0 counts its system message",
    "result:getState.configured": "messageCount: pi 1.6.0 counts its system message",
    "result:getState.forked": "messageCount: pi 1.6.0 counts its system message; the "
    "sessionId's placeholder (pi's extra entries)",
    "result:getState.afterQueues": "messageCount: pi 1.6.0 counts its system message",
    "result:getState.final": "the sessionId's placeholder: pi 1.6.0's extra entries number "
    "the ids apart",
    "result:compact": "pi 1.6.0 finds nothing to compact this early (its keep-recent cut), we "
    "compact",
    "events:compact": "pi 1.6.0 finds nothing to compact this early, we compact",
    "result:getSessionStats.end": "follows from the backoff prompt and the compaction above",
    "result:getForkMessages.cloned": "follows from the backoff prompt above (pi refused it)",
    "result:getMessages.switched": "follows from the backoff prompt and the compaction above",
}


def _xfail(kind: str, step: str) -> list[pytest.MarkDecorator]:
    reason = PENDING_RPC_SURFACE.get(f"{kind}:{step}")
    return (
        [pytest.mark.xfail(reason=f"pending (issue 27): {reason}", strict=True)] if reason else []
    )


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
        "compact",
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
    here until its row is deleted (or no longer names 1.6.0)."""
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


def test_pending_list_names_real_steps() -> None:
    """Every PENDING_RPC_SURFACE key names a step and a kind."""
    for key in PENDING_RPC_SURFACE:
        kind, _, step = key.partition(":")
        assert kind in {"result", "events"}, key
        assert step in STEPS, key
