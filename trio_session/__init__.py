"""trio_session: LLM agent sessions on Trio, with structural retry cancellation.

Everything public is importable from here; the modules behind it are private. A
name is imported the first time it is used (PEP 562): ``import trio_session`` by
itself loads no provider, HTTP client, RPC server, terminal UI, SQLite or
OpenTelemetry, and ``from trio_session import open_session`` loads only what a
session needs. ``_EXPORTS`` says where each public name lives.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and the docs see: every name, as if imported here
    from ._agent import Agent as Agent
    from ._bash import BashResult as BashResult
    from ._codec import event_from_json as event_from_json
    from ._codec import event_to_json as event_to_json
    from ._codec import message_from_json as message_from_json
    from ._codec import message_to_json as message_to_json
    from ._codec import model_to_json as model_to_json
    from ._coding_tools import coding_tools as coding_tools
    from ._compaction import Ask as Ask
    from ._compaction import Compaction as Compaction
    from ._compaction import Compactor as Compactor
    from ._compaction import DropOldestCompactor as DropOldestCompactor
    from ._compaction import SummarizingCompactor as SummarizingCompactor
    from ._errors import AuthenticationError as AuthenticationError
    from ._errors import CodecError as CodecError
    from ._errors import CompactionError as CompactionError
    from ._errors import ContextOverflowError as ContextOverflowError
    from ._errors import EventStreamLagged as EventStreamLagged
    from ._errors import HistoryError as HistoryError
    from ._errors import OverloadedError as OverloadedError
    from ._errors import ProviderConnectionError as ProviderConnectionError
    from ._errors import ProviderError as ProviderError
    from ._errors import RateLimitError as RateLimitError
    from ._errors import ServerError as ServerError
    from ._errors import SessionBusyError as SessionBusyError
    from ._errors import SessionClosedError as SessionClosedError
    from ._errors import SettingsError as SettingsError
    from ._errors import ToolError as ToolError
    from ._errors import TrioSessionError as TrioSessionError
    from ._events import AgentEnd as AgentEnd
    from ._events import AgentSettled as AgentSettled
    from ._events import AgentStart as AgentStart
    from ._events import AutoCompactionEnd as AutoCompactionEnd
    from ._events import AutoCompactionStart as AutoCompactionStart
    from ._events import AutoRetryEnd as AutoRetryEnd
    from ._events import AutoRetryStart as AutoRetryStart
    from ._events import CompactionEnd as CompactionEnd
    from ._events import CompactionResult as CompactionResult
    from ._events import CompactionStart as CompactionStart
    from ._events import EntryAppended as EntryAppended
    from ._events import ExtensionError as ExtensionError
    from ._events import HistoryWriteFailed as HistoryWriteFailed
    from ._events import MessageEnd as MessageEnd
    from ._events import MessageStart as MessageStart
    from ._events import MessageUpdate as MessageUpdate
    from ._events import ModelFallback as ModelFallback
    from ._events import QueueUpdate as QueueUpdate
    from ._events import RateLimitWaitEnd as RateLimitWaitEnd
    from ._events import RateLimitWaitStart as RateLimitWaitStart
    from ._events import SessionEvent as SessionEvent
    from ._events import SessionInfoChanged as SessionInfoChanged
    from ._events import SummarizationRetryAttemptStart as SummarizationRetryAttemptStart
    from ._events import SummarizationRetryFinished as SummarizationRetryFinished
    from ._events import SummarizationRetryScheduled as SummarizationRetryScheduled
    from ._events import ThinkingLevelChanged as ThinkingLevelChanged
    from ._events import ToolExecutionEnd as ToolExecutionEnd
    from ._events import ToolExecutionStart as ToolExecutionStart
    from ._events import ToolExecutionUpdate as ToolExecutionUpdate
    from ._events import ToolOutput as ToolOutput
    from ._events import TurnEnd as TurnEnd
    from ._events import TurnStart as TurnStart
    from ._extensions import Extension as Extension
    from ._extensions import ExtensionAPI as ExtensionAPI
    from ._extensions import ExtensionLoadError as ExtensionLoadError
    from ._extensions import load_entry_point_extensions as load_entry_point_extensions
    from ._extensions import load_extension_file as load_extension_file
    from ._failure import ProviderFailure as ProviderFailure
    from ._messages import AssistantMessage as AssistantMessage
    from ._messages import BashExecutionMessage as BashExecutionMessage
    from ._messages import BranchSummaryMessage as BranchSummaryMessage
    from ._messages import CompactionSummaryMessage as CompactionSummaryMessage
    from ._messages import Cost as Cost
    from ._messages import CustomMessage as CustomMessage
    from ._messages import ImageContent as ImageContent
    from ._messages import Message as Message
    from ._messages import TextContent as TextContent
    from ._messages import ToolCall as ToolCall
    from ._messages import ToolResultMessage as ToolResultMessage
    from ._messages import Usage as Usage
    from ._messages import UserMessage as UserMessage
    from ._opening import open_session as open_session
    from ._retry.backoff import DelayPlan as DelayPlan
    from ._retry.backoff import exponential_delay_ms as exponential_delay_ms
    from ._retry.backoff import plan_delay as plan_delay
    from ._retry.classify import OVERFLOW_PATTERNS as OVERFLOW_PATTERNS
    from ._retry.classify import PI_1_6_CLASSIFIER as PI_1_6_CLASSIFIER
    from ._retry.classify import REFERENCE_CLASSIFIER as REFERENCE_CLASSIFIER
    from ._retry.classify import RETRYABLE_PATTERN as RETRYABLE_PATTERN
    from ._retry.classify import STRICT_CLASSIFIER as STRICT_CLASSIFIER
    from ._retry.classify import USAGE_LIMIT_PATTERN as USAGE_LIMIT_PATTERN
    from ._retry.classify import Classifier as Classifier
    from ._retry.classify import PatternClassifier as PatternClassifier
    from ._retry.classify import classifier_for as classifier_for
    from ._retry.classify import error_status as error_status
    from ._retry.classify import is_context_overflow as is_context_overflow
    from ._retry.classify import is_retryable_error as is_retryable_error
    from ._retry.classify import is_usage_limit_error as is_usage_limit_error
    from ._retry.classify import parse_retry_after_ms as parse_retry_after_ms
    from ._retry.classify import provider_error as provider_error
    from ._retry.tables import PI_1_6_PATTERNS as PI_1_6_PATTERNS
    from ._retry.tables import SEED_PATTERNS as SEED_PATTERNS
    from ._retry.tables import STRICT_PATTERNS as STRICT_PATTERNS
    from ._retry.tables import NamedPattern as NamedPattern
    from ._retry.tables import PatternTable as PatternTable
    from ._session import AgentSession as AgentSession
    from ._session_parts.hub import EventStream as EventStream
    from ._settings import CompactionSettings as CompactionSettings
    from ._settings import CredentialsSettings as CredentialsSettings
    from ._settings import ProviderRetrySettings as ProviderRetrySettings
    from ._settings import RetrySettings as RetrySettings
    from ._settings import Settings as Settings
    from ._settings import SettingsLayer as SettingsLayer
    from ._settings import SettingsStore as SettingsStore
    from ._settings import default_settings_paths as default_settings_paths
    from ._settings import persist_setting as persist_setting
    from ._settings_values import SERVICE_SETTINGS as SERVICE_SETTINGS
    from ._settings_values import HttpSettings as HttpSettings
    from ._settings_values import RateLimits as RateLimits
    from ._settings_values import RateLimitSettings as RateLimitSettings
    from ._stats import ContextUsage as ContextUsage
    from ._stats import SessionStats as SessionStats
    from ._stats import TokenTotals as TokenTotals
    from ._stream import ReplyItems as ReplyItems
    from ._stream import ReplyRestart as ReplyRestart
    from ._stream import ReplyStream as ReplyStream
    from ._tools import Tool as Tool
    from ._tools import ToolArgumentError as ToolArgumentError
    from ._tools import tool as tool
    from .providers._anthropic import AnthropicProvider as AnthropicProvider
    from .providers._base import THINKING_LEVELS as THINKING_LEVELS
    from .providers._base import Model as Model
    from .providers._base import ModelCost as ModelCost
    from .providers._base import Provider as Provider
    from .providers._base import ProviderRequest as ProviderRequest
    from .providers._base import StreamEnd as StreamEnd
    from .providers._base import StreamSink as StreamSink
    from .providers._base import ToolSpec as ToolSpec
    from .providers._faux import FauxProvider as FauxProvider
    from .providers._faux import FauxReply as FauxReply
    from .providers._faux import FauxScriptError as FauxScriptError
    from .providers._faux import load_faux_script as load_faux_script
    from .providers._gemini import GeminiProvider as GeminiProvider
    from .providers._http import HttpProvider as HttpProvider
    from .providers._models import builtin_model as builtin_model
    from .providers._openai import OpenAIProvider as OpenAIProvider
    from .rpc import RpcClient as RpcClient
    from .rpc import RpcCommandError as RpcCommandError
    from .rpc import RpcConnectionError as RpcConnectionError
    from .rpc import RpcError as RpcError
    from .rpc import RpcServer as RpcServer
    from .rpc import SessionRequest as SessionRequest
    from .rpc import connect_rpc as connect_rpc
    from .rpc import open_rpc_client as open_rpc_client
    from .rpc import serve_rpc as serve_rpc
    from .store._credentials import CredentialStore as CredentialStore
    from .store._credentials import InMemoryCredentialStore as InMemoryCredentialStore
    from .store._credentials_file import CredentialInfo as CredentialInfo
    from .store._credentials_file import CredentialStoreError as CredentialStoreError
    from .store._fork import fork_session as fork_session
    from .store._history import load_session as load_session
    from .store._loaded import LoadedSession as LoadedSession
    from .store._loaded import runtime_context as runtime_context
    from .store._loaded import session_context as session_context
    from .store._open_history import open_history as open_history
    from .store._redis_credentials import RedisCredentialStore as RedisCredentialStore
    from .store._redis_credentials import open_redis_credentials as open_redis_credentials
    from .store._session_file import SessionFile as SessionFile
    from .store._session_list import SessionSummary as SessionSummary
    from .store._session_list import default_sessions_dir as default_sessions_dir
    from .store._session_list import latest_session as latest_session
    from .store._session_list import list_sessions as list_sessions
    from .store._sqlite_credentials import SqliteCredentialStore as SqliteCredentialStore
    from .store._sqlite_credentials import open_sqlite_credentials as open_sqlite_credentials

__version__ = "0.1.0.dev0"

#: Each public name → the module that defines it, relative to this package.
_EXPORTS: dict[str, str] = {
    "CredentialInfo": ".store._credentials_file",
    "ImageContent": "._messages",
    "CustomMessage": "._messages",
    "Cost": "._messages",
    "CompactionSummaryMessage": "._messages",
    "BranchSummaryMessage": "._messages",
    "BashExecutionMessage": "._messages",
    "Agent": "._agent",
    "Tool": "._tools",
    "DelayPlan": "._retry.backoff",
    "exponential_delay_ms": "._retry.backoff",
    "plan_delay": "._retry.backoff",
    "BashResult": "._bash",
    "OVERFLOW_PATTERNS": "._retry.classify",
    "PI_1_6_CLASSIFIER": "._retry.classify",
    "REFERENCE_CLASSIFIER": "._retry.classify",
    "RETRYABLE_PATTERN": "._retry.classify",
    "STRICT_CLASSIFIER": "._retry.classify",
    "USAGE_LIMIT_PATTERN": "._retry.classify",
    "Classifier": "._retry.classify",
    "PatternClassifier": "._retry.classify",
    "classifier_for": "._retry.classify",
    "PI_1_6_PATTERNS": "._retry.tables",
    "SEED_PATTERNS": "._retry.tables",
    "STRICT_PATTERNS": "._retry.tables",
    "NamedPattern": "._retry.tables",
    "PatternTable": "._retry.tables",
    "error_status": "._retry.classify",
    "is_context_overflow": "._retry.classify",
    "is_retryable_error": "._retry.classify",
    "is_usage_limit_error": "._retry.classify",
    "parse_retry_after_ms": "._retry.classify",
    "provider_error": "._retry.classify",
    "event_from_json": "._codec",
    "event_to_json": "._codec",
    "message_from_json": "._codec",
    "message_to_json": "._codec",
    "model_to_json": "._codec",
    "Ask": "._compaction",
    "Compaction": "._compaction",
    "Compactor": "._compaction",
    "DropOldestCompactor": "._compaction",
    "SummarizingCompactor": "._compaction",
    "AuthenticationError": "._errors",
    "CodecError": "._errors",
    "CompactionError": "._errors",
    "ContextOverflowError": "._errors",
    "EventStreamLagged": "._errors",
    "HistoryError": "._errors",
    "OverloadedError": "._errors",
    "ProviderConnectionError": "._errors",
    "ProviderError": "._errors",
    "RateLimitError": "._errors",
    "ServerError": "._errors",
    "SessionBusyError": "._errors",
    "SessionClosedError": "._errors",
    "SettingsError": "._errors",
    "TrioSessionError": "._errors",
    "AgentEnd": "._events",
    "AgentSettled": "._events",
    "AgentStart": "._events",
    "AutoCompactionEnd": "._events",
    "AutoCompactionStart": "._events",
    "AutoRetryEnd": "._events",
    "AutoRetryStart": "._events",
    "CompactionEnd": "._events",
    "CompactionResult": "._events",
    "CompactionStart": "._events",
    "EntryAppended": "._events",
    "ExtensionError": "._events",
    "HistoryWriteFailed": "._events",
    "MessageEnd": "._events",
    "MessageStart": "._events",
    "MessageUpdate": "._events",
    "ModelFallback": "._events",
    "QueueUpdate": "._events",
    "RateLimitWaitEnd": "._events",
    "RateLimitWaitStart": "._events",
    "SessionEvent": "._events",
    "SessionInfoChanged": "._events",
    "SummarizationRetryAttemptStart": "._events",
    "SummarizationRetryFinished": "._events",
    "SummarizationRetryScheduled": "._events",
    "ThinkingLevelChanged": "._events",
    "ToolExecutionEnd": "._events",
    "ToolExecutionStart": "._events",
    "ToolExecutionUpdate": "._events",
    "ToolOutput": "._events",
    "TurnEnd": "._events",
    "TurnStart": "._events",
    "Extension": "._extensions",
    "ProviderFailure": "._failure",
    "ExtensionAPI": "._extensions",
    "ExtensionLoadError": "._extensions",
    "load_entry_point_extensions": "._extensions",
    "load_extension_file": "._extensions",
    "AssistantMessage": "._messages",
    "Message": "._messages",
    "TextContent": "._messages",
    "ToolCall": "._messages",
    "ToolResultMessage": "._messages",
    "Usage": "._messages",
    "UserMessage": "._messages",
    "AgentSession": "._session",
    "EventStream": "._session_parts.hub",
    "open_session": "._opening",
    "CompactionSettings": "._settings",
    "CredentialsSettings": "._settings",
    "HttpSettings": "._settings_values",
    "RateLimitSettings": "._settings_values",
    "RateLimits": "._settings_values",
    "ProviderRetrySettings": "._settings",
    "RetrySettings": "._settings",
    "SERVICE_SETTINGS": "._settings_values",
    "Settings": "._settings",
    "SettingsLayer": "._settings",
    "SettingsStore": "._settings",
    "default_settings_paths": "._settings",
    "persist_setting": "._settings",
    "ContextUsage": "._stats",
    "SessionStats": "._stats",
    "TokenTotals": "._stats",
    "ReplyItems": "._stream",
    "ReplyRestart": "._stream",
    "ReplyStream": "._stream",
    "ToolArgumentError": "._tools",
    "ToolError": "._errors",
    "coding_tools": "._coding_tools",
    "tool": "._tools",
    "AnthropicProvider": ".providers._anthropic",
    "THINKING_LEVELS": ".providers._base",
    "Model": ".providers._base",
    "ModelCost": ".providers._base",
    "Provider": ".providers._base",
    "ProviderRequest": ".providers._base",
    "StreamEnd": ".providers._base",
    "StreamSink": ".providers._base",
    "ToolSpec": ".providers._base",
    "FauxProvider": ".providers._faux",
    "FauxReply": ".providers._faux",
    "FauxScriptError": ".providers._faux",
    "load_faux_script": ".providers._faux",
    "GeminiProvider": ".providers._gemini",
    "HttpProvider": ".providers._http",
    "builtin_model": ".providers._models",
    "OpenAIProvider": ".providers._openai",
    "RpcClient": ".rpc",
    "RpcCommandError": ".rpc",
    "RpcConnectionError": ".rpc",
    "RpcError": ".rpc",
    "RpcServer": ".rpc",
    "SessionRequest": ".rpc",
    "connect_rpc": ".rpc",
    "open_rpc_client": ".rpc",
    "serve_rpc": ".rpc",
    "CredentialStore": ".store._credentials",
    "InMemoryCredentialStore": ".store._credentials",
    "LoadedSession": ".store._loaded",
    "SessionSummary": ".store._session_list",
    "default_sessions_dir": ".store._session_list",
    "latest_session": ".store._session_list",
    "list_sessions": ".store._session_list",
    "load_session": ".store._history",
    "runtime_context": ".store._loaded",
    "session_context": ".store._loaded",
    "SessionFile": ".store._session_file",
    "fork_session": ".store._fork",
    "open_history": ".store._open_history",
    "CredentialStoreError": ".store._credentials_file",
    "SqliteCredentialStore": ".store._sqlite_credentials",
    "open_sqlite_credentials": ".store._sqlite_credentials",
    "RedisCredentialStore": ".store._redis_credentials",
    "open_redis_credentials": ".store._redis_credentials",
}


#: Subpackages reachable as attributes, imported on first use (``import trio_session`` used
#: to import ``rpc``, ``providers`` and ``store`` itself).
_SUBPACKAGES = frozenset({"providers", "rpc", "store", "testing", "tui"})

if not TYPE_CHECKING:  # hidden from type checkers, which then flag a misspelt name

    def __getattr__(name: str) -> Any:
        """Import a public name on first use, and keep it: the next use is a plain lookup."""
        if name in _SUBPACKAGES:  # ``trio_session.rpc`` works after a bare ``import trio_session``
            return importlib.import_module(f".{name}", __name__)
        module = _EXPORTS.get(name)
        if module is None:
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """The module's own names and every public one, imported or not yet."""
        return sorted({*globals(), *__all__})


__all__ = [
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
    "tool",
]
