"""AgentSession: one conversation with a model, and the retry policy around it.

The session owns the scope tree of DESIGN.md:

```text
AgentSession.prompt()                 returns when this nursery closes (R-35)
└── nursery (cancel scope = the run)  abort() / the caller's timeout cancel this
                                      (opened once a chain or compaction follows)
    ├── agent run
    └── retry chain task              exists ⇔ is_retrying (R-10)
        └── CancelScope (the chain)   abort_retry() cancels this
```

Nothing is reset "in a catch block": leaving a scope is the reset.
"""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal, overload

import attrs
import trio

from ._agent import QUEUE_MODES, Agent, MessageQueue, QueueMode, Tool
from ._bash import BashResult, BashRun
from ._retry.classify import CLASSIFIERS, Classifier
from ._compaction import Compactor, SummarizingCompactor
from ._errors import (
    CompactionError,
    EventStreamLagged,
    SessionBusyError,
    SessionClosedError,
    TrioSessionError,
)
from ._events import (
    AutoRetryEnd,
    CompactionEnd,
    CompactionReason,
    CompactionResult,
    CompactionStart,
    HistoryWriteFailed,
    MessageEnd,
    SessionEvent,
    SessionInfoChanged,
    ThinkingLevelChanged,
)
from ._export import default_export_path, render_html, write_html
from ._extensions import (
    DEFAULT_HANDLER_TIMEOUT,
    Extension,
    ExtensionRunner,
    load_extension_file,
)
from ._groups import unwrapped as _unwrapped
from ._logging import SessionObserver  # -- observe (issue 14) --
from ._messages import (
    AssistantMessage,
    BashExecutionMessage,
    CompactionSummaryMessage,
    ImageContent,
    Message,
    TextContent,
    UserMessage,
)
from ._retry.chain import Next, RetryChain
from ._settings import RetrySettings, Settings, SettingsStore
from ._stats import SessionStats, session_stats
from ._stream import ReplyStream, open_reply_stream
from ._text import valid_text
from .providers._base import (
    DEFAULT_THINKING_LEVEL,
    THINKING_LEVELS,
    Model,
    Provider,
    clamp_thinking_level,
    supported_thinking_levels,
)
from .store._credentials import CooldownStore, CredentialStore
from .store._history import (
    HistoryError,
    LoadedSession,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    runtime_context,
)
from .store._session_file import SessionFile, open_history

logger = logging.getLogger("trio_session")

Subscriber = Callable[[SessionEvent], None]

#: What ``prompt()`` says while another prompt (or a compaction) runs.
BUSY = (
    "the session is already processing a prompt; queue the message with steer() or "
    'follow_up() (over RPC: streamingBehavior "steer" or "followUp"), '
    "or await the prompt or abort() first"
)

#: The compactor of a session given none (frozen and stateless: sessions share it).
_DEFAULT_COMPACTOR = SummarizingCompactor()

#: ``unwrapped`` keeps no state: one instance serves every prompt and block.
_UNWRAPPED = _unwrapped()

#: Events an ``AgentSession.events`` stream buffers before it is dropped.
DEFAULT_EVENT_BUFFER = 4096


def _models_tuple(models: Sequence[Model]) -> tuple[Model, ...]:
    return tuple(models)


def _coerce_settings(value: SettingsStore | Settings | Mapping[str, Any] | None) -> SettingsStore:
    return SettingsStore.coerce(value)


@attrs.define(eq=False)
class EventStream:
    """An async iterator over session events, fed without ever blocking the session.

    Made by ``AgentSession.events``. If the consumer falls more than
    ``buffer`` events behind, the stream is disconnected: iteration yields what
    was buffered, then raises ``EventStreamLagged``.

    Attributes:
        send: the sending end of the stream's channel; the session delivers to it.
        receive: the receiving end, which iteration reads.
        lagged: whether the consumer fell behind and the stream was disconnected.
    """

    _send: trio.MemorySendChannel[SessionEvent]
    _receive: trio.MemoryReceiveChannel[SessionEvent]
    lagged: bool = False

    def _push(self, event: SessionEvent) -> bool:
        """Deliver without waiting; return False once the stream is gone."""
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.lagged = True
            self._send.close()
            return False
        except trio.ClosedResourceError:
            return False
        return True

    def _close(self) -> None:
        self._send.close()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> SessionEvent:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self.lagged:
                msg = "event stream fell behind and was disconnected"
                raise EventStreamLagged(msg) from None
            raise StopAsyncIteration from None


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class AgentSession:
    """A conversation with a model, with auto-retry and overflow compaction.

    Make one with ``open_session``. All methods must be called from Trio
    tasks of the run the session lives in.

    Args:
        provider: the model provider (``FauxProvider`` in tests).
        model: the model to ask.
        settings: a ``SettingsStore``, a ``Settings``, nested groups in
            settings-file form (``{"retry": {"maxRetries": 5}}``), or ``None``.
        tools: tools the model may call.
        system_prompt: sent with every request.
        credentials: where API keys come from; also told about usage limits (R-17).
        compactor: shrinks the context on overflow; ``SummarizingCompactor`` if omitted.
        classifier: overrides ``retry.classifier`` with any ``Classifier``.
        session_id: identifies the session to the credential store; random if omitted.
        models: the models the session may switch to (``set_model``, ``cycle_model``);
            ``model`` is always one of them.
        thinking_level: the starting thinking level; ``"medium"`` (the reference's
            default) if omitted, clamped to the model (``"off"`` unless it reasons).
        tracer_provider: the OpenTelemetry ``TracerProvider`` for the session's spans;
            the global one if omitted (see ``trio_session._tracing``).
        extensions: the loaded extensions, given every event; none if omitted.
        history_file: the session file entries are appended to; none is written if omitted.
    """

    _provider: Provider = attrs.field(alias="provider")
    _model: Model = attrs.field(alias="model")
    _settings: SettingsStore = attrs.field(
        default=None, converter=_coerce_settings, alias="settings"
    )
    _tools: Sequence[Tool] = attrs.field(default=(), alias="tools")
    _system_prompt: str | None = attrs.field(default=None, alias="system_prompt")
    _credentials: CredentialStore | None = attrs.field(default=None, alias="credentials")
    _compactor: Compactor = attrs.field(
        default=attrs.Factory(lambda: _DEFAULT_COMPACTOR), alias="compactor"
    )
    _classifier: Classifier | None = attrs.field(default=None, alias="classifier")
    session_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _extensions: ExtensionRunner | None = attrs.field(default=None, alias="extensions")
    _history_file: SessionFile | None = attrs.field(default=None, alias="history_file")
    # -- models and thinking --
    _models: tuple[Model, ...] = attrs.field(default=(), converter=_models_tuple, alias="models")
    _preferred_thinking: str | None = attrs.field(default=None, alias="thinking_level")
    # -- bash --
    _bash_run: BashRun | None = attrs.field(default=None, init=False)
    # Bash results that came while a prompt ran; a list only once there is one.
    _pending_bash: list[BashExecutionMessage] | None = attrs.field(default=None, init=False)

    _agent: Agent = attrs.field(init=False)
    _history: list[Message] = attrs.field(factory=list, init=False)
    # Subscribers and event streams; each a list only once there is one (most sessions
    # have neither: the observer is called directly).
    _subscribers: list[Subscriber] | None = attrs.field(default=None, init=False)
    _streams: list[EventStream] | None = attrs.field(default=None, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    # Who waits for the session to be idle (abort) or for a chain's end; made on first use.
    _idle: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)
    _run_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _chain: RetryChain | None = attrs.field(default=None, init=False)
    _next: Next = attrs.field(default=Next.DONE, init=False)
    _compacted: bool = attrs.field(default=False, init=False)
    _write_failed: bool = attrs.field(default=False, init=False)
    # Prompts that joined a retry in its backoff; a list only once there is one.
    _joined: list[UserMessage] | None = attrs.field(default=None, init=False)
    # The steering messages the joined re-attempt's first turn takes (fixed at the join).
    _join_steering: tuple[UserMessage, ...] | None = attrs.field(default=None, init=False)
    _compacting: bool = attrs.field(default=False, init=False)
    _retry_ended: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)
    _session_name: str | None = attrs.field(default=None, init=False)
    # -- observe (issue 14): logs and spans from this session's events --
    _tracer_provider: Any = attrs.field(default=None, alias="tracer_provider")
    _observer: SessionObserver = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._observer = SessionObserver.install(self, self._tracer_provider)  # -- observe --
        self._agent = Agent(
            provider=self._provider,
            model=self._model,
            emit=self._on_agent_event,
            tools=self._tools,
            system_prompt=self._system_prompt,
            key_source=self._api_key if self._credentials is not None else None,
            checkpoint=self._flush_history if self._history_file is not None else None,
        )
        loaded = self._history_file.loaded if self._history_file is not None else None
        if loaded is not None:
            # Resuming: the history is the branch ending at the file's leaf; the context is
            # what the reference rebuilds from it (compaction summary, kept messages, branch
            # summaries, custom messages), without retried errors.
            self._history.extend(loaded.branch_messages)
            self._agent.messages.extend(runtime_context(loaded))
            self._session_name = loaded.session_name
        self._init_models_and_thinking(loaded)
        current = self._settings.current
        self._agent.steering.mode = current.steering_mode  # settings steeringMode / followUpMode
        self._agent.follow_ups.mode = current.follow_up_mode
        file = self._history_file
        if file is not None and file.loaded is None and file.leaf_id is None:
            # A new file starts as the reference's do: the model and the thinking level.
            file.append_model_change_nowait(self._model.provider, self._model.id)
            file.append_thinking_level_change_nowait(self._agent.thinking_level)

    @property
    def history_file(self) -> SessionFile | None:
        """The session file entries are appended to, if the session has one."""
        return self._history_file

    # -- state ---------------------------------------------------------------

    @property
    def model(self) -> Model:
        """The model this session asks."""
        return self._model

    @property
    def settings(self) -> Settings:
        """The effective settings now."""
        return self._settings.current

    @property
    def settings_store(self) -> SettingsStore:
        """The layered settings behind ``settings``."""
        return self._settings

    @property
    def messages(self) -> tuple[Message, ...]:
        """The runtime context: what the model is sent next (retried errors removed)."""
        return tuple(self._agent.messages)

    @property
    def history(self) -> tuple[Message, ...]:
        """Every message of the session, in order, failed attempts included (R-20, R-51)."""
        return tuple(self._history)

    @property
    def is_running(self) -> bool:
        """Whether a prompt is in progress (including its retries and compaction)."""
        return self._running

    @property
    def is_retrying(self) -> bool:
        """Whether a retry chain is alive (R-10, R-37)."""
        return self._chain is not None and self._chain.alive

    @property
    def is_waiting_to_retry(self) -> bool:
        """Whether a retry chain waits out its backoff (nothing streams meanwhile).

        False from the moment the wait is over — its delay passed, ``retry_now``,
        ``join_retry`` or ``abort_retry`` — even before the chain's task has woken."""
        return self._chain is not None and self._chain.alive and self._chain.waiting

    def join_retry(self, text: str, images: Sequence[ImageContent] = ()) -> bool:
        """Send a new user message with the retry that is waiting out its backoff.

        The rest of the sleep is skipped and the re-attempt's request carries the
        message (after the one that failed): what the reference does with a prompt
        that arrives between attempts, when it starts a new run at once. Used by RPC
        ``prompt`` during a backoff. If the chain is cancelled before its re-attempt
        (``abort_retry``, ``abort``), the message is queued as a steering message for
        the next prompt, with a ``queue_update`` — never dropped.

        As in the reference, the joined run has started here: the re-attempt's first
        turn also takes what the steering queue gives now, and from now on the retry
        is no longer waiting (``is_waiting_to_retry`` is false), so a later prompt is
        one that arrives while the session runs — ``steer`` delivers it after that
        first turn — however soon the chain's task gets to build its request.

        Args:
            text: the user message's text.
            images: images sent after the text.

        Returns:
            False (and nothing happens) when no retry is waiting.
        """
        chain = self._chain
        if chain is None or not chain.alive or not chain.waiting:
            return False
        text, replaced = valid_text(text)
        if replaced:
            logger.warning("prompt text held %d lone surrogate code point(s); replaced", replaced)
        if self._joined is None:
            self._joined = []
        self._joined.append(UserMessage.of(text, tuple(images)))
        self._join_steering = self._agent.steering.peek()  # the run's first look, now
        chain.skip_wait()
        return True

    @property
    def credential_store_status(self) -> str | None:
        """The credential store's ``status`` when it reports one: a Redis store says
        ``"redis"``, or ``"local-fallback"`` while Redis cannot be reached."""
        status = getattr(self._credentials, "status", None)
        return status if isinstance(status, str) else None

    @property
    def retry_attempt(self) -> int:
        """The current retry attempt, 1-based; 0 when no chain is alive (R-9)."""
        return self._chain.attempt if self._chain is not None and self._chain.alive else 0

    @property
    def auto_retry_enabled(self) -> bool:
        """``retry.enabled`` (R-37)."""
        return self._settings.current.retry.enabled

    def set_auto_retry_enabled(self, enabled: bool) -> None:
        """Write ``retry.enabled`` (R-37); applies from the next error on.

        If the value came from a settings file, the file is updated too (a small
        atomic write, done before this returns); the session file records the change.

        Args:
            enabled: whether a retryable error starts a retry chain.
        """
        self._set_setting("retry.enabled", enabled)

    @property
    def auto_compaction_enabled(self) -> bool:
        """``compaction.enabled``."""
        return self._settings.current.compaction.enabled

    def set_auto_compaction_enabled(self, enabled: bool) -> None:
        """Write ``compaction.enabled`` (R-50), like ``set_auto_retry_enabled``.

        Args:
            enabled: whether a context overflow is compacted and retried.
        """
        self._set_setting("compaction.enabled", enabled)

    def _set_setting(self, key: str, value: Any) -> None:
        self._settings.set_and_persist(key, value)
        if self._history_file is not None:
            self._history_file.append_settings_change_nowait(key, value)

    # -- events --------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, synchronously and in order.

        A callback must not block; an exception in it is logged and ignored.

        Args:
            callback: called with each event, in the task that emits it.

        Returns:
            A function that unsubscribes (safe to call twice).
        """
        if self._subscribers is None:
            self._subscribers = []
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if self._subscribers is not None and callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    @contextmanager
    def events(self, *, buffer: int = DEFAULT_EVENT_BUFFER) -> Iterator[EventStream]:
        """Subscribe as an async iterator:

        ```python
        with session.events() as events:
            async for event in events:
                ...
        ```

        Delivery never waits for the consumer: past ``buffer`` unread events the
        stream is dropped and raises ``EventStreamLagged`` (R-34).

        Args:
            buffer: how many unread events the stream may hold before it is dropped.

        Yields:
            An ``EventStream``, unsubscribed when the ``with`` block exits.
        """
        send, receive = trio.open_memory_channel[SessionEvent](buffer)
        stream = EventStream(send, receive)
        if self._streams is None:
            self._streams = []
        self._streams.append(stream)
        try:
            yield stream
        finally:
            if self._streams is not None and stream in self._streams:
                self._streams.remove(stream)
            send.close()
            receive.close()

    def _emit(self, event: SessionEvent) -> None:
        try:
            self._observer.on_event(event)  # -- observe --: the first subscriber
        except Exception:
            logger.exception("session event subscriber %r raised", self._observer.on_event)
        if self._subscribers:
            for callback in tuple(self._subscribers):
                try:
                    callback(event)
                except Exception:
                    logger.exception("session event subscriber %r raised", callback)
        if self._streams:
            for stream in tuple(self._streams):
                if not stream._push(event):
                    self._streams.remove(stream)
        if self._extensions is not None:
            self._extensions.deliver(event)
        if self._retry_ended is not None and isinstance(event, AutoRetryEnd):
            self._retry_ended.unpark_all()

    def _on_agent_event(self, event: SessionEvent) -> None:
        self._emit(event)
        if isinstance(event, MessageEnd):
            message = event.message
            self._history.append(message)
            file = self._history_file
            if file is not None and file.entry_id_of(message) is None:  # prompts are in already
                file.append_message_nowait(message)
            if isinstance(message, AssistantMessage) and not message.failed:
                self._compacted = False
                if self._chain is not None and self._chain.alive and self._chain.attempt > 0:
                    self._chain.succeed(
                        _ChainHost(self)
                    )  # R-23, R-23a: after message_end, before turn_end

    # -- prompting -----------------------------------------------------------

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        raise_on_error: bool = False,
    ) -> AssistantMessage:
        """Send a user message and run until the logical prompt is over.

        The message is ``UserMessage.of(text, images)``: a text part, then the
        images, as the reference sends it. Messages queued with ``steer`` join it
        in the first turn, before the request; queued follow-ups come when the
        run would otherwise stop.

        That includes every retry re-attempt and any overflow compaction: the
        retry chain is a child of this call's nursery, so this returns only when
        it has ended (R-35). Errors from the model are not raised unless
        ``raise_on_error`` is set: look at the returned message's ``stop_reason``
        and ``error_message``, or call its ``raise_for_error()``.

        With a session file, the user message is on disk before the request goes
        out, and every run's messages before the next request or backoff sleep.

        Text that cannot be sent (a lone surrogate: half of a character, as a
        JavaScript client that cut an emoji in two sends it) is made valid here:
        each such code point becomes U+FFFD, with a warning logged.

        Args:
            text: the user message's text.
            images: images sent after the text, in order.
            raise_on_error: raise the ``ProviderError`` the prompt ended in, instead
                of returning the error message.

        Returns:
            The last assistant message of the prompt: the answer, or, when it
                ended in an error (after its retries) or was aborted, a message whose
                ``stop_reason`` is ``"error"`` or ``"aborted"``.

        Raises:
            SessionBusyError: another prompt is running (R-36), retries included,
                or a manual ``compact``; queue with ``steer`` or ``follow_up`` instead.
            SessionClosedError: the session's ``open_session`` block has exited.
            HistoryError: the session file could not be written. The prompt ended
                there (no request goes out with a context that is not on disk), a
                ``history_write_failed`` event was emitted, and the session is idle
                again: what was not written stays staged for the next flush.
            ProviderError: with ``raise_on_error``, the prompt ended in an error
                (after its retries): ``RateLimitError``, ``OverloadedError``,
                ``AuthenticationError``, ``ContextOverflowError``, … (see
                ``AssistantMessage.raise_for_error``).
        """
        self._refuse_prompt()
        text, replaced = valid_text(text)
        if replaced:
            logger.warning(
                "prompt text held %d lone surrogate code point(s) (half of a character); "
                "replaced with U+FFFD",
                replaced,
            )
        self._start_busy()
        try:
            # -- observe --: the trio_session.prompt span (a no-op without OpenTelemetry),
            # entered and left by hand as ``with`` would, keeping no bound method meanwhile.
            span = self._observer.prompt()
            span.__enter__()
            try:
                with trio.CancelScope() as scope:  # the run, until a nursery takes over
                    self._run_scope = scope
                    user = UserMessage.of(text, tuple(images))
                    if self._history_file is not None:
                        await self._stage_prompt(self._history_file, user)
                    last = await self._agent.prompt(user, will_continue=self._decide)
                if scope.cancelled_caught:
                    self._observer.prompt_aborted()  # -- observe --: the span says cancelled
                elif self._next is not Next.DONE:
                    # A chain or a compaction follows: they run in the prompt's nursery,
                    # opened only now, so a turn that succeeds first time pays for none
                    # (nor for unwrapping: only a nursery makes exception groups). The
                    # nursery's scope is the run's from here on (abort() cancels it), born
                    # cancelled if abort() came as the first run ended; the first scope
                    # is let go, so a session in backoff keeps one scope fewer.
                    aborted = scope.cancel_called
                    del scope
                    try:  # as ``with _UNWRAPPED:``, without a bound method kept meanwhile
                        async with trio.open_nursery() as self._nursery:
                            run = self._run_scope = self._nursery.cancel_scope
                            if aborted:
                                run.cancel(reason="session aborted")
                            await self._settle(last)
                    except BaseExceptionGroup as group:
                        _UNWRAPPED.__exit__(type(group), group, group.__traceback__)
                        raise
                    if run.cancelled_caught:
                        self._observer.prompt_aborted()  # -- observe --: cancelled
            except BaseException as exc:
                if not span.__exit__(type(exc), exc, exc.__traceback__):
                    raise
            else:
                span.__exit__(None, None, None)
        finally:
            await self._end_busy()
        reply = self._last_assistant()
        if raise_on_error:
            reply.raise_for_error(self._model.context_window)
        return reply

    @overload
    def stream(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        events: Literal[False] = False,
        raise_on_error: bool = False,
    ) -> AbstractAsyncContextManager[ReplyStream[str]]: ...

    @overload
    def stream(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        events: Literal[True],
        raise_on_error: bool = False,
    ) -> AbstractAsyncContextManager[ReplyStream[SessionEvent]]: ...

    def stream(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        events: bool = False,
        raise_on_error: bool = False,
    ) -> AbstractAsyncContextManager[ReplyStream[str] | ReplyStream[SessionEvent]]:
        """Run ``prompt(text)`` and stream it: ``async with session.stream(text) as reply:``.

        ``async for delta in reply`` yields the text deltas as they arrive — across
        every retry re-attempt and compaction of the prompt — and ends exactly when
        ``prompt()`` would return; then ``reply.reply`` is the final message. With
        ``events=True`` it yields every ``SessionEvent`` of the prompt instead.

        The prompt runs in a nursery of the block. Leaving the block before the
        prompt is over cancels it (recorded as aborted) and waits for it; so does
        cancelling the caller's scope. Either way nothing is left running:

        ```python
        async with session.stream("Explain backoff") as reply:
            async for delta in reply:
                print(delta, end="", flush=True)
        print(reply.reply.usage)
        ```

        Args:
            text: the user message's text.
            images: images sent after the text, in order.
            events: yield every ``SessionEvent`` of the prompt instead of text deltas.
            raise_on_error: raise the ``ProviderError`` the prompt ended in (from the
                iteration, or on leaving the block), as ``prompt`` does.

        Returns:
            An async context manager whose ``ReplyStream`` yields the deltas (or
                events); its ``reply`` is the final message once the iteration ends.

        Raises:
            SessionBusyError: on entering the block, if another prompt runs (R-36).
            SessionClosedError: on entering the block, if the session is closed.
            HistoryError: from the iteration (or on leaving the block, if it was not
                iterated to its end): the session file could not be written.
            ProviderError: likewise, with ``raise_on_error``, when the prompt ended
                in an error.
        """
        return open_reply_stream(
            self, text, images=images, events=events, raise_on_error=raise_on_error
        )

    def _refuse_prompt(self) -> None:
        """Raise what ``prompt()`` raises before it starts: closed, or busy (R-36)."""
        if self._closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        if self._running:
            raise SessionBusyError(BUSY)

    def _start_busy(self) -> None:
        """The session runs a prompt or a manual compaction until ``_end_busy()``.

        Used as ``_start_busy(); try: … finally: await _end_busy()`` — a plain
        ``try`` rather than an async context manager, which costs a generator per
        prompt.
        """
        self._running = True
        self._write_failed = False

    async def _end_busy(self) -> None:
        """However the prompt ended: what waited for the end joins the context (bash
        results; prompts that joined a retry that was cancelled first go back to the
        steering queue), everything staged is written (shielded: an abort must not stop
        it), and the session is idle again: leaving the scope is the reset."""
        try:
            self._flush_pending_bash()  # -- bash --: what ran meanwhile joins the context now
            self._join_steering = None  # what it named is still queued
            if self._joined:  # joined a retry that was cancelled first: keep them queued
                self._agent.steering.messages[:0] = self._joined
                self._joined = None
                self._emit(self._agent.queue_update())
            if self._history_file is not None and not self._write_failed:
                with trio.CancelScope(shield=True):
                    await self._flush_history()
        finally:
            self._running = False
            self._run_scope = None
            self._nursery = None
            self._chain = None
            self._next = Next.DONE
            self._compacted = False
            if self._idle is not None:
                self._idle.unpark_all()

    def abort_retry(self) -> None:
        """Cancel the retry chain, if one is alive (R-29).

        In the backoff sleep, or while the re-attempt streams (R-31), the chain's
        scope is cancelled and it emits ``auto_retry_end {success: false,
        finalError: "Retry cancelled"}`` (R-30). The prompt then returns.
        """
        if self._chain is not None:
            self._chain.cancel()

    async def wait_for_retry_end(self) -> None:
        """Return once no retry chain is alive: after ``abort_retry``, once its
        ``auto_retry_end`` has been emitted."""
        while self.is_retrying:
            if self._retry_ended is None:
                self._retry_ended = trio.lowlevel.ParkingLot()
            await self._retry_ended.park()

    def retry_now(self) -> bool:
        """Skip the rest of the current backoff sleep (R-34a).

        Returns:
            Whether a sleep was cut short.
        """
        return self._chain is not None and self._chain.alive and self._chain.skip_wait()

    async def abort(self) -> None:
        """Cancel any retry, then the running prompt; return when the session is idle (R-32)."""
        chain = self._chain
        if chain is not None and chain.sleeping:
            # In its backoff sleep the chain is all that runs of the prompt (whose body
            # waits for its nursery): ending the chain ends the prompt. One cancel, and
            # no Cancelled travels through the nursery as an exception group.
            self._observer.prompt_aborted()  # -- observe --: the span says cancelled
            chain.cancel()
        else:
            self.abort_retry()
            if self._run_scope is not None:
                self._run_scope.cancel(reason="session aborted")
        if not self._running:
            await trio.lowlevel.checkpoint()
            return
        # Wait for the end of the prompt cancelled here, not for "not running": a new
        # prompt started by another task before this one resumes is not waited for.
        if self._idle is None:
            self._idle = trio.lowlevel.ParkingLot()
        await self._idle.park()

    # -- what happens after a run (SPEC §1) -------------------------------------

    def _decide(self, message: AssistantMessage) -> bool:
        """Classify the run's last message (R-1, R-2) just before its ``agent_end``."""
        settings = self._settings.current
        classifier = self._classifier or CLASSIFIERS[settings.retry.classifier]
        window = self._model.context_window
        if classifier.is_retryable(message, window):
            if not settings.retry.enabled:
                self._next = Next.DONE  # no chain, no event
            elif self.retry_attempt + 1 > settings.retry.max_retries:
                self._next = Next.GIVE_UP
            else:
                self._next = Next.RETRY
        elif classifier.is_context_overflow(message, window):
            self._next = self._overflow_step(settings, silent=message.stop_reason != "error")
        else:
            self._next = Next.DONE
        return self._next.will_retry

    def _overflow_step(self, settings: Settings, *, silent: bool) -> Next:
        if not settings.compaction.enabled:
            return Next.DONE
        if silent:
            return Next.COMPACT_ONLY
        return Next.DONE if self._compacted else Next.COMPACT

    async def _stage_prompt(self, file: SessionFile, user: UserMessage) -> None:
        """Put the prompt on disk before its request goes out.

        The write finishes even if an abort comes meanwhile (the run then ends
        aborted, as it would). If it fails, the prompt is taken back: it is not
        sent, so it is not kept either, and ``prompt()`` raises.
        """
        entry_id = file.append_message_nowait(user)
        try:
            with trio.CancelScope(shield=True):
                await self._flush_history()
        except HistoryError:
            file.retract(entry_id)
            raise

    async def _flush_history(self) -> None:
        """Put staged entries on disk: before every request, and before every ``agent_end``.

        A failed write is reported once per prompt (``history_write_failed``) and
        raised: the prompt ends, because going on would send the model a context
        that is not on disk.
        """
        file = self._history_file
        if file is None or file.closed:
            return
        try:
            await file.flush()
        except HistoryError as exc:
            if not self._write_failed:
                self._write_failed = True
                self._emit(HistoryWriteFailed(path=str(file.path), error=str(exc)))
            raise

    async def _settle(self, message: AssistantMessage) -> None:
        """Act on the decision made at ``agent_end``: retry chain, compaction, or nothing."""
        while True:
            step = self._next
            if step in (Next.RETRY, Next.GIVE_UP):
                assert self._nursery is not None
                chain = self._chain = RetryChain()
                self._nursery.start_soon(self._run_chain, chain, message)
                return
            if step in (Next.COMPACT, Next.COMPACT_ONLY):
                message = await self._compact(message, resume=step is Next.COMPACT)
                continue
            return

    async def _run_chain(self, chain: RetryChain, error: AssistantMessage) -> None:
        leftover = await chain.run(_ChainHost(self), error)
        if leftover is not None:
            await self._settle(leftover)

    async def _compact(self, message: AssistantMessage, *, resume: bool) -> AssistantMessage:
        """The overflow path (R-50): drop the error, compact, continue once."""
        self._next = Next.DONE
        if resume:
            self._drop_from_context(message)
            self._compacted = True
        result = await self._run_compaction("overflow", will_retry=resume)
        if result is None or not resume:
            return message
        return await self._agent.continue_(will_continue=self._decide)

    async def _run_compaction(
        self,
        reason: CompactionReason,
        *,
        will_retry: bool = False,
        custom_instructions: str | None = None,
    ) -> CompactionResult | None:
        """Compact the runtime context between ``compaction_start`` and ``compaction_end``.

        The summary (if the compactor made one) enters the context as a
        ``CompactionSummaryMessage``; the session file gets a compaction entry whose
        ``firstKeptEntryId`` is the first message kept. Returns ``None`` when the
        compactor found nothing to remove; a failure is raised after its
        ``compaction_end``.
        """
        self._compacting = True
        self._emit(CompactionStart(reason=reason))
        try:
            compaction = await self._compactor.compact(
                self.messages,
                model=self._model,
                settings=self._settings.current.compaction,
                ask=self._agent.complete,
                **_instructions(self._compactor, custom_instructions),
                **_reason(self._compactor, reason),
            )
        except trio.Cancelled:
            self._emit(CompactionEnd(reason, result=None, aborted=True, will_retry=False))
            raise
        except BaseException as exc:
            error = (
                f"Compaction failed: {exc}"
                if reason == "manual"
                else f"Context overflow recovery failed: {exc}"
            )
            self._emit(CompactionEnd(reason, None, False, False, error_message=error))
            raise
        finally:
            self._compacting = False
        if compaction is None:
            failed = f"Compaction failed: {NOTHING_TO_COMPACT}" if reason == "manual" else None
            self._emit(CompactionEnd(reason, None, False, False, error_message=failed))
            return None
        self._agent.messages[:] = compaction.messages
        result = compaction.result
        if self._history_file is not None:
            file = self._history_file
            kept = next(
                (i for m in compaction.messages if (i := file.entry_id_of(m)) is not None), None
            )
            kept = file.kept_from(kept) if kept is not None else None
            result = attrs.evolve(result, first_kept_entry_id=kept)
            first = compaction.messages[0] if compaction.messages else None
            file.append_compaction_nowait(
                result,
                first_kept_entry_id=kept,
                timestamp_ms=first.timestamp
                if isinstance(first, CompactionSummaryMessage)
                else None,
            )
        self._emit(CompactionEnd(reason, result=result, aborted=False, will_retry=will_retry))
        return result

    # -- what a retry chain may do (through ``_ChainHost``) ------------------------

    def _drop_from_context(self, message: AssistantMessage) -> None:
        """Remove ``message`` from the end of the runtime context (R-20); history keeps it."""
        if self._agent.messages and self._agent.messages[-1] is message:
            self._agent.messages.pop()

    async def _rotate_credential(self, hint_ms: int | None) -> bool:
        """R-17: report a usage limit; True if the store moved us to another credential."""
        if self._credentials is None:
            return False
        rotated = await self._credentials.mark_usage_limit_reached(
            self._provider.name,
            self.session_id,
            retry_after_ms=hint_ms,
            base_url=self._model.base_url,
        )
        self._observer.credential_rotated(rotated=rotated, retry_after_ms=hint_ms)  # -- observe --
        return rotated

    def _cooldowns(self) -> CooldownStore | None:
        """The store sharing wait hints, when ``retry.sharedCooldown`` is on and it can."""
        if not self._settings.current.retry.shared_cooldown:
            return None
        store = self._credentials
        return store if isinstance(store, CooldownStore) else None

    async def _share_cooldown(self, hint_ms: int) -> None:
        """``retry.sharedCooldown``: every session on this key waits out the server's hint."""
        store = self._cooldowns()
        if store is not None:
            await store.share_cooldown(
                self._provider.name,
                self.session_id,
                base_url=self._model.base_url,
                wait_ms=hint_ms,
            )

    async def _cooldown_ms(self) -> int:
        """What is left of the shared cooldown on this session's key (with jitter), at most
        ``retry.maxDelayMs`` (else ``retry.provider.maxRetryDelayMs`` when not 0)."""
        store = self._cooldowns()
        if store is None:
            return 0
        wait_ms = await store.cooldown_ms(
            self._provider.name, self.session_id, base_url=self._model.base_url
        )
        retry = self._settings.current.retry
        cap = retry.max_delay_ms
        if cap is None and retry.provider.max_retry_delay_ms > 0:
            cap = retry.provider.max_retry_delay_ms
        return wait_ms if cap is None else min(wait_ms, cap)

    async def _reattempt(self) -> AssistantMessage:
        """Continue the agent on the context as it is (R-22), with any prompts that
        joined the retry during its backoff (``join_retry``) and the steering messages
        their run took when they joined."""
        joined, self._joined = self._joined, None
        steering, self._join_steering = self._join_steering, None
        return await self._agent.continue_(
            will_continue=self._decide,
            messages=joined or (),
            steering=steering if joined else None,
        )

    # -- internals ------------------------------------------------------------------

    async def _api_key(self) -> str | None:
        assert self._credentials is not None
        key = await self._credentials.api_key(self._provider.name, self.session_id)
        self._observer.saw_key(key)  # -- observe --: no log record or span shows it
        if key is not None and not (self._chain is not None and self._chain.alive):
            # A fresh request on a key in a shared cooldown waits it out (a re-attempt
            # has already waited: its chain's delay includes the cooldown).
            wait_ms = await self._cooldown_ms()
            if wait_ms > 0:
                await trio.sleep(wait_ms / 1000)
        return key

    def _last_assistant(self) -> AssistantMessage:
        for message in reversed(self._history):
            if isinstance(message, AssistantMessage):
                return message
        msg = "no assistant message"  # pragma: no cover - a prompt always produces one
        raise AssertionError(msg)

    async def aclose(self) -> None:
        """Abort any running prompt, end every event stream, refuse new prompts.

        Idempotent.
        """
        self._closed = True
        self.abort_bash()  # -- bash --
        if self._running:
            with trio.CancelScope(shield=True):
                await self.abort()
        for stream in self._streams or ():
            stream._close()
        self._streams = None
        # The agent's emit is our bound method: a reference cycle. Cut it, so a closed
        # session is freed by reference counting rather than a later full collection.
        self._agent.emit = _discard

    # -- models and thinking -----------------------------------------------------------

    def _init_models_and_thinking(self, loaded: LoadedSession | None) -> None:
        """Resume the model and thinking level a session file last recorded, if any."""
        level = self._preferred_thinking
        if level is not None and level not in THINKING_LEVELS:
            msg = f"thinking_level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if loaded is not None:
            for entry in loaded.entries:
                if isinstance(entry, ModelChangeEntry):
                    found = self._find_model(entry.provider, entry.model_id)
                    if found is not None:
                        self._switch_model(found)
                elif isinstance(entry, ThinkingLevelChangeEntry) and (
                    entry.thinking_level in THINKING_LEVELS and self._preferred_thinking is None
                ):
                    level = entry.thinking_level
        if level is None:
            level = self._settings.current.default_thinking_level or DEFAULT_THINKING_LEVEL
        self._preferred_thinking = level
        self._agent.thinking_level = clamp_thinking_level(self._model, level)

    def _find_model(self, provider: str, model_id: str) -> Model | None:
        for model in self.available_models:
            if model.provider == provider and model.id == model_id:
                return model
        return None

    def _switch_model(self, model: Model) -> None:
        self._model = model
        self._agent.model = model

    @property
    def available_models(self) -> tuple[Model, ...]:
        """The models ``set_model`` and ``cycle_model`` move between: ``models``, with
        the session's model first if it is not among them."""
        current = self._model
        if any(m.provider == current.provider and m.id == current.id for m in self._models):
            return self._models
        return (current, *self._models)

    async def set_model(self, model: Model) -> None:
        """Ask ``model`` from the next request on (a running turn finishes with the old one).

        As the reference does, this is allowed while a prompt runs. The thinking level
        is clamped to what ``model`` supports: one that does not reason gets ``"off"``,
        and a later switch to one that does restores the level asked for. With a session
        file, a ``model_change`` entry is recorded (written now when idle, else by the
        prompt's next flush).

        Args:
            model: the model to switch to; it uses the session's provider.
        """
        self._switch_model(model)
        if self._history_file is not None:
            self._history_file.append_model_change_nowait(model.provider, model.id)
        self._apply_thinking_level(self._preferred_thinking or DEFAULT_THINKING_LEVEL)
        if self._history_file is not None and not self._running:
            await self._flush_history()

    async def cycle_model(self) -> Model | None:
        """Switch to the model after the current one in ``available_models`` (wrapping).

        Returns:
            The new model, or ``None`` when there is only one model (nothing changes).
        """
        models = self.available_models
        if len(models) <= 1:
            return None
        current = self._model
        index = next(
            (
                i
                for i, m in enumerate(models)
                if (m.provider, m.id) == (current.provider, current.id)
            ),
            0,
        )
        model = models[(index + 1) % len(models)]
        await self.set_model(model)
        return model

    @property
    def thinking_level(self) -> str:
        """The thinking level requests are sent with (one of ``THINKING_LEVELS``)."""
        return self._agent.thinking_level

    @property
    def available_thinking_levels(self) -> tuple[str, ...]:
        """The levels the current model supports: ``("off",)`` unless it reasons."""
        return supported_thinking_levels(self._model)

    def set_thinking_level(self, level: str) -> None:
        """Set the thinking level, clamped to the model as the reference clamps it.

        A model that does not reason stays at ``"off"``; ``"xhigh"`` becomes ``"high"``.
        For a model that reasons, the level asked for is also remembered for later
        model switches. A change is recorded as a ``thinking_level_change`` entry
        (written by the session file's next flush).

        Args:
            level: one of ``THINKING_LEVELS``.

        Raises:
            ValueError: ``level`` is not one of ``THINKING_LEVELS``.
        """
        if level not in THINKING_LEVELS:
            msg = f"thinking level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if self._model.reasoning:
            self._preferred_thinking = level
        self._apply_thinking_level(level)

    def _apply_thinking_level(self, level: str) -> None:
        effective = clamp_thinking_level(self._model, level)
        if effective != self._agent.thinking_level:
            self._agent.thinking_level = effective
            if self._history_file is not None:
                self._history_file.append_thinking_level_change_nowait(effective)
            if self._model.reasoning or effective != "off":
                self._remember("defaultThinkingLevel", effective)
            self._emit(ThinkingLevelChanged(level=effective))

    def _remember(self, key: str, value: str) -> None:
        """Save a choice the reference saves in its settings (``defaultThinkingLevel``,
        ``steeringMode``, ``followUpMode``).

        A settings file that cannot be written is logged, not raised: the choice is
        already in effect for this session.
        """
        try:
            self._settings.set_and_persist(key, value)
        except (OSError, TrioSessionError) as exc:
            logger.warning("could not save %s: %s", key, exc)

    def cycle_thinking_level(self) -> str | None:
        """Move to the next level the model supports (wrapping to ``"off"``).

        Returns:
            The new level, or ``None`` when the model does not reason (nothing changes).
        """
        if not self._model.reasoning:
            return None
        levels = self.available_thinking_levels
        current = self.thinking_level
        index = levels.index(current) if current in levels else -1
        level = levels[(index + 1) % len(levels)]
        self.set_thinking_level(level)
        return level

    # -- stats ---------------------------------------------------------------------------

    def stats(self) -> SessionStats:
        """Counts, token totals, cost and context use of the runtime context
        (the reference's ``get_session_stats``)."""
        file = self._history_file
        return session_stats(
            self._agent.messages,
            session_id=self.session_id,
            session_file=str(file.path) if file is not None else None,
            context_window=self._model.context_window,
        )

    def last_assistant_text(self) -> str | None:
        """The text of the last assistant message in the runtime context, trimmed.

        As the reference: an aborted message with no content is skipped; ``None`` when
        there is no assistant message or its text is empty.
        """
        for message in reversed(self._agent.messages):
            if not isinstance(message, AssistantMessage):
                continue
            if message.stop_reason == "aborted" and not message.content:
                continue
            text = "".join(p.text for p in message.content if isinstance(p, TextContent))
            return text.strip() or None
        return None

    async def export_html(self, path: str | Path | None = None) -> Path:
        """Write the whole history as one self-contained HTML page; return its path.

        Args:
            path: where to write it; by default ``trio-session-<session file name or
                id>.html`` in the current directory.
        """
        file = self._history_file
        target = (
            Path(path)
            if path is not None
            else default_export_path(self.session_id, file.path if file is not None else None)
        )
        page = render_html(
            self._history,
            session_id=self.session_id,
            model=f"{self._model.provider}/{self._model.id}",
            system_prompt=self._system_prompt,
        )
        return await write_html(target, page)

    # -- bash ----------------------------------------------------------------------------

    @property
    def is_bash_running(self) -> bool:
        """Whether a ``bash`` command is running."""
        return self._bash_run is not None

    async def bash(self, command: str, *, exclude_from_context: bool = False) -> BashResult:
        """Run a shell command; its output joins the conversation (the reference's ``bash``).

        The result is recorded as a ``BashExecutionMessage`` — no event is emitted — and
        reaches the model with the next prompt, as user text (left out of the model's
        context if ``exclude_from_context``). While a prompt runs, the command runs at
        once but its message is added when the prompt is over, so it never lands between
        a tool call and its result. ``abort_bash`` stops the command.

        Args:
            command: the command line, run by the shell.
            exclude_from_context: record the result but leave it out of what the model
                is sent.

        Returns:
            What the command did: its output, exit code, and whether it was cancelled
                or cut short.

        Raises:
            SessionBusyError: another ``bash`` command is running.
            SessionClosedError: the session is closed.
            OSError: the shell could not be started.
        """
        if self._closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        if self._bash_run is not None:
            msg = "a bash command is already running; wait for it or abort_bash() first"
            raise SessionBusyError(msg)
        file = self._history_file
        run = self._bash_run = BashRun(command, cwd=file.header.cwd if file is not None else None)
        try:
            result = await run.run()
        finally:
            self._bash_run = None
        message = BashExecutionMessage(
            command=command,
            output=result.output,
            exit_code=result.exit_code,
            cancelled=result.cancelled,
            truncated=result.truncated,
            full_output_path=result.full_output_path,
            exclude_from_context=exclude_from_context or None,
        )
        if self._closed:
            return result  # closed meanwhile: nothing more is recorded
        if self._running:
            if self._pending_bash is None:
                self._pending_bash = []
            self._pending_bash.append(message)
        else:
            self._record_bash(message)
            if self._history_file is not None:
                await self._flush_history()
        return result

    def abort_bash(self) -> None:
        """Stop the running ``bash`` command, if any: its process group is killed and its
        result is ``cancelled``."""
        if self._bash_run is not None:
            self._bash_run.abort()

    def _record_bash(self, message: BashExecutionMessage) -> None:
        self._agent.messages.append(message)
        self._history.append(message)
        if self._history_file is not None:
            self._history_file.append_message_nowait(message)

    def _flush_pending_bash(self) -> None:
        """Add the bash results that came in while a prompt ran (the reference's
        ``_flushPendingBashMessages``)."""
        pending, self._pending_bash = self._pending_bash, None
        for message in pending or ():
            self._record_bash(message)

    # -- queues ---------------------------------------------------------------------

    @property
    def steering_mode(self) -> QueueMode:
        """How many steering messages a delivery takes: ``"one-at-a-time"`` (the
        default) or ``"all"``."""
        return self._agent.steering.mode

    @property
    def follow_up_mode(self) -> QueueMode:
        """How many follow-ups a delivery takes: ``"one-at-a-time"`` (the default) or
        ``"all"``."""
        return self._agent.follow_ups.mode

    def set_steering_mode(self, mode: str) -> None:
        """Set ``steering_mode``; saved as the settings' ``steeringMode`` (as the
        reference saves it), so later sessions of the same settings start with it.

        Args:
            mode: ``"all"`` (deliver every queued message at once) or
                ``"one-at-a-time"``.

        Raises:
            ValueError: ``mode`` is not ``"all"`` or ``"one-at-a-time"``.
        """
        self._agent.steering.mode = _queue_mode(mode)
        self._remember("steeringMode", mode)

    def set_follow_up_mode(self, mode: str) -> None:
        """Set ``follow_up_mode`` (``ValueError`` for anything but the two modes); saved
        as the settings' ``followUpMode``.

        Args:
            mode: ``"all"`` or ``"one-at-a-time"``, as for ``set_steering_mode``.
        """
        self._agent.follow_ups.mode = _queue_mode(mode)
        self._remember("followUpMode", mode)

    @property
    def steering_messages(self) -> tuple[str, ...]:
        """The texts of the queued steering messages, oldest first."""
        return self._agent.steering.texts

    @property
    def follow_up_messages(self) -> tuple[str, ...]:
        """The texts of the queued follow-up messages, oldest first."""
        return self._agent.follow_ups.texts

    @property
    def pending_message_count(self) -> int:
        """Queued messages, steering and follow-up together."""
        return len(self._agent.steering.messages) + len(self._agent.follow_ups.messages)

    def steer(self, text: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a message for the running prompt: it is delivered after the current
        turn (its tool calls included), before the next request.

        During a retry's backoff sleep it is delivered before the re-attempt's
        request, which then sends it. When nothing runs — or the prompt ends first
        (an error, ``abort``, ``abort_retry``) — it stays queued and goes with the
        next prompt; ``clear_queue`` takes it back. Emits ``queue_update``.

        Args:
            text: the message's text.
            images: images sent after the text.
        """
        self._queue(self._agent.steering, text, images)

    def follow_up(self, text: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a message for when the running prompt would otherwise stop.

        A prompt in a retry chain delivers it once the chain has succeeded. A
        prompt that ends in an error or is aborted leaves it queued, for the next
        prompt; ``clear_queue`` takes it back. Emits ``queue_update``.

        Args:
            text: the message's text.
            images: images sent after the text.
        """
        self._queue(self._agent.follow_ups, text, images)

    def clear_queue(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Take every queued message back: ``(steering texts, follow-up texts)``.

        Emits ``queue_update`` (with both queues empty).
        """
        taken = (self.steering_messages, self.follow_up_messages)
        self._agent.steering.messages.clear()
        self._agent.follow_ups.messages.clear()
        self._emit(self._agent.queue_update())
        return taken

    def _queue(self, queue: MessageQueue, text: str, images: Sequence[ImageContent]) -> None:
        if self._closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        text, replaced = valid_text(text)
        if replaced:
            logger.warning("queued text held %d lone surrogate code point(s); replaced", replaced)
        queue.messages.append(UserMessage.of(text, tuple(images)))
        self._emit(self._agent.queue_update())

    # -- manual compaction ------------------------------------------------------------

    @property
    def is_compacting(self) -> bool:
        """Whether a compaction (manual or on overflow) is running."""
        return self._compacting

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult:
        """Compact the runtime context now, as the reference's ``compact`` does.

        A running prompt is aborted first (as the reference does). Emits
        ``compaction_start {reason: "manual"}`` and ``compaction_end``; the
        compaction is recorded in the session file. ``custom_instructions`` go to
        compactors whose ``compact`` takes a ``custom_instructions`` argument
        (``SummarizingCompactor`` adds them to its summary request). ``abort()``
        cancels it.

        Args:
            custom_instructions: what the summary should focus on, for compactors that
                take them.

        Returns:
            What the compaction did: the summary, the estimated tokens before and
                after, how many messages left the context.

        Raises:
            CompactionError: nothing to compact, or it was cancelled by ``abort()``;
                the context is unchanged.
            SessionClosedError: the session's block has exited.
        """
        if self._closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        if self._running:
            await self.abort()
        if self._running:  # another task started a prompt meanwhile
            raise SessionBusyError(BUSY)
        result: CompactionResult | None = None
        self._start_busy()
        try:
            with trio.CancelScope() as self._run_scope:
                result = await self._run_compaction(
                    "manual", custom_instructions=custom_instructions
                )
                if result is None:
                    raise CompactionError(NOTHING_TO_COMPACT)
        finally:
            await self._end_busy()
        if result is None:  # abort() cancelled it
            msg = "Compaction cancelled"
            raise CompactionError(msg)
        return result

    # -- session tree --------------------------------------------------------------

    @property
    def session_file(self) -> Path | None:
        """The path of the session file, ``None`` if the session keeps none."""
        return self._history_file.path if self._history_file is not None else None

    @property
    def session_name(self) -> str | None:
        """The session's display name (the last ``session_info`` entry); ``None`` if unset."""
        return self._session_name

    def set_session_name(self, name: str) -> None:
        """Set the display name (trimmed; an empty name clears it).

        With a session file a ``session_info`` entry is staged, written with the
        next flush (the next prompt, or closing the session).

        Args:
            name: the display name; blank clears it.
        """
        name = name.strip()
        if self._history_file is not None:
            self._history_file.append_session_info_nowait(name)
        self._session_name = name or None
        self._emit(SessionInfoChanged(name=self._session_name))

    def fork_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message of the session file, in file order.

        The reference's ``getUserMessagesForForking``: the messages a fork can start
        before. Empty without a session file (there are no entry ids to name).
        """
        if self._history_file is None:
            return []
        return self._history_file.user_messages()


def _queue_mode(mode: str) -> QueueMode:
    for known in QUEUE_MODES:
        if mode == known:
            return known
    msg = f'unknown queue mode {mode!r}: expected "all" or "one-at-a-time"'
    raise ValueError(msg)


def _discard(event: SessionEvent) -> None:
    """Where a closed session's agent sends its (no longer expected) events."""


#: Why a manual ``compact`` did nothing (the reference's words).
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"


def _reason(compactor: Compactor, reason: CompactionReason) -> dict[str, Any]:
    """The compaction's ``reason`` as a keyword, for compactors whose ``compact`` takes it."""
    try:
        parameters = inspect.signature(compactor.compact).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return {}
    return {"reason": reason} if "reason" in parameters else {}


def _instructions(compactor: Compactor, custom_instructions: str | None) -> dict[str, Any]:
    """``custom_instructions`` as a keyword, for compactors whose ``compact`` takes it."""
    if custom_instructions is None:
        return {}
    try:
        parameters = inspect.signature(compactor.compact).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return {}
    if "custom_instructions" not in parameters:
        logger.warning(
            "compactor %r takes no custom_instructions; compacting without them", compactor
        )
        return {}
    return {"custom_instructions": custom_instructions}


@attrs.frozen
class _ChainHost:
    """A session as its retry chains see it (``RetryHost``).

    The hooks a chain needs — read the retry settings and the decision, emit
    events, drop a failed attempt, rotate the credential, re-attempt — are the
    session's private methods; this adapter hands exactly those to the chain, so
    they are not part of ``AgentSession``'s public surface.
    """

    session: AgentSession

    @property
    def retry_settings(self) -> RetrySettings:
        """The ``retry`` group, read fresh (R-11)."""
        return self.session._settings.current.retry

    @property
    def next_step(self) -> Next:
        """What the last run's ``agent_end`` decided."""
        return self.session._next

    def emit(self, event: SessionEvent) -> None:
        self.session._emit(event)

    def drop_from_context(self, message: AssistantMessage) -> None:
        self.session._drop_from_context(message)

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        return await self.session._rotate_credential(hint_ms)

    async def share_cooldown(self, hint_ms: int) -> None:
        await self.session._share_cooldown(hint_ms)

    async def cooldown_delay(self, delay_ms: int) -> int:
        return max(delay_ms, await self.session._cooldown_ms())

    async def reattempt(self) -> AssistantMessage:
        return await self.session._reattempt()


class _Given:
    """The session file ``open_session`` was given (or ``None``), as the async context
    manager ``open_history`` would be: one small object rather than an exit stack."""

    __slots__ = ("_file",)

    def __init__(self, file: SessionFile | None) -> None:
        self._file = file

    async def __aenter__(self) -> SessionFile | None:
        return self._file

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def open_session(
    provider: Provider,
    model: Model | str | None = None,
    *,
    settings: SettingsStore | Settings | Mapping[str, Any] | None = None,
    tools: Sequence[Tool] = (),
    system_prompt: str | None = None,
    credentials: CredentialStore | None = None,
    compactor: Compactor | None = None,
    classifier: Classifier | None = None,
    session_id: str | None = None,
    extensions: Sequence[Extension | str | Path] = (),
    extension_timeout: float = DEFAULT_HANDLER_TIMEOUT,
    history: str | Path | SessionFile | None = None,
    models: Sequence[Model] = (),
    thinking_level: str | None = None,
    tracer_provider: Any = None,  # -- observe (issue 14) --
) -> AbstractAsyncContextManager[AgentSession]:
    """Open an ``AgentSession``; on exit, abort what runs and close it.

    An exception raised in the block comes out as itself, not wrapped in an
    exception group.

    Args:
        provider: the model provider (``FauxProvider`` in tests).
        model: a ``Model``, a model id (its provider is ``provider.name``), or
            omitted for providers that have a default (the faux provider).
        settings: a ``SettingsStore``, a ``Settings``, nested groups in
            settings-file form (``{"retry": {"maxRetries": 5}}``), or ``None`` for
            the defaults.
        tools: tools the model may call.
        system_prompt: sent with every request.
        credentials: where API keys come from; also told about usage limits (R-17).
        compactor: shrinks the context on overflow; ``SummarizingCompactor`` if
            omitted.
        classifier: overrides ``retry.classifier`` with any ``Classifier``.
        session_id: identifies the session to the credential store; random if
            omitted (a resumed ``history`` file's own id wins).
        extensions: ``Extension`` objects or paths of extension files; their
            handlers run in a task of this block, each bounded by
            ``extension_timeout`` (see ``trio_session._extensions``).
        extension_timeout: seconds one extension handler may run.
        history: a session file (JSON lines) to append every message to: a path —
            resumed if it exists (the context is rebuilt without retried errors),
            created if not — or an open ``SessionFile``. A prompt is on disk before
            its request goes out, and a run's messages before its ``agent_end`` (so
            before any backoff sleep). A resumed file's session id is the
            session's, and so are the model (if it is among ``models``) and the
            thinking level it last recorded.
        models: the models ``set_model`` / ``cycle_model`` switch between (they all
            use ``provider``).
        thinking_level: the starting thinking level (see ``AgentSession``).
        tracer_provider: the OpenTelemetry ``TracerProvider`` the session's spans go
            to (``trio-session[otel]``); the global one if omitted. See
            ``trio_session._tracing``.

    Returns:
        An async context manager; ``async with`` it to get the session.

    Example:
        ```python
        async with open_session(FauxProvider([FauxReply(text="Hi")])) as session:
            reply = await session.prompt("Hello")
        ```
    """
    if not extensions and (history is None or isinstance(history, SessionFile)):
        # The common block: a small object, not an async generator (whose frame would
        # hold every argument while the session lives).
        return _SessionBlock(
            provider,
            model,
            {
                "settings": settings,
                "tools": tools,
                "system_prompt": system_prompt,
                "credentials": credentials,
                "compactor": compactor if compactor is not None else _DEFAULT_COMPACTOR,
                "classifier": classifier,
                "session_id": (
                    history.header.id
                    if history is not None
                    else session_id
                    if session_id is not None
                    else uuid.uuid4().hex
                ),
                "history_file": history,
                "models": models,
                "thinking_level": thinking_level,
                "tracer_provider": tracer_provider,  # -- observe --
            },
        )
    return _open_session(
        provider,
        model,
        settings=settings,
        tools=tools,
        system_prompt=system_prompt,
        credentials=credentials,
        compactor=compactor,
        classifier=classifier,
        session_id=session_id,
        extensions=extensions,
        extension_timeout=extension_timeout,
        history=history,
        models=models,
        thinking_level=thinking_level,
        tracer_provider=tracer_provider,
    )


def _session_model(provider: Provider, model: Model | str | None) -> Model:
    """``open_session``'s ``model``: a ``Model``, an id of ``provider``'s, or its default."""
    if model is None:
        return _default_model(provider.name)
    if isinstance(model, str):
        return Model(id=model, provider=provider.name)
    return model


@functools.lru_cache(maxsize=64)
def _default_model(provider_name: str) -> Model:
    """A provider's default model, one per name (a ``Model`` is frozen: sessions share it)."""
    return Model(id=f"{provider_name}-model", provider=provider_name)


class _SessionBlock:
    """``open_session`` without extensions or a session file to open: the session is
    made on entering the block and closed on leaving it; nothing else is kept."""

    __slots__ = ("_arguments", "_model", "_provider", "_session")

    def __init__(
        self, provider: Provider, model: Model | str | None, arguments: dict[str, Any]
    ) -> None:
        self._provider: Provider | None = provider
        self._model = model
        self._arguments: dict[str, Any] | None = arguments
        self._session: AgentSession | None = None

    async def __aenter__(self) -> AgentSession:
        if self._provider is None or self._arguments is None:
            msg = "an open_session() block can be entered once"
            raise RuntimeError(msg)
        provider, arguments = self._provider, self._arguments
        model = _session_model(provider, self._model)
        self._provider = self._model = self._arguments = None
        self._session = AgentSession(provider=provider, model=model, **arguments)
        return self._session

    async def __aexit__(self, *exc_info: object) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()


@asynccontextmanager
async def _open_session(
    provider: Provider,
    model: Model | str | None,
    *,
    settings: SettingsStore | Settings | Mapping[str, Any] | None,
    tools: Sequence[Tool],
    system_prompt: str | None,
    credentials: CredentialStore | None,
    compactor: Compactor | None,
    classifier: Classifier | None,
    session_id: str | None,
    extensions: Sequence[Extension | str | Path],
    extension_timeout: float,
    history: str | Path | SessionFile | None,
    models: Sequence[Model],
    thinking_level: str | None,
    tracer_provider: Any,
) -> AsyncIterator[AgentSession]:
    """``open_session`` with extensions to run, or a session file to open."""
    loaded = [e if isinstance(e, Extension) else load_extension_file(e) for e in extensions]
    model = _session_model(provider, model)
    opened: AbstractAsyncContextManager[SessionFile | None] = (
        open_history(history, session_id=session_id)
        if history is not None and not isinstance(history, SessionFile)
        else _Given(history)
    )
    async with opened as history_file:
        if history_file is not None:
            session_id = history_file.header.id
        runner = None
        if loaded:
            runner = ExtensionRunner(
                loaded, report=lambda event: session._emit(event), handler_timeout=extension_timeout
            )
        session = AgentSession(
            provider=provider,
            model=model,
            settings=settings,
            tools=tools,
            system_prompt=system_prompt,
            credentials=credentials,
            compactor=compactor if compactor is not None else _DEFAULT_COMPACTOR,
            classifier=classifier,
            session_id=session_id if session_id is not None else uuid.uuid4().hex,
            extensions=runner,
            history_file=history_file,
            models=models,
            thinking_level=thinking_level,
            tracer_provider=tracer_provider,  # -- observe --
        )
        if runner is None:
            try:
                yield session
            finally:
                await session.aclose()
            return
        with _UNWRAPPED:
            async with trio.open_nursery() as nursery:
                runner.activate(session)
                await nursery.start(runner.run)
                try:
                    yield session
                finally:
                    await session.aclose()
                    runner.close()
