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
    from ._agent.compactors import Ask as Ask
    from ._agent.compactors import Compaction as Compaction
    from ._agent.compactors import Compactor as Compactor
    from ._agent.compactors import DropOldestCompactor as DropOldestCompactor
    from ._agent.compactors import SummarizingCompactor as SummarizingCompactor
    from ._agent.loop import Agent as Agent
    from ._agent.tools import Tool as Tool
    from ._agent.tools import ToolArgumentError as ToolArgumentError
    from ._agent.tools import tool as tool
    from ._coding_tools import coding_tools as coding_tools
    from ._core.codec import event_from_json as event_from_json
    from ._core.codec import event_to_json as event_to_json
    from ._core.codec import message_from_json as message_from_json
    from ._core.codec import message_to_json as message_to_json
    from ._core.codec import model_to_json as model_to_json
    from ._core.errors import AuthenticationError as AuthenticationError
    from ._core.errors import CodecError as CodecError
    from ._core.errors import CompactionError as CompactionError
    from ._core.errors import ContextOverflowError as ContextOverflowError
    from ._core.errors import EventStreamLagged as EventStreamLagged
    from ._core.errors import HistoryError as HistoryError
    from ._core.errors import OverloadedError as OverloadedError
    from ._core.errors import ProviderConnectionError as ProviderConnectionError
    from ._core.errors import ProviderError as ProviderError
    from ._core.errors import RateLimitError as RateLimitError
    from ._core.errors import ServerError as ServerError
    from ._core.errors import SessionBusyError as SessionBusyError
    from ._core.errors import SessionClosedError as SessionClosedError
    from ._core.errors import SettingsError as SettingsError
    from ._core.errors import ToolError as ToolError
    from ._core.errors import TrioSessionError as TrioSessionError
    from ._core.events import AgentEnd as AgentEnd
    from ._core.events import AgentSettled as AgentSettled
    from ._core.events import AgentStart as AgentStart
    from ._core.events import AutoCompactionEnd as AutoCompactionEnd
    from ._core.events import AutoCompactionStart as AutoCompactionStart
    from ._core.events import AutoRetryEnd as AutoRetryEnd
    from ._core.events import AutoRetryStart as AutoRetryStart
    from ._core.events import CompactionEnd as CompactionEnd
    from ._core.events import CompactionResult as CompactionResult
    from ._core.events import CompactionStart as CompactionStart
    from ._core.events import EntryAppended as EntryAppended
    from ._core.events import ExtensionError as ExtensionError
    from ._core.events import HistoryWriteFailed as HistoryWriteFailed
    from ._core.events import MessageEnd as MessageEnd
    from ._core.events import MessageStart as MessageStart
    from ._core.events import MessageUpdate as MessageUpdate
    from ._core.events import ModelFallback as ModelFallback
    from ._core.events import QueueUpdate as QueueUpdate
    from ._core.events import RateLimitWaitEnd as RateLimitWaitEnd
    from ._core.events import RateLimitWaitStart as RateLimitWaitStart
    from ._core.events import SessionEvent as SessionEvent
    from ._core.events import SessionInfoChanged as SessionInfoChanged
    from ._core.events import SummarizationRetryAttemptStart as SummarizationRetryAttemptStart
    from ._core.events import SummarizationRetryFinished as SummarizationRetryFinished
    from ._core.events import SummarizationRetryScheduled as SummarizationRetryScheduled
    from ._core.events import ThinkingLevelChanged as ThinkingLevelChanged
    from ._core.events import ToolExecutionEnd as ToolExecutionEnd
    from ._core.events import ToolExecutionStart as ToolExecutionStart
    from ._core.events import ToolExecutionUpdate as ToolExecutionUpdate
    from ._core.events import ToolOutput as ToolOutput
    from ._core.events import TurnEnd as TurnEnd
    from ._core.events import TurnStart as TurnStart
    from ._core.failure import ProviderFailure as ProviderFailure
    from ._core.messages import AssistantMessage as AssistantMessage
    from ._core.messages import BashExecutionMessage as BashExecutionMessage
    from ._core.messages import BranchSummaryMessage as BranchSummaryMessage
    from ._core.messages import CompactionSummaryMessage as CompactionSummaryMessage
    from ._core.messages import Cost as Cost
    from ._core.messages import CustomMessage as CustomMessage
    from ._core.messages import ImageContent as ImageContent
    from ._core.messages import Message as Message
    from ._core.messages import TextContent as TextContent
    from ._core.messages import ToolCall as ToolCall
    from ._core.messages import ToolResultMessage as ToolResultMessage
    from ._core.messages import Usage as Usage
    from ._core.messages import UserMessage as UserMessage
    from ._core.stats import ContextUsage as ContextUsage
    from ._core.stats import SessionStats as SessionStats
    from ._core.stats import TokenTotals as TokenTotals
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
    from ._session.bash_run import BashResult as BashResult
    from ._session.extensions import Extension as Extension
    from ._session.extensions import ExtensionAPI as ExtensionAPI
    from ._session.extensions import ExtensionLoadError as ExtensionLoadError
    from ._session.extensions import load_entry_point_extensions as load_entry_point_extensions
    from ._session.extensions import load_extension_file as load_extension_file
    from ._session.facade import AgentSession as AgentSession
    from ._session.hub import EventStream as EventStream
    from ._session.opening import open_session as open_session
    from ._session.stream import ReplyItems as ReplyItems
    from ._session.stream import ReplyRestart as ReplyRestart
    from ._session.stream import ReplyStream as ReplyStream
    from ._settings.store import CompactionSettings as CompactionSettings
    from ._settings.store import CredentialsSettings as CredentialsSettings
    from ._settings.store import ProviderRetrySettings as ProviderRetrySettings
    from ._settings.store import RetrySettings as RetrySettings
    from ._settings.store import Settings as Settings
    from ._settings.store import SettingsLayer as SettingsLayer
    from ._settings.store import SettingsStore as SettingsStore
    from ._settings.store import default_settings_paths as default_settings_paths
    from ._settings.store import persist_setting as persist_setting
    from ._settings.store import settings_with as settings_with
    from ._settings.values import SERVICE_SETTINGS as SERVICE_SETTINGS
    from ._settings.values import HttpSettings as HttpSettings
    from ._settings.values import RateLimits as RateLimits
    from ._settings.values import RateLimitSettings as RateLimitSettings
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
    "ImageContent": "._core.messages",
    "CustomMessage": "._core.messages",
    "Cost": "._core.messages",
    "CompactionSummaryMessage": "._core.messages",
    "BranchSummaryMessage": "._core.messages",
    "BashExecutionMessage": "._core.messages",
    "Agent": "._agent.loop",
    "Tool": "._agent.tools",
    "DelayPlan": "._retry.backoff",
    "exponential_delay_ms": "._retry.backoff",
    "plan_delay": "._retry.backoff",
    "BashResult": "._session.bash_run",
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
    "event_from_json": "._core.codec",
    "RateLimitWaitEnd": "._core.events",
    "RateLimitWaitStart": "._core.events",
    "RateLimitSettings": "._settings.values",
    "RateLimits": "._settings.values",
    "event_to_json": "._core.codec",
    "message_from_json": "._core.codec",
    "message_to_json": "._core.codec",
    "model_to_json": "._core.codec",
    "Ask": "._agent.compactors",
    "Compaction": "._agent.compactors",
    "Compactor": "._agent.compactors",
    "DropOldestCompactor": "._agent.compactors",
    "SummarizingCompactor": "._agent.compactors",
    "AuthenticationError": "._core.errors",
    "CodecError": "._core.errors",
    "CompactionError": "._core.errors",
    "ContextOverflowError": "._core.errors",
    "EventStreamLagged": "._core.errors",
    "HistoryError": "._core.errors",
    "OverloadedError": "._core.errors",
    "ProviderConnectionError": "._core.errors",
    "ProviderError": "._core.errors",
    "RateLimitError": "._core.errors",
    "ServerError": "._core.errors",
    "SessionBusyError": "._core.errors",
    "SessionClosedError": "._core.errors",
    "SettingsError": "._core.errors",
    "TrioSessionError": "._core.errors",
    "AgentEnd": "._core.events",
    "AgentSettled": "._core.events",
    "AgentStart": "._core.events",
    "AutoCompactionEnd": "._core.events",
    "AutoCompactionStart": "._core.events",
    "AutoRetryEnd": "._core.events",
    "AutoRetryStart": "._core.events",
    "CompactionEnd": "._core.events",
    "CompactionResult": "._core.events",
    "CompactionStart": "._core.events",
    "EntryAppended": "._core.events",
    "ExtensionError": "._core.events",
    "HistoryWriteFailed": "._core.events",
    "MessageEnd": "._core.events",
    "MessageStart": "._core.events",
    "MessageUpdate": "._core.events",
    "ModelFallback": "._core.events",
    "QueueUpdate": "._core.events",
    "SessionEvent": "._core.events",
    "SessionInfoChanged": "._core.events",
    "SummarizationRetryAttemptStart": "._core.events",
    "SummarizationRetryFinished": "._core.events",
    "SummarizationRetryScheduled": "._core.events",
    "ThinkingLevelChanged": "._core.events",
    "ToolExecutionEnd": "._core.events",
    "ToolExecutionStart": "._core.events",
    "ToolExecutionUpdate": "._core.events",
    "ToolOutput": "._core.events",
    "TurnEnd": "._core.events",
    "TurnStart": "._core.events",
    "Extension": "._session.extensions",
    "ProviderFailure": "._core.failure",
    "ExtensionAPI": "._session.extensions",
    "ExtensionLoadError": "._session.extensions",
    "load_entry_point_extensions": "._session.extensions",
    "load_extension_file": "._session.extensions",
    "AssistantMessage": "._core.messages",
    "Message": "._core.messages",
    "TextContent": "._core.messages",
    "ToolCall": "._core.messages",
    "ToolResultMessage": "._core.messages",
    "Usage": "._core.messages",
    "UserMessage": "._core.messages",
    "AgentSession": "._session.facade",
    "EventStream": "._session.hub",
    "open_session": "._session.opening",
    "CompactionSettings": "._settings.store",
    "CredentialsSettings": "._settings.store",
    "HttpSettings": "._settings.values",
    "ProviderRetrySettings": "._settings.store",
    "RetrySettings": "._settings.store",
    "SERVICE_SETTINGS": "._settings.values",
    "Settings": "._settings.store",
    "SettingsLayer": "._settings.store",
    "SettingsStore": "._settings.store",
    "default_settings_paths": "._settings.store",
    "persist_setting": "._settings.store",
    "settings_with": "._settings.store",
    "ContextUsage": "._core.stats",
    "SessionStats": "._core.stats",
    "TokenTotals": "._core.stats",
    "ReplyItems": "._session.stream",
    "ReplyRestart": "._session.stream",
    "ReplyStream": "._session.stream",
    "ToolArgumentError": "._agent.tools",
    "ToolError": "._core.errors",
    "coding_tools": "._coding_tools",
    "tool": "._agent.tools",
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
    "settings_with",
    "tool",
]
