"""OpenTelemetry spans for a session's prompts, attempts, backoff sleeps and compactions.

Optional: install ``trio-session[otel]`` (``opentelemetry-api``). It is imported once,
when a span is first wanted; without it ``AVAILABLE`` is false, ``session_tracer``
returns ``None`` and a session runs no span code at all. A program that never imported
OpenTelemetry itself (nor names a provider in ``OTEL_PYTHON_TRACER_PROVIDER``) cannot have
installed a tracer provider: its prompts make no span, and do not import it either.

The spans, and how they nest:

```text
trio_session.prompt                 one prompt(), from its start to its return
├── trio_session.attempt            one model request (turn_start → its message_end)
├── trio_session.backoff            one retry sleep (auto_retry_start → the re-attempt)
├── trio_session.attempt            the re-attempt
└── trio_session.compaction         compaction_start → compaction_end
```

Parents are given explicitly, never taken from the current context: a retry chain
is a task of the prompt's nursery, and Trio gives each new task a *copy* of the
context of the task that spawned it, taken at ``start_soon`` time — so what is
"current" in a chain depends on when it was spawned, not on the span tree. The
session's events drive every span but the prompt's (they are delivered
synchronously, in order, from whichever task runs the step), and each child names
the prompt span as its parent. The prompt span is made current inside ``prompt()``,
so spans an application opens in its tools, or an HTTP instrumentation opens
underneath, nest under it.

Times are Trio's clock, anchored to the wall clock once per session: spans measure
what the session measured (on a test's ``autojump_clock`` a 2 s backoff is exactly
2 000 000 000 ns long) and are monotonic within a session.

A cancelled step is not an error: its span ends with status ``UNSET``,
``trio_session.cancelled = true`` and ``trio_session.cancelled_by`` saying who cancelled:

- ``"abort"``: ``session.abort()`` (or ``abort`` over RPC);
- ``"caller"``: a cancel from outside the prompt — the caller's timeout or cancelled
  scope, a ``stream()`` block left early;
- ``"abort_retry"``: ``session.abort_retry()`` ended the retry chain (in its backoff
  sleep, or its re-attempt's request).

An attempt cut short ends with ``stop_reason`` ``aborted``, a backoff cut short with
``trio_session.retry.cancelled = true``. Who cancelled is known only when the prompt
ends (a caller's ``Cancelled`` reaches the prompt after the chain has ended), so a
span cut by a cancel is ended then, at the time it was cut. A prompt ended by
``abort()`` or by its caller reports ``trio_session.stop_reason = "aborted"`` even when
its last message is the error it was waiting to retry: pi 1.6.0 settles such a run with
``agent_settled {aborted: true}`` and leaves that message as it is, as we do (R-54). A
real failure — an error reply, an exception — keeps status ``ERROR`` and its ``error.type``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from .._core.classes import define
from .._core.events import (
    AgentEnd,
    AgentStart,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    SessionEvent,
    TurnStart,
)
from .._core.messages import AssistantMessage
from .._retry.chain import CANCELLED
from .._retry.classify import Classifier
from .._retry.policy import RetryPolicy
from .._settings.values import Settings
from ..providers._base import Model


class ObservedSession(Protocol):
    """What the observer reads of its session (``AgentSession``), declared here, below it."""

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    @property
    def model(self) -> Model:
        """The model the session asks."""
        ...

    @property
    def settings(self) -> Settings:
        """The effective settings."""
        ...


#: Whether OpenTelemetry can be imported. It is imported when a span is first wanted, not
#: with this module: a program that never opens a session, or has no use for spans, does
#: not pay for it.
AVAILABLE = importlib.util.find_spec("opentelemetry") is not None

#: The environment variable that names a tracer provider for OpenTelemetry's API to load.
_PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"


#: Whether OpenTelemetry failed to load the provider its environment variable names.
_unloadable = False


def _global_provider() -> TracerProvider:
    """OpenTelemetry's global tracer provider, or its no-op proxy when the one
    ``OTEL_PYTHON_TRACER_PROVIDER`` names cannot be loaded. OpenTelemetry raises then
    (``StopIteration`` for an unknown name), at every call, after logging why; a prompt
    must not fail for it, so after the first failure it is not asked again."""
    global _unloadable
    if not _unloadable:
        try:
            return _otel_trace.get_tracer_provider()
        except Exception:  # OpenTelemetry logged it, with its reason
            _unloadable = True
    return _otel_trace.ProxyTracerProvider()


@functools.cache
def _provider_named_in_environment() -> bool:
    """Whether ``OTEL_PYTHON_TRACER_PROVIDER`` is set: read once per process, when the
    first prompt asks. A variable set before the first prompt is seen; one set later is
    not. (Looking it up in ``os.environ`` at every prompt cost about 0.6 µs: a miss
    raises and catches a ``KeyError`` inside the mapping.)"""
    return _PROVIDER_VARIABLE in os.environ


if TYPE_CHECKING:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider


#: The instrumentation scope name of every span.
TRACER_NAME = "trio_session"

PROMPT_SPAN = "trio_session.prompt"
ATTEMPT_SPAN = "trio_session.attempt"
BACKOFF_SPAN = "trio_session.backoff"
COMPACTION_SPAN = "trio_session.compaction"

#: Who cancelled a step (``trio_session.cancelled_by``); see the module docstring.
BY_ABORT = "abort"
BY_CALLER = "caller"
BY_ABORT_RETRY = "abort_retry"


@functools.cache
def _version() -> str:
    try:
        from importlib.metadata import version

        return version("trio-session")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


@define(eq=False)
class SessionTracer:
    """The spans of one session. Made by ``session_tracer``; fed the session's events.

    One small object per session: the OpenTelemetry tracer is looked up when a prompt
    starts (and kept only while that prompt is recorded), and the prompt span's
    context manager is the tracer itself (prompts of one session never overlap), so a
    session waiting in its backoff holds no tracer, generator or callable of its own.

    Args:
        session: the session, weakly (read for its id, provider, model and classifier).
        secrets: the session's API keys, removed from every text a span carries.
        tracer_provider: where spans go; the global one if ``None``.
    """

    _session: weakref.ref[ObservedSession]
    _secrets: AbstractSet[str]
    _tracer_provider: TracerProvider | None = None
    _classifier: Classifier | None = None  # the session's own, if it was given one
    _tracer: Tracer | None = attrs.field(default=None, init=False)  # in a recorded prompt
    _wall_ns: int | None = attrs.field(default=None, init=False)  # the clock's anchor
    _trio_s: float = attrs.field(default=0.0, init=False)
    _prompt: Span | None = attrs.field(default=None, init=False)
    _prompt_ctx: Context | None = attrs.field(default=None, init=False)
    _token: object | None = attrs.field(default=None, init=False)  # the attached context
    _attempt: Span | None = attrs.field(default=None, init=False)
    _backoff: Span | None = attrs.field(default=None, init=False)
    _compaction: Span | None = attrs.field(default=None, init=False)
    _requests: int = attrs.field(default=0, init=False)
    _retry_attempt: int = attrs.field(default=0, init=False)
    _retries: int = attrs.field(default=0, init=False)
    _last: AssistantMessage | None = attrs.field(default=None, init=False)
    _aborted: bool = attrs.field(default=False, init=False)  # abort() ended the prompt
    _retry_cancelled: bool = attrs.field(default=False, init=False)  # a chain ended cancelled
    # Spans cut by a cancel, with the time they were cut: ended when the prompt knows who.
    _held: list[tuple[Span, int]] = attrs.field(factory=list, init=False)
    _recording: bool = attrs.field(default=True, init=False)  # False in an unrecorded prompt

    def use_secrets(self, secrets: AbstractSet[str]) -> None:
        """From now on remove ``secrets`` (the observer's set, once it has a key)."""
        self._secrets = secrets

    def _now_ns(self) -> int:
        """Trio's clock in epoch nanoseconds, anchored once (see the module docstring)."""
        try:
            now = trio.current_time()
        except RuntimeError:  # pragma: no cover - events always come from a Trio task
            return time.time_ns()
        if self._wall_ns is None:
            self._wall_ns, self._trio_s = time.time_ns(), now
        return self._wall_ns + round((now - self._trio_s) * 1e9)

    def _nothing_installed(self) -> bool:
        """Whether every tracer asked now would be the API's no-op (``tracing_wanted``)."""
        return not tracing_wanted(self._tracer_provider)

    def _lookup(self) -> Tracer:
        """The OpenTelemetry tracer of the provider in force now (see ``tracer_of``)."""
        _import_opentelemetry()  # a span outside a prompt may be the first one wanted
        provider = self._tracer_provider
        return tracer_of(provider if provider is not None else _global_provider())

    def _describe(self) -> tuple[str, str, str]:
        return describe_session(self._session)

    def _classify(self, message: AssistantMessage) -> str:
        return classify_for(self._session, message, self._classifier)

    def _scrub(self, text: str) -> str:
        return scrub_secrets(text, self._secrets) if self._secrets else text

    # -- the prompt span ---------------------------------------------------------------

    def prompt(self) -> AbstractContextManager[None]:
        """The ``trio_session.prompt`` span around a ``prompt()`` body, current inside it.

        Returns this tracer, whose ``__exit__`` ends the span.

        With only OpenTelemetry's API (no provider installed, globally or given), there
        is no span to make: the API's would record nothing and leave the current span
        as it is, so the prompt runs no span code at all.
        """
        if self._nothing_installed():
            self._recording = False
            return self
        session_id, provider, model = self._describe()
        tracer = self._lookup()
        span = tracer.start_span(
            PROMPT_SPAN,
            context=_otel_context.get_current(),
            kind=_otel_trace.SpanKind.INTERNAL,
            attributes={
                "trio_session.session_id": session_id,
                "gen_ai.system": provider,
                "gen_ai.request.model": model,
            },
            start_time=self._now_ns(),
        )
        self._prompt = span
        if not span.is_recording():
            # Nothing records this prompt (OpenTelemetry's API without an SDK, or a
            # sampler that dropped it), so its children would not be recorded either:
            # none are made. A sampled-out span still carries its trace as the current
            # span, for whatever the prompt calls; the API's invalid span does not.
            self._recording = False
            if span.get_span_context().is_valid:
                self._token = _otel_context.attach(_otel_trace.set_span_in_context(span))
            return self
        self._tracer = tracer
        self._prompt_ctx = _otel_trace.set_span_in_context(span)
        self._requests = self._retries = self._retry_attempt = 0
        self._last = None
        self._aborted = self._retry_cancelled = False
        self._held.clear()
        self._token = _otel_context.attach(self._prompt_ctx)
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """The end of the prompt span (the exception, if any, goes on)."""
        span, token = self._prompt, self._token
        self._token = None
        if token is not None:
            _otel_context.detach(token)  # type: ignore[arg-type]
        if not self._recording:  # an unrecorded prompt, or no span made at all
            self._recording = True
            self._prompt = None
            if span is not None:
                span.end()
            return
        if span is None:  # pragma: no cover - a recorded prompt always has its span
            return
        cancelled = exc is not None and _is_cancellation(exc)
        failure = exc if exc is not None and not cancelled else None
        self._finish_prompt(span, by_caller=cancelled, failure=failure)

    def prompt_aborted(self) -> None:
        """``abort()`` ended the running prompt (its run, or its retry chain in the
        backoff sleep): the prompt span ends cancelled by ``"abort"``."""
        self._aborted = True

    def _canceller(self, *, by_caller: bool, failure: BaseException | None) -> str | None:
        """Who cancelled the prompt that is ending, or ``None`` (it was not cancelled,
        or it failed: an exception is an error, whatever cancel came with it)."""
        if self._aborted:
            return BY_ABORT
        if by_caller:
            return BY_CALLER
        if failure is None and self._retry_cancelled:
            return BY_ABORT_RETRY
        return None

    def _finish_prompt(self, span: Span, *, by_caller: bool, failure: BaseException | None) -> None:
        now = self._now_ns()
        # Children that did not see their end event (the prompt left by an exception).
        for child in (self._attempt, self._backoff, self._compaction):
            if child is not None:
                self._held.append((child, now))
        self._attempt = self._backoff = self._compaction = None
        who = self._canceller(by_caller=by_caller, failure=failure)
        for child, cut in self._held:
            _cancelled(child, who)
            child.end(end_time=cut)
        self._held.clear()
        span.set_attribute("trio_session.retry.attempts", self._retries)
        span.set_attribute("trio_session.requests", self._requests)
        last = self._last
        if who in (BY_ABORT, BY_CALLER):  # as pi 1.6.0's agent_settled {aborted: true}
            span.set_attribute("trio_session.stop_reason", "aborted")
        elif last is not None:
            span.set_attribute("trio_session.stop_reason", last.stop_reason)
        aborted_reply = failure is None and last is not None and last.stop_reason == "aborted"
        if who is not None or aborted_reply:
            _cancelled(span, who)
        elif failure is not None:
            _error(span, type(failure).__qualname__, self._scrub(str(failure)))
        elif last is not None and last.stop_reason == "error":
            _error(span, self._classify(last), self._scrub(last.error_message or ""))
        span.end(end_time=now)
        self._prompt = self._prompt_ctx = None
        self._tracer = None

    def _end_cut(self, span: Span) -> None:
        """End a span cut by a cancel: when the prompt ends (it then knows who cancelled),
        or now, outside a prompt (a manual compaction: nobody to ask)."""
        if self._prompt is None:
            _cancelled(span, None)
            span.end(end_time=self._now_ns())
        else:
            self._held.append((span, self._now_ns()))

    # -- child spans, from events ---------------------------------------------------------

    def on_event(self, event: SessionEvent) -> None:
        """Start or end the span an event marks."""
        if not self._recording:
            return
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _parent(self) -> Context:
        return self._prompt_ctx if self._prompt_ctx is not None else _otel_context.get_current()

    def _start(self, name: str, attributes: dict[str, Any]) -> Span:
        _, provider, model = self._describe()
        attributes = {"gen_ai.system": provider, "gen_ai.request.model": model, **attributes}
        tracer = self._tracer if self._tracer is not None else self._lookup()
        return tracer.start_span(
            name, context=self._parent(), attributes=attributes, start_time=self._now_ns()
        )

    def _on_turn_start(self, event: SessionEvent) -> None:
        self._end_attempt(None)
        self._requests += 1
        self._attempt = self._start(
            ATTEMPT_SPAN,
            {
                "trio_session.attempt": self._requests,
                "trio_session.retry.attempt": self._retry_attempt,
            },
        )

    def _on_message_end(self, event: SessionEvent) -> None:
        assert isinstance(event, MessageEnd)
        if isinstance(event.message, AssistantMessage):
            self._last = event.message
            self._end_attempt(event.message)

    def _end_attempt(self, message: AssistantMessage | None) -> None:
        span, self._attempt = self._attempt, None
        if span is None:
            return
        if message is None:  # the turn ended without an answer (cancelled before its request)
            self._end_cut(span)
            return
        usage = message.usage
        span.set_attributes(
            {
                "trio_session.stop_reason": message.stop_reason,
                "gen_ai.response.finish_reasons": (message.stop_reason,),
                "gen_ai.usage.input_tokens": usage.input,
                "gen_ai.usage.output_tokens": usage.output,
                "trio_session.usage.cache_read_tokens": usage.cache_read,
                "trio_session.usage.cache_write_tokens": usage.cache_write,
            }
        )
        if message.response_model:
            span.set_attribute("gen_ai.response.model", message.response_model)
        if message.stop_reason == "error":
            text = self._scrub(message.error_message or "")
            span.set_attribute("trio_session.error", text)
            _error(span, self._classify(message), text)
        elif message.stop_reason == "aborted":
            self._end_cut(span)
            return
        span.end(end_time=self._now_ns())

    def _on_agent_start(self, event: SessionEvent) -> None:
        self._end_backoff(cancelled=False)  # the re-attempt begins: the sleep is over

    def _on_agent_end(self, event: SessionEvent) -> None:
        self._end_attempt(None)  # only if its turn never got an answer

    def _on_retry_start(self, event: SessionEvent) -> None:
        assert isinstance(event, AutoRetryStart)
        self._end_backoff(cancelled=False)
        self._retry_attempt = event.attempt
        self._retries += 1
        self._backoff = self._start(
            BACKOFF_SPAN,
            {
                "trio_session.retry.attempt": event.attempt,
                "trio_session.retry.max_attempts": event.max_attempts,
                "trio_session.retry.delay_ms": event.delay_ms,
                "trio_session.retry.error": self._scrub(event.error_message),
            },
        )

    def _on_retry_end(self, event: SessionEvent) -> None:
        assert isinstance(event, AutoRetryEnd)
        # Still sleeping when the chain ended: abort_retry(), abort() or the caller cut it.
        self._end_backoff(cancelled=True)
        self._retry_attempt = 0
        if not event.success and event.final_error == CANCELLED:
            self._retry_cancelled = True

    def _end_backoff(self, *, cancelled: bool) -> None:
        span, self._backoff = self._backoff, None
        if span is None:
            return
        span.set_attribute("trio_session.retry.cancelled", cancelled)
        if cancelled:
            self._end_cut(span)
        else:
            span.end(end_time=self._now_ns())

    def _on_compaction_start(self, event: SessionEvent) -> None:
        assert isinstance(event, CompactionStart)
        if self._compaction is not None:  # pragma: no cover - compactions never overlap
            self._compaction.end(end_time=self._now_ns())
        self._compaction = self._start(
            COMPACTION_SPAN, {"trio_session.compaction.reason": event.reason}
        )

    def _on_compaction_end(self, event: SessionEvent) -> None:
        assert isinstance(event, CompactionEnd)
        span, self._compaction = self._compaction, None
        if span is None:  # pragma: no cover - an end always follows its start
            return
        span.set_attribute("trio_session.compaction.aborted", event.aborted)
        span.set_attribute("trio_session.compaction.will_retry", event.will_retry)
        if event.result is not None:
            span.set_attribute("trio_session.compaction.tokens_before", event.result.tokens_before)
            span.set_attribute("trio_session.compaction.tokens_after", event.result.tokens_after)
            span.set_attribute(
                "trio_session.compaction.messages_removed", event.result.messages_removed
            )
        if event.aborted:
            self._end_cut(span)
            return
        if event.error_message is not None:
            text = self._scrub(event.error_message)
            span.set_attribute("trio_session.error", text)
            _error(span, "compaction_failed", text)
        span.end(end_time=self._now_ns())


_HANDLERS: dict[type[Any], Callable[[SessionTracer, SessionEvent], None]] = {
    TurnStart: SessionTracer._on_turn_start,
    MessageEnd: SessionTracer._on_message_end,
    AgentStart: SessionTracer._on_agent_start,
    AgentEnd: SessionTracer._on_agent_end,
    AutoRetryStart: SessionTracer._on_retry_start,
    AutoRetryEnd: SessionTracer._on_retry_end,
    CompactionStart: SessionTracer._on_compaction_start,
    CompactionEnd: SessionTracer._on_compaction_end,
}

#: The events a span starts or ends at; the rest need not reach ``on_event`` at all.
TRACED_EVENTS: frozenset[type[Any]] = frozenset(_HANDLERS)


def _is_cancellation(exc: BaseException) -> bool:
    """``trio.Cancelled``, alone or as the only kind of exception in a group."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


def _cancelled(span: Span, who: str | None) -> None:
    """Mark a span cancelled (its status stays ``UNSET``: a cancel is not an error)."""
    span.set_attribute("trio_session.cancelled", True)
    if who is not None:
        span.set_attribute("trio_session.cancelled_by", who)


def _error(span: Span, error_type: str, description: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(_otel_trace.Status(_otel_trace.StatusCode.ERROR, description or error_type))


def _import_opentelemetry() -> bool:
    """Import OpenTelemetry's ``trace`` and ``context`` once; whether they are there."""
    global AVAILABLE, _otel_context, _otel_trace
    if AVAILABLE and "_otel_trace" not in globals():
        try:
            from opentelemetry import context, trace
        except ImportError:  # found, but it cannot be imported: as if it were not there
            AVAILABLE = False
        else:
            _otel_context, _otel_trace = context, trace
    return AVAILABLE


#: Each tracer provider's tracer for this package, kept as long as its provider lives.
_TRACERS: weakref.WeakKeyDictionary[Any, Tracer] = weakref.WeakKeyDictionary()


def tracer_of(provider: TracerProvider) -> Tracer:
    """``provider``'s tracer for this package, asked of it once and then reused.

    Callers resolve the global provider at each prompt, so one installed later is used
    from the next prompt on (the API's proxy provider, and its cached tracer, are then
    no longer asked). A provider that cannot be weakly referenced is asked every time.
    """
    try:
        found = _TRACERS.get(provider)
    except TypeError:
        found = None
    if found is not None:
        return found
    tracer = _otel_trace.get_tracer(TRACER_NAME, _version(), tracer_provider=provider)
    with contextlib.suppress(TypeError):
        _TRACERS[provider] = tracer
    return tracer


def describe_session(ref: weakref.ref[ObservedSession]) -> tuple[str, str, str]:
    """``(session id, provider, model id)`` of the session, if it is still alive."""
    session = ref()
    if session is None:  # pragma: no cover - events come from a live session
        return ("", "", "")
    return (session.session_id, session.model.provider, session.model.id)


def tracing_wanted(given: TracerProvider | None) -> bool:
    """Whether a tracer asked now could record: a provider ``given``, or one installed
    globally, that is not the API's no-op proxy (asked at each prompt, so one installed
    later is used from the next prompt on). Nobody has installed one while
    OpenTelemetry's ``trace`` is not even imported (and the environment variable named
    no provider when the first prompt asked): then it is not imported here either.

    Args:
        given: the session's own tracer provider, if it was given one.
    """
    if not AVAILABLE:
        return False
    imported = "opentelemetry.trace" in sys.modules
    if given is None and not imported and not _provider_named_in_environment():
        return False
    if not _import_opentelemetry():  # pragma: no cover - found, but broken
        return False
    proxy = _otel_trace.ProxyTracerProvider
    return not (
        (given is None or isinstance(given, proxy)) and isinstance(_global_provider(), proxy)
    )


def classify_for(
    ref: weakref.ref[ObservedSession], message: AssistantMessage, own: Classifier | None
) -> str:
    """``"retryable"``, ``"overflow"`` or ``"fatal"``, as the session's classifier says:
    ``own`` (the one it was given), else its profile's (R-53)."""
    session = ref()
    if session is None:  # pragma: no cover - events come from a live session
        return "fatal"
    policy = RetryPolicy.resolve(session.settings, own)
    return policy.label(message, session.model.context_window)


def scrub_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by its ``redact`` form, longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            from ..store._credentials import redact  # a key met: the store's short form

            text = text.replace(secret, redact(secret))
    return text


def session_tracer(
    tracer_provider: TracerProvider | None,
    *,
    session: weakref.ref[ObservedSession],
    secrets: AbstractSet[str],
    classifier: Classifier | None = None,
) -> SessionTracer | None:
    """The span maker for one session, or ``None`` when OpenTelemetry is not installed.

    Args:
        tracer_provider: where spans go; the global one
            (``opentelemetry.trace.get_tracer_provider()``) if ``None``, asked when
            each prompt starts.
        session: the session, weakly.
        secrets: the session's API keys (``use_secrets`` replaces the set).
        classifier: the session's own classifier, if it was given one.
    """
    if not AVAILABLE:
        return None
    return SessionTracer(session, secrets, tracer_provider, classifier)
