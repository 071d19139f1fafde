"""The JSON codec: reference camelCase shapes, round trips and path-naming errors (R-43)."""

from __future__ import annotations

import json
import re
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session import (
    AgentEnd,
    AgentSettled,
    AgentStart,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    CodecError,
    CompactionEnd,
    CompactionResult,
    CompactionStart,
    ExtensionError,
    HistoryWriteFailed,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelFallback,
    QueueUpdate,
    RateLimitWaitEnd,
    RateLimitWaitStart,
    SessionEvent,
    SessionInfoChanged,
    TextContent,
    ThinkingLevelChanged,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolOutput,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
    event_from_json,
    event_to_json,
    message_from_json,
    message_to_json,
)
from trio_session._core.events import (
    EVENT_TYPES,
    EntryAppended,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)
from trio_session._core.messages import StopReason

USER = UserMessage(content="Read README.md and summarise it.", timestamp=1_700_000_000_000)
TOOL_USE = AssistantMessage(
    content=(
        TextContent("Let me read the file."),
        ToolCall(
            id="call_01",
            name="read",
            arguments={"path": "README.md", "range": {"start": 1, "lines": [1, 2]}, "all": True},
        ),
    ),
    stop_reason="toolUse",
    usage=Usage(input=1200, output=48, cache_read=800, cache_write=64),
    provider="anthropic",
    model="claude-sonnet-4",
    timestamp=1_700_000_000_500,
)
TOOL_RESULT = ToolResultMessage(
    tool_call_id="call_01",
    tool_name="read",
    content=(TextContent("# trio_session\n"), TextContent("LLM sessions on Trio.")),
    is_error=False,
    timestamp=1_700_000_000_900,
)
TOOL_ERROR = ToolResultMessage(
    tool_call_id="call_02",
    tool_name="bash",
    content=(TextContent("command not found: frob"),),
    is_error=True,
    timestamp=1_700_000_001_000,
)

ZERO_COST = {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}
ERROR = AssistantMessage(
    content=(),
    stop_reason="error",
    error_message="503 Service Unavailable: upstream connect error; retry-after: 2",
    usage=Usage(),
    provider="openai",
    model="gpt-4.1",
    timestamp=1_700_000_002_000,
)
DONE = AssistantMessage(
    content=(TextContent("It is a Trio agent-session library."),),
    stop_reason="stop",
    usage=Usage(input=2100, output=12),
    provider="openai",
    model="gpt-4.1",
    timestamp=1_700_000_003_000,
)

#: One realistic instance of every event class.
EVENTS: list[SessionEvent] = [
    AgentStart(),
    TurnStart(),
    MessageStart(USER),
    MessageStart(TOOL_USE),
    MessageUpdate(message=DONE, delta="library."),
    MessageEnd(ERROR),
    MessageEnd(TOOL_RESULT),
    ToolExecutionStart(
        tool_call_id="call_01", tool_name="read", args={"path": "README.md", "limit": 20}
    ),
    ToolExecutionUpdate(
        tool_call_id="call_02", tool_name="bash", args={"command": "ls"}, partial_result="a\n"
    ),
    ToolExecutionEnd(tool_call_id="call_01", tool_name="read", result="# trio_session"),
    ToolExecutionEnd(tool_call_id="call_02", tool_name="bash", result="boom", is_error=True),
    TurnEnd(message=TOOL_USE, tool_results=(TOOL_RESULT, TOOL_ERROR)),
    TurnEnd(message=ERROR),
    AgentEnd(messages=(USER, TOOL_USE, TOOL_RESULT, ERROR), will_retry=True),
    AgentEnd(messages=(USER, DONE), will_retry=False),
    AgentSettled(aborted=False),
    AgentSettled(aborted=True),
    AutoRetryStart(
        attempt=1, max_attempts=3, delay_ms=2000, error_message=ERROR.error_message or ""
    ),
    AutoRetryEnd(success=True, attempt=2),
    AutoRetryEnd(success=False, attempt=3, final_error="Retry cancelled"),
    ModelFallback("faux/a", "faux/b", "retries_exhausted", "503 Service Unavailable"),
    RateLimitWaitStart(delay_ms=1500, model="faux/a"),
    RateLimitWaitStart(delay_ms=None, model="faux/a"),
    RateLimitWaitEnd(model="faux/a"),
    CompactionStart(reason="overflow"),
    CompactionStart(reason="threshold"),
    CompactionEnd(
        reason="overflow",
        result=CompactionResult(
            summary="Earlier: read README.md.",
            tokens_before=213462,
            tokens_after=40210,
            messages_removed=6,
        ),
        aborted=False,
        will_retry=True,
    ),
    QueueUpdate(steering=("focus on tests",), follow_up=()),
    ThinkingLevelChanged(level="high"),
    SessionInfoChanged(name="release work"),
    ExtensionError(extension_path="notify", event="auto_retry_end", error="ValueError: bad"),
    HistoryWriteFailed(path="/s/a.jsonl", error="cannot write session file /s/a.jsonl: EFBIG"),
    SummarizationRetryScheduled(1, 3, 2000, "503 Service Unavailable"),
    SummarizationRetryAttemptStart("compaction", "overflow"),
    SummarizationRetryAttemptStart("branchSummary"),
    SummarizationRetryFinished(),
    EntryAppended(
        {
            "type": "context_edit",
            "id": "g6h7i8j9",
            "parentId": "f6g7h8i9",
            "timestamp": "2026-12-04T14:11:00.000Z",
            "targetId": "c3d4e5f6",
            "replacement": None,
        }
    ),
]

MESSAGES: list[Message] = [USER, TOOL_USE, TOOL_RESULT, TOOL_ERROR, ERROR, DONE]


def through_text(data: Any) -> Any:
    """What the other end of a pipe sees: serialise to text and parse back."""
    return json.loads(json.dumps(data))


# --- round trips --------------------------------------------------------------------------


def test_every_event_class_has_a_sample() -> None:
    """The round-trip samples cover every class in EVENT_TYPES."""
    assert {type(event) for event in EVENTS} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_event_round_trip(event: SessionEvent) -> None:
    """R-43: event_to_json → JSON text → event_from_json gives back an equal event."""
    assert event_from_json(through_text(event_to_json(event))) == event


def test_compaction_end_without_result_round_trips() -> None:
    """R-43: an aborted compaction (no result) survives event_to_json → event_from_json."""
    event = CompactionEnd(reason="overflow", result=None, aborted=True, will_retry=False)
    assert event_from_json(through_text(event_to_json(event))) == event


def test_compaction_end_with_null_result_decodes() -> None:
    """An explicit ``"result": null`` decodes to ``result=None``."""
    data = {
        "type": "compaction_end",
        "reason": "overflow",
        "result": None,
        "aborted": True,
        "willRetry": False,
    }
    assert event_from_json(data) == CompactionEnd(
        reason="overflow", result=None, aborted=True, will_retry=False
    )


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: f"{m.role}-{m.timestamp}")
def test_message_round_trip(message: Message) -> None:
    """message_to_json → JSON text → message_from_json gives back an equal message."""
    assert message_from_json(through_text(message_to_json(message))) == message


def test_message_round_trip_covers_all_roles() -> None:
    """The message samples cover the user, assistant and toolResult roles."""
    assert {m.role for m in MESSAGES} == {"user", "assistant", "toolResult"}


# --- exact shapes (R-43) ------------------------------------------------------------------


def test_auto_retry_start_shape() -> None:
    """R-43: auto_retry_start carries attempt, maxAttempts, delayMs, errorMessage."""
    data = event_to_json(AutoRetryStart(1, 3, 2000, "503"))
    assert data == {
        "type": "auto_retry_start",
        "attempt": 1,
        "maxAttempts": 3,
        "delayMs": 2000,
        "errorMessage": "503",
    }
    assert list(data) == ["type", "attempt", "maxAttempts", "delayMs", "errorMessage"]


def test_auto_retry_end_success_has_no_final_error() -> None:
    """R-43: a successful auto_retry_end has no finalError key at all."""
    data = event_to_json(AutoRetryEnd(True, 2))
    assert data == {"type": "auto_retry_end", "success": True, "attempt": 2}
    assert "finalError" not in data


def test_auto_retry_end_failure_has_final_error() -> None:
    """R-43: a failed auto_retry_end carries finalError."""
    data = event_to_json(AutoRetryEnd(False, 3, "x"))
    assert data == {"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": "x"}


@pytest.mark.parametrize("will_retry", [True, False])
def test_agent_end_has_will_retry(will_retry: bool) -> None:
    """R-45a: agent_end always carries willRetry, true or false."""
    data = event_to_json(AgentEnd(messages=(USER,), will_retry=will_retry))
    assert data == {
        "type": "agent_end",
        "messages": [{"role": "user", "content": USER.content, "timestamp": USER.timestamp}],
        "willRetry": will_retry,
    }


@pytest.mark.parametrize("aborted", [False, True])
def test_agent_settled_shape(aborted: bool) -> None:
    """R-54: agent_settled is pi 1.6.0's {"type": "agent_settled", "aborted": bool}, always
    with aborted, and decodes back."""
    data = event_to_json(AgentSettled(aborted=aborted))
    assert json.dumps(data) == f'{{"type": "agent_settled", "aborted": {str(aborted).lower()}}}'
    assert event_from_json(data) == AgentSettled(aborted=aborted)


def test_auto_compaction_shapes() -> None:
    """R-43: compaction start has reason; its end has result, aborted, willRetry."""
    assert event_to_json(CompactionStart("overflow")) == {
        "type": "compaction_start",
        "reason": "overflow",
    }
    end = CompactionEnd(
        reason="overflow",
        result=CompactionResult("s", tokens_before=100, tokens_after=40, messages_removed=3),
        aborted=False,
        will_retry=True,
    )
    assert event_to_json(end) == {
        "type": "compaction_end",
        "reason": "overflow",
        "result": {"summary": "s", "tokensBefore": 100, "tokensAfter": 40, "messagesRemoved": 3},
        "aborted": False,
        "willRetry": True,
    }


def test_summarization_retry_and_entry_appended_in_pi16_shapes() -> None:
    """R-56e, R-56f: pi 1.6.0's summarization_retry_* and entry_appended objects, exactly
    as its docs/json.md shows them (a null replacement is kept: it is the edit)."""
    assert [event_to_json(e) for e in EVENTS[-5:]] == [
        {
            "type": "summarization_retry_scheduled",
            "attempt": 1,
            "maxAttempts": 3,
            "delayMs": 2000,
            "errorMessage": "503 Service Unavailable",
        },
        {"type": "summarization_retry_attempt_start", "source": "compaction", "reason": "overflow"},
        {"type": "summarization_retry_attempt_start", "source": "branchSummary"},
        {"type": "summarization_retry_finished"},
        {
            "type": "entry_appended",
            "entry": {
                "type": "context_edit",
                "id": "g6h7i8j9",
                "parentId": "f6g7h8i9",
                "timestamp": "2026-12-04T14:11:00.000Z",
                "targetId": "c3d4e5f6",
                "replacement": None,
            },
        },
    ]


def test_compaction_end_in_the_reference_shape() -> None:
    """pi 0.73.1 compaction_end: reason, result (firstKeptEntryId, details), errorMessage."""
    result = CompactionResult("s", 100, 40, 3, first_kept_entry_id="a1b2", details={"k": 1})
    assert event_to_json(CompactionEnd("manual", result, False, False))["result"] == {
        "summary": "s",
        "tokensBefore": 100,
        "tokensAfter": 40,
        "messagesRemoved": 3,
        "firstKeptEntryId": "a1b2",
        "details": {"k": 1},
    }
    failed = CompactionEnd("manual", None, False, False, error_message="Compaction failed: x")
    assert event_to_json(failed) == {
        "type": "compaction_end",
        "reason": "manual",
        "aborted": False,
        "willRetry": False,
        "errorMessage": "Compaction failed: x",
    }


def test_queue_update_shape() -> None:
    """pi's queue_update: {"type", "steering": [...], "followUp": [...]}."""
    assert event_to_json(QueueUpdate(steering=("a", "b"), follow_up=("c",))) == {
        "type": "queue_update",
        "steering": ["a", "b"],
        "followUp": ["c"],
    }


def test_assistant_message_shape() -> None:
    """Assistant messages use stopReason, usage with cacheRead/cacheWrite/totalTokens, toolCall."""
    assert message_to_json(TOOL_USE) == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me read the file."},
            {
                "type": "toolCall",
                "id": "call_01",
                "name": "read",
                "arguments": {
                    "path": "README.md",
                    "range": {"start": 1, "lines": [1, 2]},
                    "all": True,
                },
            },
        ],
        "stopReason": "toolUse",
        "usage": {
            "input": 1200,
            "output": 48,
            "cacheRead": 800,
            "cacheWrite": 64,
            "cost": ZERO_COST,
            "totalTokens": 2112,
        },
        "provider": "anthropic",
        "model": "claude-sonnet-4",
        "timestamp": 1_700_000_000_500,
        "api": "",
    }


def test_assistant_error_message_only_when_set() -> None:
    """errorMessage appears on an assistant message only when it is set."""
    assert "errorMessage" not in message_to_json(DONE)
    data = message_to_json(ERROR)
    assert data["stopReason"] == "error"
    assert data["errorMessage"] == ERROR.error_message


def test_tool_result_shape() -> None:
    """Tool results use toolCallId, toolName, content, isError, timestamp."""
    data = message_to_json(TOOL_ERROR)
    assert data == {
        "role": "toolResult",
        "toolCallId": "call_02",
        "toolName": "bash",
        "content": [{"type": "text", "text": "command not found: frob"}],
        "isError": True,
        "timestamp": 1_700_000_001_000,
    }
    assert list(data) == ["role", "toolCallId", "toolName", "content", "isError", "timestamp"]


def test_user_message_shape() -> None:
    """User messages are {role, content, timestamp} with role first."""
    data = message_to_json(USER)
    assert list(data) == ["role", "content", "timestamp"]


def test_tool_execution_shapes() -> None:
    """tool_execution_start/end use pi's toolCallId, toolName, args, result: {content,
    details}, isError, durationMs."""
    assert event_to_json(ToolExecutionStart("c1", "read", {"path": "a"})) == {
        "type": "tool_execution_start",
        "toolCallId": "c1",
        "toolName": "read",
        "args": {"path": "a"},
    }
    assert event_to_json(ToolExecutionEnd("c1", "read", "ok", duration_ms=3)) == {
        "type": "tool_execution_end",
        "toolCallId": "c1",
        "toolName": "read",
        "result": {"content": [{"type": "text", "text": "ok"}]},
        "isError": False,
        "durationMs": 3,
    }
    failed = ToolExecutionEnd("c2", "edit", ToolOutput((TextContent("no"),), {}), is_error=True)
    assert event_to_json(failed)["result"] == {
        "content": [{"type": "text", "text": "no"}],
        "details": {},
    }


def test_turn_end_shape() -> None:
    """turn_end carries message and toolResults."""
    data = event_to_json(TurnEnd(message=TOOL_USE, tool_results=(TOOL_RESULT,)))
    assert list(data) == ["type", "message", "toolResults"]
    assert data["toolResults"] == [message_to_json(TOOL_RESULT)]


def _objects(data: Any) -> list[dict[str, Any]]:
    """Every JSON object inside ``data``, outermost first."""
    found: list[dict[str, Any]] = []
    if isinstance(data, dict):
        found.append(data)
        for value in data.values():
            found.extend(_objects(value))
    elif isinstance(data, list):
        for value in data:
            found.extend(_objects(value))
    return found


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_discriminator_key_is_first(event: SessionEvent) -> None:
    """The discriminator (type or role) is the first key of every event, message and part."""
    data = event_to_json(event)
    assert next(iter(data)) == "type"
    for obj in _objects(data):
        if "role" in obj:
            assert next(iter(obj)) == "role"
        elif obj.get("type") in ("text", "toolCall"):
            assert next(iter(obj)) == "type"


# --- malformed input ------------------------------------------------------------------------

ALL_EVENT_TYPES = (
    "'agent_start', 'turn_start', 'message_start', 'message_update', 'message_end', "
    "'tool_execution_start', 'tool_execution_update', 'tool_execution_end', 'turn_end', "
    "'agent_end', 'agent_settled', "
    "'auto_retry_start', 'auto_retry_end', 'model_fallback', 'rate_limit_wait_start', "
    "'rate_limit_wait_end', 'compaction_start', "
    "'compaction_end', 'queue_update', 'thinking_level_changed', 'session_info_changed', "
    "'extension_error', 'history_write_failed', 'summarization_retry_scheduled', "
    "'summarization_retry_attempt_start', 'summarization_retry_finished', 'entry_appended'"
)
ROLES = (
    "'user', 'assistant', 'toolResult', 'bashExecution', 'custom', 'branchSummary', "
    "'compactionSummary'"
)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"type": "auto_retry_begin", "attempt": 1},
            f"event.type must be one of {ALL_EVENT_TYPES}, not 'auto_retry_begin'",
            id="unknown-type",
        ),
        pytest.param(
            {"attempt": 1},
            f"event.type must be one of {ALL_EVENT_TYPES}, not None",
            id="no-type",
        ),
        pytest.param(
            {"type": "auto_retry_start", "attempt": 1},
            "event.maxAttempts is missing",
            id="missing-field",
        ),
        pytest.param(
            {
                "type": "auto_retry_start",
                "attempt": "1",
                "maxAttempts": 3,
                "delayMs": 2000,
                "errorMessage": "503",
            },
            "event.attempt must be an integer, not '1'",
            id="string-for-int",
        ),
        pytest.param(
            {
                "type": "auto_retry_start",
                "attempt": True,
                "maxAttempts": 3,
                "delayMs": 2000,
                "errorMessage": "503",
            },
            "event.attempt must be an integer, not True",
            id="bool-for-int",
        ),
        pytest.param(
            {"type": "auto_retry_end", "success": 1, "attempt": 1},
            "event.success must be a boolean, not 1",
            id="int-for-bool",
        ),
        pytest.param(
            {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": 503},
            "event.finalError must be a string, not 503",
            id="int-for-string",
        ),
        pytest.param([], "event must be an object, not list", id="list"),
        pytest.param("agent_start", "event must be an object, not str", id="string"),
        pytest.param(None, "event must be an object, not NoneType", id="null"),
        pytest.param(
            {
                "type": "agent_end",
                "messages": [{"role": "user", "content": "hi"}, {"role": "system"}],
            },
            f"event.messages[1].role must be one of {ROLES}, not 'system'",
            id="unknown-role-in-messages",
        ),
        pytest.param(
            {"type": "agent_end", "messages": {"role": "user"}},
            "event.messages must be a list, not dict",
            id="messages-not-a-list",
        ),
        pytest.param(
            {"type": "message_end", "message": {"role": "assistant", "stopReason": "done"}},
            "event.message.stopReason must be one of "
            "'stop', 'length', 'toolUse', 'error', 'aborted', not 'done'",
            id="bad-stop-reason",
        ),
        pytest.param(
            {
                "type": "message_end",
                "message": {"role": "assistant", "content": [{"type": "image", "data": ""}]},
            },
            "event.message.content[0].type must be one of 'text', 'thinking', 'toolCall', "
            "not 'image'",
            id="unknown-content-part",
        ),
        pytest.param(
            {
                "type": "message_end",
                "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "c1"}]},
            },
            "event.message.content[0].name is missing",
            id="tool-call-without-name",
        ),
        pytest.param(
            {"type": "message_end", "message": {"role": "assistant", "usage": {"input": "12"}}},
            "event.message.usage.input must be an integer, not '12'",
            id="bad-usage",
        ),
        pytest.param(
            {"type": "turn_end", "message": {"role": "user", "content": "hi"}},
            "event.message.content must be a list, not str",
            id="user-where-assistant-expected",
        ),
        pytest.param(
            {"type": "turn_end", "message": {"role": "user"}},
            "event.message.role must be one of 'assistant', not 'user'",
            id="wrong-role-for-field",
        ),
        pytest.param(
            {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "read", "args": []},
            "event.args must be an object, not list",
            id="args-not-object",
        ),
        pytest.param(
            {
                "type": "compaction_end",
                "reason": "overflow",
                "result": {"summary": "s"},
                "aborted": False,
                "willRetry": False,
            },
            "event.result.tokensBefore is missing",
            id="partial-compaction-result",
        ),
        pytest.param(
            {"type": "compaction_start", "reason": "sideways"},
            "event.reason must be one of 'manual', 'threshold', 'overflow', not 'sideways'",
            id="bad-compaction-reason",
        ),
    ],
)
def test_malformed_event_names_path(data: Any, message: str) -> None:
    """Malformed event JSON raises CodecError whose message names the path of the bad value."""
    with pytest.raises(CodecError, match=rf"^{re.escape(message)}$"):
        event_from_json(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"role": "system", "content": "be brief"},
            f"message.role must be one of {ROLES}, not 'system'",
            id="unknown-role",
        ),
        pytest.param(
            {"content": "hi"}, f"message.role must be one of {ROLES}, not None", id="no-role"
        ),
        pytest.param(
            {"role": "toolResult", "toolName": "read"},
            "message.toolCallId is missing",
            id="missing-tool-call-id",
        ),
        pytest.param(
            {"role": "toolResult", "toolCallId": "c", "toolName": "read", "isError": "no"},
            "message.isError must be a boolean, not 'no'",
            id="bad-is-error",
        ),
        pytest.param(
            {"role": "assistant", "stopReason": "error", "errorMessage": ["503"]},
            "message.errorMessage must be a string, not ['503']",
            id="bad-error-message",
        ),
        pytest.param(
            {"role": "user", "content": "hi", "timestamp": 1.5},
            "message.timestamp must be an integer, not 1.5",
            id="float-timestamp",
        ),
        pytest.param(42, "message must be an object, not int", id="not-an-object"),
    ],
)
def test_malformed_message_names_path(data: Any, message: str) -> None:
    """Malformed message JSON raises CodecError whose message names the path of the bad value."""
    with pytest.raises(CodecError, match=rf"^{re.escape(message)}$"):
        message_from_json(data)


def test_optional_fields_may_be_absent_or_null() -> None:
    """A missing or null optional field decodes to its default (finalError, errorMessage)."""
    assert event_from_json({"type": "auto_retry_end", "success": True, "attempt": 1}) == (
        AutoRetryEnd(success=True, attempt=1)
    )
    assert event_from_json(
        {"type": "auto_retry_end", "success": True, "attempt": 1, "finalError": None}
    ) == AutoRetryEnd(success=True, attempt=1)
    decoded = message_from_json(
        {"role": "assistant", "stopReason": "stop", "errorMessage": None, "timestamp": 5}
    )
    assert decoded == AssistantMessage(stop_reason="stop", timestamp=5)


def test_total_tokens_is_derived_on_decode() -> None:
    """usage.totalTokens is written for clients but recomputed, not trusted, on decode."""
    decoded = message_from_json(
        {
            "role": "assistant",
            "usage": {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 99},
            "timestamp": 5,
        }
    )
    assert isinstance(decoded, AssistantMessage)
    assert decoded.usage == Usage(1, 2, 3, 4)
    assert decoded.usage.total_tokens == 10


# --- property -------------------------------------------------------------------------------

STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
content_parts = st.one_of(
    st.builds(TextContent, text=st.text()),
    st.builds(
        ToolCall,
        id=st.text(min_size=1, max_size=20),
        name=st.text(min_size=1, max_size=20),
        arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    ),
)
non_negative = st.integers(min_value=0, max_value=10**9)
assistant_messages = st.builds(
    AssistantMessage,
    content=st.lists(content_parts, max_size=4).map(tuple),
    stop_reason=st.sampled_from(STOP_REASONS),
    error_message=st.none() | st.text(),
    usage=st.builds(
        Usage,
        input=non_negative,
        output=non_negative,
        cache_read=non_negative,
        cache_write=non_negative,
    ),
    provider=st.text(max_size=20),
    model=st.text(max_size=20),
    timestamp=st.integers(min_value=0, max_value=2**53),
)


@settings(deadline=None)
@given(assistant_messages)
def test_any_assistant_message_round_trips(message: AssistantMessage) -> None:
    """Any assistant message (text, tool calls, stop reason, error, usage) round-trips."""
    data = through_text(message_to_json(message))
    assert message_from_json(data) == message
    assert ("errorMessage" in data) == (message.error_message is not None)
    assert data["usage"]["totalTokens"] == message.usage.total_tokens
    assert event_from_json(through_text(event_to_json(MessageEnd(message)))) == MessageEnd(message)
