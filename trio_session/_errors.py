"""The exception tree of trio_session.

Errors from model providers are not exceptions: they end the stream as an
assistant message with ``stopReason: "error"`` (see ``_messages``). Exceptions
are for misuse and bad input::

    TrioSessionError
    ├── SessionBusyError        prompt() while another prompt runs (R-36)
    ├── SessionClosedError      using a session after its ``open_session`` block
    ├── SettingsError           a bad settings value or file, naming file and key (R-38)
    ├── CodecError              JSON that does not decode into a message or event
    ├── EventStreamLagged       an event-stream subscriber fell behind and was dropped
    ├── CompactionError         a manual compaction that could not be done
    ├── ExtensionLoadError      an extension file or entry point could not be loaded
    ├── HistoryError            a session file that cannot be read or written
    ├── CredentialStoreError    a credential store file that cannot be used
    ├── FauxScriptError         a faux-provider script (JSON) that is not valid
    └── RpcError                the RPC client's errors
        ├── RpcCommandError     the server answered success: false
        └── RpcConnectionError  the server process is gone
"""

from __future__ import annotations


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
