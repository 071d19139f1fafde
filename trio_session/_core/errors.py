"""The exception tree of trio_session.

Errors from model providers are values first: they end the stream as an
assistant message with ``stopReason: "error"`` (see ``_messages``), which the
retry policy reads. They become exceptions when asked —
``reply.raise_for_error()``, or ``session.prompt(..., raise_on_error=True)`` —
as a ``ProviderError`` of the class the error text says (R-52: classification
reads the text). The other exceptions are for misuse and bad input:

```text
TrioSessionError
├── ProviderError           a model request failed (status, provider, model, retry hint)
│   ├── RateLimitError      429, rate or usage limits
│   ├── AuthenticationError 401/403, a bad or missing key
│   ├── ContextOverflowError  the prompt does not fit the model's window
│   ├── ProviderConnectionError  no connection, a timeout, a dropped stream
│   └── ServerError         5xx
│       └── OverloadedError 503/529, "overloaded"
├── SessionBusyError        prompt() while another prompt runs (R-36)
├── SessionClosedError      using a session after its open_session block
├── SettingsError           a bad settings value or file, naming file and key (R-38)
├── CodecError              JSON that does not decode into a message or event
├── EventStreamLagged       an event-stream subscriber fell behind and was dropped
├── CompactionError         a manual compaction that could not be done
├── ExtensionLoadError      an extension file or entry point could not be loaded
├── HistoryError            a session file that cannot be read or written
├── CredentialStoreError    a credential store file that cannot be used
├── FauxScriptError         a faux-provider script (JSON) that is not valid
├── ToolError               a tool's failure, its message the result the model reads
└── RpcError                the RPC client's errors
    ├── RpcCommandError     the server answered success: false
    └── RpcConnectionError  the server process is gone
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


class TrioSessionError(Exception):
    """Base class of every error trio_session raises on purpose."""


class SessionBusyError(TrioSessionError):
    """``prompt()`` was called while another prompt is still running (R-36)."""


class SessionClosedError(TrioSessionError):
    """The session's ``open_session()`` block has exited."""


class SettingsError(TrioSessionError, ValueError):
    """A settings value or file is invalid.

    Attributes:
        key: the dotted settings key (``"retry.maxRetries"``), if one is at fault.
        source: the file the value came from, or ``"<programmatic>"``.

    Args:
        message: what is wrong, naming the key and where it came from.
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        super().__init__(message)
        self.key = key
        self.source = source


class CodecError(TrioSessionError, ValueError):
    """JSON data is not a valid message or event; the message names the bad path."""


class CompactionError(TrioSessionError):
    """``AgentSession.compact`` could not compact: nothing to compact, cancelled, or failed.

    The message is the reference's (``"Nothing to compact (session too small)"``,
    ``"Compaction cancelled"``); the context is unchanged.
    """


class EventStreamLagged(TrioSessionError):
    """An ``AgentSession.events`` subscriber did not keep up and was disconnected.

    Event delivery never waits for a subscriber; instead, a subscriber whose buffer
    fills up is dropped and sees this error after the events it did receive.
    """


class HistoryError(TrioSessionError):
    """A session file cannot be created, read or written; the message names the file.

    Attributes:
        path: the session file.

    Args:
        message: what went wrong, naming the file.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ProviderError(TrioSessionError):
    """A request to the model failed; raised by ``AssistantMessage.raise_for_error``.

    Attributes:
        status: the HTTP status the error text starts with (``503``), if any.
        provider: the provider's name (``"openai"``).
        model: the model id.
        retry_after_ms: the wait the server asked for (R-18), if it said.
        retryable: whether the retry policy retries it (the reference's rules, R-5).
        reply: the failed ``AssistantMessage`` itself.

    Args:
        message: the error text.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str = "",
        model: str = "",
        retry_after_ms: int | None = None,
        retryable: bool = False,
        reply: object = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.provider = provider
        self.model = model
        self.retry_after_ms = retry_after_ms
        self.retryable = retryable
        self.reply = reply


class RateLimitError(ProviderError):
    """429, a rate limit or a usage limit: wait (``retry_after_ms``) or rotate keys."""


class AuthenticationError(ProviderError):
    """401/403: the key is missing, wrong, or not allowed this model. Waiting won't help."""


class ContextOverflowError(ProviderError):
    """The conversation does not fit the model's context window: compact it (R-50)."""


class ProviderConnectionError(ProviderError):
    """No answer: the connection failed, timed out, or dropped mid-stream."""


class ServerError(ProviderError):
    """A 5xx answer: the provider failed on its side."""


class OverloadedError(ServerError):
    """503/529 or "overloaded": the provider is busy; retried with backoff (R-5)."""


class ToolError(TrioSessionError):
    """A tool's failure, told to the model in the tool's own words.

    Any exception a tool raises becomes an error result; most are shown with their
    type (``ValueError: ...``). A ``ToolError``'s message is the result text as it
    is, for a tool that writes its errors for the model to read (the coding tools:
    ``Could not find the exact text in app.py. ...``).
    """
