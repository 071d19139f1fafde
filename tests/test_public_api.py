"""The package has one public face: ``trio_session.__all__``."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import attrs
import pytest

import trio_session


def test_all_is_sorted_and_unique() -> None:
    """__all__ is sorted (constants first, as ruff sorts it) and has no duplicates."""
    names = trio_session.__all__
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n[0].islower(), n))


def test_all_is_complete() -> None:
    """Every public name is in ``__all__``, and every name of ``__all__`` resolves.

    The names are imported on first use (PEP 562), so ``vars(trio_session)`` holds
    only those used so far: completeness is checked on the table of where each one
    lives, and on ``dir()``, which lists them all whether imported or not.
    """
    exports = trio_session._EXPORTS
    assert set(exports) == set(trio_session.__all__)
    assert set(trio_session.__all__) <= set(dir(trio_session))
    for name in trio_session.__all__:
        value = getattr(trio_session, name)
        module = sys.modules[f"trio_session{exports[name]}"]
        assert value is getattr(module, name), name
    # Now that all are imported, the module defines nothing public beyond them.
    defined = {
        name
        for name, value in vars(trio_session).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and name not in {"annotations", "TYPE_CHECKING", "Any"}
    }
    assert defined == set(trio_session.__all__)


def test_type_checkers_see_every_export() -> None:
    """The ``if TYPE_CHECKING:`` imports (what mypy and the docs read) are the table."""
    tree = ast.parse(Path(trio_session.__file__).read_text(encoding="utf-8"))
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    seen = {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == trio_session._EXPORTS


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name that is not public raises ``AttributeError`` (so ``hasattr`` works)."""
    assert not hasattr(trio_session, "no_such_name")
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(trio_session, "no_such_name")  # noqa: B009


def test_exports_are_documented() -> None:
    """Every exported class and function has a docstring."""
    undocumented = [
        name
        for name in trio_session.__all__
        if (inspect.isclass(obj := getattr(trio_session, name)) or inspect.isfunction(obj))
        and not inspect.getdoc(obj)
    ]
    assert undocumented == []


def test_agent_session_surface_is_deliberate() -> None:
    """The retry chain's hooks are not public methods of ``AgentSession`` (they live on a
    private adapter), and every public method and property has a docstring."""
    public = {n for n in dir(trio_session.AgentSession) if not n.startswith("_")}
    hooks = {"emit", "reattempt", "rotate_credential", "retry_settings", "next_step"}
    assert public & (hooks | {"drop_from_context"}) == set()
    fields = set(attrs.fields_dict(trio_session.AgentSession))  # in the class docstring
    undocumented = sorted(
        n for n in public - fields if not inspect.getdoc(getattr(trio_session.AgentSession, n))
    )
    assert undocumented == []


#: ``AgentSession``'s public members, by name: a member added, renamed or lost is a
#: change of the public API, made here on purpose (issue 40: pinned by name, not count).
AGENT_SESSION_SURFACE = frozenset(
    {
        *("abort", "abort_bash", "abort_retry", "aclose", "assert_idle"),
        *("auto_compaction_enabled", "auto_retry_enabled", "available_models"),
        *("available_thinking_levels", "bash", "busy_with", "clear_queue", "compact"),
        *("credential_store_status", "cycle_model", "cycle_thinking_level", "events"),
        *("export_html", "follow_up", "follow_up_messages", "follow_up_mode"),
        *("fork_messages", "history", "history_file", "is_bash_running", "is_compacting"),
        *("is_rate_limited", "is_retrying", "is_running", "is_waiting_to_retry"),
        *("join_retry",),
        *("last_assistant_text", "messages", "model", "pending_message_count", "prompt"),
        *("retry_attempt", "retry_now", "session_file", "session_id", "session_name"),
        *("set_auto_compaction_enabled", "set_auto_retry_enabled", "set_follow_up_mode"),
        *("set_model", "set_session_name", "set_steering_mode", "set_thinking_level"),
        *("settings", "settings_store", "stats", "steer", "steering_messages"),
        *("steering_mode", "stream", "subscribe", "thinking_level", "wait_for_retry_end"),
    }
)


def test_agent_session_surface_is_pinned_by_name() -> None:
    """``AgentSession`` has exactly the public members named above, each defined on the
    class itself (a facade over collaborators, no base class lends it one)."""
    public = {n for n in dir(trio_session.AgentSession) if not n.startswith("_")}
    assert public == AGENT_SESSION_SURFACE
    bases = [b for b in trio_session.AgentSession.__mro__[1:] if b is not object]
    assert bases == []


#: ``trio_session.__all__``, by name (issue 40): a public name added or lost is made here
#: on purpose, and the API page and the changelog say so.
PUBLIC_NAMES = [
    "OVERFLOW_PATTERNS",
    "PI_1_6_CLASSIFIER",
    "PI_1_6_PATTERNS",
    "REFERENCE_CLASSIFIER",
    "RETRYABLE_PATTERN",
    "SEED_PATTERNS",
    "SERVICE_SETTINGS",
    "STRICT_CLASSIFIER",
    "STRICT_PATTERNS",
    "THINKING_LEVELS",
    "USAGE_LIMIT_PATTERN",
    "Agent",
    "AgentEnd",
    "AgentSession",
    "AgentSettled",
    "AgentStart",
    "AnthropicProvider",
    "Ask",
    "AssistantMessage",
    "AuthenticationError",
    "AutoCompactionEnd",
    "AutoCompactionStart",
    "AutoRetryEnd",
    "AutoRetryStart",
    "BashExecutionMessage",
    "BashResult",
    "BranchSummaryMessage",
    "Classifier",
    "CodecError",
    "Compaction",
    "CompactionEnd",
    "CompactionError",
    "CompactionResult",
    "CompactionSettings",
    "CompactionStart",
    "CompactionSummaryMessage",
    "Compactor",
    "ContextOverflowError",
    "ContextUsage",
    "Cost",
    "CredentialInfo",
    "CredentialStore",
    "CredentialStoreError",
    "CredentialsSettings",
    "CustomMessage",
    "DelayPlan",
    "DropOldestCompactor",
    "EntryAppended",
    "EventStream",
    "EventStreamLagged",
    "Extension",
    "ExtensionAPI",
    "ExtensionError",
    "ExtensionLoadError",
    "FauxProvider",
    "FauxReply",
    "FauxScriptError",
    "GeminiProvider",
    "HistoryError",
    "HistoryWriteFailed",
    "HttpProvider",
    "HttpSettings",
    "ImageContent",
    "InMemoryCredentialStore",
    "LoadedSession",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelCost",
    "ModelFallback",
    "NamedPattern",
    "OpenAIProvider",
    "OverloadedError",
    "PatternClassifier",
    "PatternTable",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderFailure",
    "ProviderRequest",
    "ProviderRetrySettings",
    "QueueUpdate",
    "RateLimitError",
    "RateLimitSettings",
    "RateLimitWaitEnd",
    "RateLimitWaitStart",
    "RateLimits",
    "RedisCredentialStore",
    "ReplyItems",
    "ReplyRestart",
    "ReplyStream",
    "RetrySettings",
    "RpcClient",
    "RpcCommandError",
    "RpcConnectionError",
    "RpcError",
    "RpcServer",
    "ServerError",
    "SessionBusyError",
    "SessionClosedError",
    "SessionEvent",
    "SessionFile",
    "SessionInfoChanged",
    "SessionRequest",
    "SessionStats",
    "SessionSummary",
    "Settings",
    "SettingsError",
    "SettingsLayer",
    "SettingsStore",
    "SqliteCredentialStore",
    "StreamEnd",
    "StreamSink",
    "SummarizationRetryAttemptStart",
    "SummarizationRetryFinished",
    "SummarizationRetryScheduled",
    "SummarizingCompactor",
    "TextContent",
    "ThinkingLevelChanged",
    "TokenTotals",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolOutput",
    "ToolResultMessage",
    "ToolSpec",
    "TrioSessionError",
    "TurnEnd",
    "TurnStart",
    "Usage",
    "UserMessage",
    "builtin_model",
    "classifier_for",
    "coding_tools",
    "connect_rpc",
    "default_sessions_dir",
    "default_settings_paths",
    "error_status",
    "event_from_json",
    "event_to_json",
    "exponential_delay_ms",
    "fork_session",
    "is_context_overflow",
    "is_retryable_error",
    "is_usage_limit_error",
    "latest_session",
    "list_sessions",
    "load_entry_point_extensions",
    "load_extension_file",
    "load_faux_script",
    "load_session",
    "message_from_json",
    "message_to_json",
    "model_to_json",
    "open_history",
    "open_redis_credentials",
    "open_rpc_client",
    "open_session",
    "open_sqlite_credentials",
    "parse_retry_after_ms",
    "persist_setting",
    "plan_delay",
    "provider_error",
    "runtime_context",
    "serve_rpc",
    "session_context",
    "settings_with",
    "tool",
]


def test_all_is_pinned_by_name() -> None:
    """``__all__`` holds exactly the names above."""
    assert sorted(trio_session.__all__) == sorted(PUBLIC_NAMES)
