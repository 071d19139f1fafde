"""What a session logs, and the observer that turns its events into log records and spans.

Every session gets a ``SessionObserver`` when it is made: an internal subscriber
to its own events (the same ones ``subscribe`` delivers), so the records follow
the events exactly and cost one level check each when logging is off. Records go
to child loggers of ``trio_session``:

==========================  ========  ===============================================
logger                      level     when
==========================  ========  ===============================================
``trio_session.provider``   INFO      a request failed (``stopReason: "error"``): one
                                      record per failed attempt, retried or not
``trio_session.provider``   WARNING   the prompt ended in that failure, with no retry
                                      chain or compaction after it (a fatal error, or
                                      retries off): the give-up
``trio_session.retry``      INFO      ``auto_retry_start``: "retry 1/3 in 2000 ms after: …"
``trio_session.retry``      INFO      ``auto_retry_end`` that succeeded, or was cancelled
                                      (``abort_retry()``, ``abort()``, a caller gone)
``trio_session.retry``      WARNING   ``auto_retry_end`` that failed otherwise: the
                                      give-up (over the maximum, a fatal re-attempt)
``trio_session.compaction`` INFO      ``compaction_start``; a ``compaction_end`` that
                                      compacted, found nothing to do, or was aborted
``trio_session.compaction`` WARNING   a ``compaction_end`` that failed
``trio_session.credentials`` INFO     a usage limit moved the session to another key
``trio_session.credentials`` WARNING  a usage limit, and no other key was free
==========================  ========  ===============================================

So a WARNING means something was lost: a prompt gave up, a compaction failed, or no
credential is left. A cancellation is never one, nor is a failure that a retry then
made good; a prompt that gives up makes exactly one WARNING.

Every record is one line: the ``ScrubFilter`` escapes line breaks in the message
(a line break becomes a backslash and an ``n``), so a provider error that quotes a
header on a line of its own (``retry-after: 1``) cannot split a record in a
line-based pipeline. The facts are ``extra`` fields, with the raw text.

Nothing is printed unless the application configures logging: each of these
loggers has a ``NullHandler`` (as the logging HOWTO advises for libraries), so
Python's last-resort handler never writes them to stderr; records still propagate
to the application's handlers.

Each record carries these ``extra`` fields (attributes of the ``LogRecord``):

- all: ``session_id``, ``provider``, ``model``;
- retry start: ``attempt``, ``max_attempts``, ``delay_ms``, ``error``, ``status``
  (the HTTP status the error starts with, or ``None``), ``error_class`` (the
  ``ProviderError`` subclass it maps to, by name);
- retry end: ``attempt``, ``success``, ``cancelled``, ``final_error`` (``None`` on
  success);
- compaction: ``reason``; at the end also ``aborted``, ``will_retry``,
  ``tokens_before``, ``tokens_after`` (``None`` without a result), ``error``;
- credentials: ``rotated``, ``retry_after_ms`` (the hint parsed from the error, or
  ``None``);
- provider failure and give-up: ``stop_reason``, ``error``, ``classification``
  (``"retryable"``, ``"overflow"`` or ``"fatal"``, as the session's classifier says),
  ``status``, ``error_class``.

Never a secret: the API keys a session has used (and its provider's own) are
replaced by ``redact(key)`` in every record of the ``trio_session`` loggers — the
message, its arguments, string extras and a formatted traceback (whose exception
object is then dropped from the record) — whoever logged it, for instance a
provider error that echoes the key. A ``logging.Filter`` does it, so it runs only
for records that are actually made. Keys shorter than ``MIN_SECRET_LENGTH`` (4)
are left alone.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._core.classes import define
from .._core.events import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    SessionEvent,
)
from .._core.messages import AssistantMessage
from .._retry.chain import CANCELLED
from .._retry.classify import Classifier, error_status, provider_error
from .tracing import (
    TRACED_EVENTS,
    ObservedSession,
    SessionTracer,
    classify_for,
    describe_session,
    scrub_secrets,
    session_tracer,
    tracing_wanted,
)

logger = logging.getLogger("trio_session")
retry_logger = logging.getLogger("trio_session.retry")
compaction_logger = logging.getLogger("trio_session.compaction")
credentials_logger = logging.getLogger("trio_session.credentials")
provider_logger = logging.getLogger("trio_session.provider")

#: Loggers whose records are scrubbed of API keys (a filter runs per logger, so each
#: child needs its own: a parent's filters do not see what its children propagate).
SCRUBBED_LOGGERS = (
    "trio_session",
    "trio_session.retry",
    "trio_session.compaction",
    "trio_session.credentials",
    "trio_session.provider",
    "trio_session.rpc",
)

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

#: Keys shorter than this are not scrubbed (they would garble every record).
MIN_SECRET_LENGTH = 4

_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}

#: Every key a live session has used or was configured with, and how many live
#: observers know it. Kept up to date as keys are seen and observers freed, so a
#: record costs the same with one session or with 10 000 of them.
_known: dict[str, int] = {}


def _release(secrets: set[str]) -> None:
    """An observer was freed: forget the keys no other live observer knows."""
    for secret in secrets:
        left = _known.get(secret, 0) - 1
        if left > 0:
            _known[secret] = left
        else:
            _known.pop(secret, None)


def known_secrets() -> set[str]:
    """Every key a live session has used or was configured with."""
    return set(_known)


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known key replaced by its ``redact`` form."""
    return scrub_secrets(text, known_secrets() if secrets is None else secrets)


def one_line(text: str) -> str:
    """``text`` on one line: each line break becomes a backslash and an ``n`` (a lone
    carriage return, a backslash and an ``r``)."""
    if "\n" not in text and "\r" not in text:
        return text
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


class ScrubFilter(logging.Filter):
    """Makes a record's message one line and replaces API keys in it, before any handler
    sees it (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "\n" in message or "\r" in message:
            message = one_line(message)
            record.msg, record.args = message, None
        secrets = known_secrets()
        if not secrets:
            return True
        if any(s in message for s in secrets):
            record.msg, record.args = scrub(message, secrets), None
        for name, value in tuple(vars(record).items()):
            stray = isinstance(value, str) and any(s in value for s in secrets)
            if stray and name not in _STANDARD_ATTRIBUTES:
                setattr(record, name, scrub(value, secrets))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and any(s in record.exc_text for s in secrets):
            # Formatters print exc_text as it is; the exception itself still holds the
            # key, so a handler that reads exc_info (to report it elsewhere) gets none.
            record.exc_text = scrub(record.exc_text, secrets)
            record.exc_info = None
        if record.stack_info and any(s in record.stack_info for s in secrets):
            record.stack_info = scrub(record.stack_info, secrets)
        return True


_filter = ScrubFilter()
for _name in SCRUBBED_LOGGERS:
    logging.getLogger(_name).addFilter(_filter)
# An application that configured no logging sees none of these records: without a
# handler of their own, Python's last-resort handler would print every WARNING on
# stderr — through a terminal UI's screen, or an RPC client's error stream.
for _child in (retry_logger, compaction_logger, credentials_logger, provider_logger):
    _child.addHandler(logging.NullHandler())

#: A session's keys before it has seen one (most sessions never do): shared, immutable.
_NO_KEYS: frozenset[str] = frozenset()


@define(eq=False, weakref_slot=True)
class SessionObserver:
    """One session's logs and spans, fed its events. Made by ``install``.

    It holds the session weakly (a closed session is still freed by reference
    counting) and reads its id, provider and model when a record is made.
    """

    _session: weakref.ref[ObservedSession]
    _tracer_provider: TracerProvider | None = None  # where spans go; the global one if None
    _classifier: Classifier | None = None  # the session's own, if it was given one
    #: The session's spans: made when something first records them (``_tracing``).
    _tracer: SessionTracer | None = None
    #: The keys this session has seen: a shared empty set until the first one.
    secrets: AbstractSet[str] = _NO_KEYS
    #: The running prompt's span, when tracing is installed.
    _span: AbstractContextManager[None] | None = None
    #: The running prompt's last failed reply that no retry or compaction took up yet.
    _unanswered: AssistantMessage | None = None

    @classmethod
    def install(
        cls,
        session: ObservedSession,
        tracer_provider: TracerProvider | None = None,
        *,
        provider_secrets: Iterable[str] = (),
        classifier: Classifier | None = None,
    ) -> SessionObserver:
        """A new observer of ``session``, which calls its ``on_event`` before any
        subscriber (a direct call: no bound method kept in a subscriber list).

        Args:
            session: the session observed (held weakly).
            tracer_provider: where its spans go; the global one if ``None``.
            provider_secrets: the provider's own secrets (its API key, if it has one), as
                its ``secrets()`` gives them; never shown.
            classifier: the session's own classifier, if it was given one.
        """
        observer = cls(weakref.ref(session), tracer_provider, classifier)
        for secret in provider_secrets:
            observer.saw_key(secret)
        return observer

    def _tracing(self) -> SessionTracer | None:
        """The session's tracer, made the first time a prompt or a traced event finds a
        tracer provider installed (given, or global); ``None`` until then. Most
        sessions never record a span: they never hold a tracer either."""
        tracer = self._tracer
        if tracer is None and tracing_wanted(self._tracer_provider):
            # It shares the observer's weak reference and key set, not the observer:
            # holding the observer that holds it would be a cycle only a full
            # collection frees.
            tracer = self._tracer = session_tracer(
                self._tracer_provider,
                session=self._session,
                secrets=self.secrets,
                classifier=self._classifier,
            )
        return tracer

    def saw_key(self, key: str | None) -> None:
        """Remember a key the session used, so no record or span shows it."""
        if key is None or len(key) < MIN_SECRET_LENGTH or key in self.secrets:
            return
        secrets = self.secrets
        if not isinstance(secrets, set):  # the first key: release them all when freed
            secrets = self.secrets = set()
            weakref.finalize(self, _release, secrets)
            if self._tracer is not None:
                self._tracer.use_secrets(secrets)
        secrets.add(key)
        _known[key] = _known.get(key, 0) + 1

    def prompt(self) -> SessionObserver:
        """Around a ``prompt()`` body: its span, when tracing is installed, and at its end
        the give-up record, when it ended in a failure nothing took up.

        Returns this observer, entered and left as a context manager (a prompt at a
        time: the session refuses a second one).
        """
        tracer = self._tracing()
        self._span = tracer.prompt() if tracer is not None else None
        self._unanswered = None
        return self

    def __enter__(self) -> None:
        if self._span is not None:
            self._span.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        failed, self._unanswered = self._unanswered, None
        if failed is not None and exc is None:
            self._gave_up(failed)
        span, self._span = self._span, None
        return None if span is None else span.__exit__(exc_type, exc, traceback)

    def prompt_aborted(self) -> None:
        """The running prompt was aborted without a ``Cancelled`` reaching its span (it
        ended its retry chain): the span still ends as cancelled, and an abort is no
        give-up."""
        self._unanswered = None
        if self._tracer is not None:
            self._tracer.prompt_aborted()

    # -- events ----------------------------------------------------------------------

    def on_event(self, event: SessionEvent) -> None:
        """The session's subscriber: spans first, then the record, if any."""
        kind = type(event)
        if kind in TRACED_EVENTS:  # not every stream update
            tracer = self._tracer if self._tracer is not None else self._tracing()
            if tracer is not None:
                tracer.on_event(event)
        record = _RECORDS.get(kind)  # one look-up, not a chain of isinstance()
        if record is not None:
            record(self, event)

    def _message_end(self, event: MessageEnd) -> None:
        message = event.message
        if isinstance(message, AssistantMessage) and message.stop_reason == "error":
            self._unanswered = message  # a give-up, unless a retry or compaction follows
            self._provider_failure(message)

    def _retry_start(self, event: AutoRetryStart) -> None:
        self._unanswered = None  # the chain takes it up, and logs how it ends
        if not _heard(retry_logger, logging.INFO):
            return
        error = self._scrub(event.error_message)
        retry_logger.info(
            "retry %d/%d in %d ms after: %s",
            event.attempt,
            event.max_attempts,
            event.delay_ms,
            error,
            extra=self._extra(
                attempt=event.attempt,
                max_attempts=event.max_attempts,
                delay_ms=event.delay_ms,
                error=error,
                **_error_fields(event.error_message),
            ),
        )

    def _retry_end(self, event: AutoRetryEnd) -> None:
        self._unanswered = None  # the chain's end is the record of how it ended
        cancelled = not event.success and event.final_error == CANCELLED
        level = logging.WARNING if not event.success and not cancelled else logging.INFO
        if not _heard(retry_logger, level):
            return
        extra = self._extra(
            attempt=event.attempt,
            success=event.success,
            cancelled=cancelled,
            final_error=None if event.final_error is None else self._scrub(event.final_error),
        )
        if event.success:
            retry_logger.info("retry succeeded on attempt %d", event.attempt, extra=extra)
        elif cancelled:
            retry_logger.info("retry cancelled after %d attempt(s)", event.attempt, extra=extra)
        else:
            retry_logger.warning(
                "retry failed after %d attempt(s): %s",
                event.attempt,
                extra["final_error"],
                extra=extra,
            )

    def _provider_failure(self, message: AssistantMessage) -> None:
        if not _heard(provider_logger, logging.INFO):
            return
        provider_logger.info(
            "provider request failed (%s): %s",
            *self._failure_fields(message),
            extra=self._failure_extra(message),
        )

    def _gave_up(self, message: AssistantMessage) -> None:
        """The prompt ended in ``message``'s failure, and no retry chain took it up."""
        if not _heard(provider_logger, logging.WARNING):
            return
        provider_logger.warning(
            "prompt failed (%s): %s",
            *self._failure_fields(message),
            extra=self._failure_extra(message),
        )

    def _failure_fields(self, message: AssistantMessage) -> tuple[str, str]:
        return self._classify(message), self._scrub(message.error_message or "")

    def _failure_extra(self, message: AssistantMessage) -> dict[str, Any]:
        classification, error = self._failure_fields(message)
        return self._extra(
            stop_reason=message.stop_reason,
            error=error,
            classification=classification,
            **_error_fields(message.error_message or "", message),
        )

    def _compaction_start(self, event: CompactionStart) -> None:
        if _heard(compaction_logger, logging.INFO):
            compaction_logger.info(
                "compaction started (%s)", event.reason, extra=self._extra(reason=event.reason)
            )

    def _compaction_end(self, event: CompactionEnd) -> None:
        if event.will_retry or event.error_message is not None:
            self._unanswered = None  # a re-attempt follows, or this record is the give-up
        failed = not event.aborted and event.error_message is not None
        level = logging.WARNING if failed else logging.INFO
        if not _heard(compaction_logger, level):
            return
        result = event.result
        error = None if event.error_message is None else self._scrub(event.error_message)
        extra = self._extra(
            reason=event.reason,
            aborted=event.aborted,
            will_retry=event.will_retry,
            tokens_before=None if result is None else result.tokens_before,
            tokens_after=None if result is None else result.tokens_after,
            error=error,
        )
        if event.aborted:
            compaction_logger.info("compaction aborted (%s)", event.reason, extra=extra)
        elif error is not None:
            compaction_logger.warning(
                "compaction failed (%s): %s", event.reason, error, extra=extra
            )
        elif result is None:
            compaction_logger.info(
                "compaction found nothing to compact (%s)", event.reason, extra=extra
            )
        else:
            compaction_logger.info(
                "compaction done (%s): %d → %d tokens",
                event.reason,
                result.tokens_before,
                result.tokens_after,
                extra=extra,
            )

    def credential_rotated(self, *, rotated: bool, retry_after_ms: int | None) -> None:
        """Log what the credential store did with a usage limit (R-17)."""
        level = logging.INFO if rotated else logging.WARNING
        if not _heard(credentials_logger, level):
            return
        extra = self._extra(rotated=rotated, retry_after_ms=retry_after_ms)
        if rotated:
            credentials_logger.info(
                "usage limit: switched %s to another credential", extra["provider"], extra=extra
            )
        else:
            credentials_logger.warning(
                "usage limit: no other %s credential is free", extra["provider"], extra=extra
            )

    # -- what records say ---------------------------------------------------------------

    def _describe(self) -> tuple[str, str, str]:
        return describe_session(self._session)

    def _extra(self, **fields: Any) -> dict[str, Any]:
        session_id, provider, model = self._describe()
        return {"session_id": session_id, "provider": provider, "model": model, **fields}

    def _classify(self, message: AssistantMessage) -> str:
        return classify_for(self._session, message, self._classifier)

    def _scrub(self, text: str) -> str:
        return scrub_secrets(text, self.secrets) if self.secrets else text


def _error_fields(text: str, message: AssistantMessage | None = None) -> dict[str, Any]:
    """``status`` and ``error_class`` of an error text (the ``ProviderError`` it maps to)."""
    if message is None:
        message = AssistantMessage(content=[], stop_reason="error", error_message=text)
    return {"status": error_status(text), "error_class": type(provider_error(message)).__name__}


#: The events a record may come from, and the observer's method for each.
_RECORDS: dict[type[Any], Callable[[SessionObserver, Any], None]] = {
    AutoRetryStart: SessionObserver._retry_start,
    AutoRetryEnd: SessionObserver._retry_end,
    MessageEnd: SessionObserver._message_end,
    CompactionStart: SessionObserver._compaction_start,
    CompactionEnd: SessionObserver._compaction_end,
}


def _heard(logger: logging.Logger, level: int) -> bool:
    """Whether a record at ``level`` would reach a handler that does something.

    ``isEnabledFor``, and then a handler that is not a ``NullHandler`` on the way up
    (as ``Logger.callHandlers`` walks it), or a filter the application put on the
    logger itself. The records of an application that configured no logging are then
    not made at all: making one costs more than a whole cancellation.
    """
    if not logger.isEnabledFor(level):
        return False
    if any(f is not _filter for f in logger.filters):
        return True
    found = 0
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            found += 1
            if level >= handler.level and not isinstance(handler, logging.NullHandler):
                return True
        current = current.parent if current.propagate else None
    last = logging.lastResort
    return found == 0 and last is not None and level >= last.level
