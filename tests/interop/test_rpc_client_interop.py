"""pi's own RpcClient, unchanged, against pi 0.73.1 and against ``trio-session rpc``.

The driver (``driver.mjs``) runs one scenario — every RpcClient method, a prompt during
a retry backoff with and without ``streamingBehavior`` — against both agents in this test
run, each talking to its own copy of the same loopback model server. Each step's
outcome (returned value or thrown message, plus the raw responses of its own commands)
and the events it saw are normalized — timestamps, ids, session files, temp paths,
ports, durations — and compared step by step: ``test_result_matches_pi[STEP]`` and
``test_events_match_pi[STEP]``.

Differences are never silently ignored. A difference kept on purpose is in
``ALLOWED_DIFFERENCES`` with its reason and is stripped before comparing; what pi writes
differently from run to run (its asynchronous event queue) is described where the
``Normalizer`` leaves it out, and ``EVENT_SPANS`` compares steps whose boundaries are
timing. A step that differs on purpose in a value is in ``DELIBERATE_DIFFERENCES``, one
that differs and should not in ``UNRESOLVED_DIFFERENCES``; both are
``xfail(strict=True)``: a step that starts to match fails until it is taken off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.interop.conftest import Agent, run_scenario

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

#: Keys that only trio-session sends, on purpose: removed from our side (where pi lacks
#: them) before comparing. Keyed by what carries them: a method's result, or an event.
ALLOWED_DIFFERENCES: Mapping[str, tuple[frozenset[str], str]] = {
    "getState": (
        frozenset({"autoRetryEnabled", "isRetrying", "retryAttempt"}),
        "R-41 [beyond]: get_state also reports the retry state, which pi clients cannot see",
    ),
    "event:agent_end": (
        frozenset({"willRetry"}),
        "R-45a [beyond]: agent_end says whether a retry chain continues the run",
    ),
}

#: Steps whose events are compared together: where one step's events end and the next
#: one's begin depends on timing. During a backoff pi starts a prompt at once, and its
#: events arrive while the driver is already at the next step; ours cut the sleep short
#: and arrive sooner. The span's events, in order, must be equal — except that where a
#: ``queue_update`` falls among the run's events is timing too (pi writes its events
#: through an asynchronous queue), so those are compared in order among themselves.
EVENT_SPANS: tuple[tuple[str, ...], ...] = (
    ("prompt.duringBackoff", "send.promptDuringBackoff.steer", "waitForIdle.afterRetry"),
)


def _span_of(step: str) -> tuple[str, ...]:
    return next((span for span in EVENT_SPANS if step in span), (step,))


#: Steps that differ from pi on purpose, where the difference is a value, not an extra
#: key (those are in ALLOWED_DIFFERENCES). Keys are ``result:STEP`` / ``events:STEP``.
#: Each is a strict xfail with its reason: a step that starts to match fails until it
#: is taken off.
DELIBERATE_DIFFERENCES: Mapping[str, str] = {
    "result:getSessionStats.end": "R-20: an attempt that was retried never re-enters the "
    "runtime context. pi rebuilds its context from the session file after a compaction "
    "and so counts its failed attempts again (two more assistant messages, no tokens)",
}

#: Steps that differ from pi today and should not (none at the moment).
UNRESOLVED_DIFFERENCES: Mapping[str, str] = {}


def _xfail(kind: str, step: str) -> list[pytest.MarkDecorator]:
    key = f"{kind}:{step}"
    reason = DELIBERATE_DIFFERENCES.get(key) or UNRESOLVED_DIFFERENCES.get(key)
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


def _params(kind: str) -> list[Any]:
    return [pytest.param(step, id=step, marks=_xfail(kind, step)) for step in STEPS]


# -- normalization ---------------------------------------------------------------------------

_ID_KEYS = frozenset(
    {"id", "entryId", "firstKeptEntryId", "parentId", "sessionId", "parentSession", "leafId"}
)
_TIME_KEYS = frozenset({"timestamp", "durationMs", "duration"})
_REQUEST_ID = re.compile(r"^req_\d+$")
_SERVER = re.compile(r"http://127\.0\.0\.1:\d+")


class Normalizer:
    """Rewrites what legitimately differs between two runs into stable placeholders.

    Ids and session files become ``<id:N>`` / ``<session:N>`` numbered by first
    appearance in one transcript, so "the same id as before" still compares equal.
    """

    def __init__(self, work: str) -> None:
        self.work = work
        self.ids: dict[str, str] = {}
        self.sessions: dict[str, str] = {}

    def _placeholder(self, table: dict[str, str], kind: str, value: str) -> str:
        if value not in table:
            table[value] = f"<{kind}:{len(table) + 1}>"
        return table[value]

    def string(self, text: str) -> str:
        """A string with the work dir, the server's port and session files replaced."""
        text = _SERVER.sub("<server>", text)
        if self.work in text:
            text = text.replace(self.work, "<work>")
            if text.startswith("<work>/agent/sessions/") and text.endswith(".jsonl"):
                return self._placeholder(self.sessions, "session", text)
        return text

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict) and value.get("type") == "message_update":
            value = _stream_update(value)
        if isinstance(value, dict) and value.get("type") == "message_start":
            value = _message_start(value)
        if isinstance(value, dict) and value.get("type") == "agent_end":
            # ALLOWED_DIFFERENCES["event:agent_end"], also where the event sits inside a
            # result (collectEvents, promptAndWait): pi never sends willRetry.
            value = {k: v for k, v in value.items() if k != "willRetry"}
        if isinstance(value, dict) and "summary" in value and "tokensBefore" in value:
            # A compaction result: ours adds tokensAfter and messagesRemoved (issue 7).
            value = {k: v for k, v in value.items() if k not in _OUR_COMPACTION_KEYS}
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        if key in _TIME_KEYS and isinstance(value, int | float):
            return f"<{key}>"
        if isinstance(value, str):
            if key in _ERROR_KEYS and (status := _HTTP_STATUS.match(value)):
                # The wording of an HTTP error is ours (R-52: status, reason, the server's
                # message and type, retry hints); pi's SDK writes "<status> <message>".
                # Both name the status first, which is what the retry policy reads first.
                return f"<http error {status.group(1)}>"
            if key in _ID_KEYS and not _REQUEST_ID.match(value):
                return self._placeholder(self.ids, "id", value)
            return self.string(value)
        if isinstance(value, float):
            return round(value, 12)
        return value


_OUR_COMPACTION_KEYS = frozenset({"tokensAfter", "messagesRemoved"})
_ERROR_KEYS = frozenset({"errorMessage", "finalError"})
_HTTP_STATUS = re.compile(r"^([1-5]\d\d) ")


def _stream_update(event: dict[str, Any]) -> dict[str, Any]:
    """A ``message_update`` as far as it can be compared.

    Its ``message`` and ``assistantMessageEvent.partial`` are left out: pi writes an
    event only after its asynchronous event queue reaches it, by which time the shared
    message object has often grown further (a ``text_start`` can already hold the whole
    reply), so pi's own copies depend on timing. Ours are the message as it was at that
    event. Our top-level ``delta`` (text deltas repeated for this project's earlier
    clients) is left out too; pi's clients read ``assistantMessageEvent.delta``.
    """
    kept = {k: v for k, v in event.items() if k not in ("message", "delta")}
    inner = kept.get("assistantMessageEvent")
    if isinstance(inner, dict):
        kept["assistantMessageEvent"] = {k: v for k, v in inner.items() if k != "partial"}
    return kept


def _message_start(event: dict[str, Any]) -> dict[str, Any]:
    """An assistant's ``message_start`` without its content, for the reason
    ``_stream_update`` gives: pi's copy shares the content list that later deltas fill."""
    message = event.get("message")
    if not (isinstance(message, dict) and message.get("role") == "assistant"):
        return event
    return {**event, "message": {k: v for k, v in message.items() if k != "content"}}


def _strip_allowed(value: Any, pi_value: Any, keys: frozenset[str]) -> Any:
    """``value`` (ours) without the allowed extra ``keys`` that ``pi_value`` lacks."""
    if isinstance(value, dict) and isinstance(pi_value, dict):
        return {k: v for k, v in value.items() if not (k in keys and k not in pi_value)}
    return value


#: Commands the driver sends to wait for idle (``settle``): how often depends on timing,
#: so their responses count only in the steps that call these methods themselves.
_POLLING = {"get_state": "getState", "get_messages": "getMessages"}


def _own_responses(step: Mapping[str, Any]) -> list[Any]:
    """The step's responses without request ids and without the driver's polling."""
    return [
        {k: v for k, v in response.items() if k != "id"}
        for response in step["responses"]
        if _POLLING.get(response.get("command"), step["method"]) == step["method"]
    ]


def _outcome(step: Mapping[str, Any]) -> dict[str, Any]:
    kept = {"outcome": step["outcome"], "responses": _own_responses(step)}
    if step["outcome"] == "returned":
        kept["value"] = step["value"]
    else:
        kept["error"] = step["error"]
    return kept


@pytest.fixture(scope="module")
def normalized(transcripts: dict[Agent, dict[str, Any]]) -> dict[Agent, dict[str, Any]]:
    """Each agent's steps by name, outcome and events normalized (ids numbered in order)."""
    result: dict[Agent, dict[str, Any]] = {}
    for agent, transcript in transcripts.items():
        normalize = Normalizer(transcript["work"])
        steps = {}
        for step in transcript["steps"]:
            steps[step["step"]] = {
                "outcome": normalize(_outcome(step)),
                "events": normalize(step["events"]),
            }
        result[agent] = steps
    return result


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
def test_result_matches_pi(step: str, normalized: dict[Agent, dict[str, Any]]) -> None:
    """The step returned (or threw) the same as pi, with the same responses."""
    pi, ours = normalized["pi"][step]["outcome"], normalized["trio-session"][step]["outcome"]
    method = step.split(".")[0]
    if method in ALLOWED_DIFFERENCES and "value" in pi and "value" in ours:
        keys = ALLOWED_DIFFERENCES[method][0]
        ours = {**ours, "value": _strip_allowed(ours["value"], pi["value"], keys)}
        ours["responses"] = [
            {**r, "data": _strip_allowed(r["data"], p.get("data"), keys)} if "data" in r else r
            for r, p in zip(ours["responses"], pi["responses"] + [{}] * 99, strict=False)
        ]
    assert ours == pi, f"pi:\n{_dump(pi)}\ntrio-session:\n{_dump(ours)}"


def _strip_event(event: Any, pi_event: Any) -> Any:
    if not isinstance(event, dict):
        return event
    allowed = ALLOWED_DIFFERENCES.get(f"event:{event.get('type')}")
    return _strip_allowed(event, pi_event, allowed[0]) if allowed else event


@pytest.mark.parametrize("step", _params("events"))
def test_events_match_pi(step: str, normalized: dict[Agent, dict[str, Any]]) -> None:
    """The step's events equal pi's, in order and in every field."""
    span = _span_of(step)
    pi: list[Any] = [e for s in span for e in normalized["pi"][s]["events"]]
    ours: list[Any] = [e for s in span for e in normalized["trio-session"][s]["events"]]
    if len(span) > 1:
        queued = [e for e in ours if e.get("type") == "queue_update"]
        assert queued == [e for e in pi if e.get("type") == "queue_update"]
        pi = [e for e in pi if e.get("type") != "queue_update"]
        ours = [e for e in ours if e.get("type") != "queue_update"]
    ours = [_strip_event(e, pi[i] if i < len(pi) else None) for i, e in enumerate(ours)]
    assert [e["type"] for e in ours] == [e["type"] for e in pi]
    assert ours == pi, f"pi:\n{_dump(pi)}\ntrio-session:\n{_dump(ours)}"


def test_gap_lists_name_real_steps() -> None:
    """Every DELIBERATE_DIFFERENCES / UNRESOLVED_DIFFERENCES key names a step and a kind."""
    for key in [*DELIBERATE_DIFFERENCES, *UNRESOLVED_DIFFERENCES]:
        kind, _, step = key.partition(":")
        assert kind in {"result", "events"}, key
        assert step in STEPS, key


# -- a killed agent --------------------------------------------------------------------------


def _kill_outcomes(transcript: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(step, outcome, error without the client's appended stderr) of a kill run."""
    assert transcript["fatal"] is None, transcript["fatal"]
    return [
        (s["step"], s["outcome"], s.get("error", "").split(" Stderr:")[0] or None)
        for s in transcript["steps"]
    ]


def test_killed_agent_fails_waiting_calls_like_pi(
    pi_package: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SIGKILL of the agent mid-reply: pi's client notices only through its own timeouts —
    ``waitForIdle`` and ``collectEvents`` throw — and it does the same against us."""
    base = tmp_path_factory.mktemp("interop-kill")
    pi = _kill_outcomes(run_scenario("pi", pi_package, base / "pi", "kill"))
    ours = _kill_outcomes(run_scenario("trio-session", pi_package, base / "ours", "kill"))
    assert pi == [
        ("prompt.gate", "returned", None),
        ("kill", "returned", None),
        ("waitForIdle.afterKill", "threw", "Timeout waiting for agent to become idle."),
        ("collectEvents.afterKill", "threw", "Timeout collecting events."),
    ]
    assert ours == pi
