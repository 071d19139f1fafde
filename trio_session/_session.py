"""AgentSession: one conversation with a model, and the retry policy around it.

The session owns the scope tree of DESIGN.md::

    AgentSession.prompt()                 returns when this nursery closes (R-35)
    └── nursery (cancel scope = the run)  abort() / the caller's timeout cancel this
                                          (opened once a chain or compaction follows)
        ├── agent run
        └── retry chain task              exists ⇔ is_retrying (R-10)
            └── CancelScope (the chain)   abort_retry() cancels this

Nothing is reset "in a catch block": leaving a scope is the reset.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from ._agent import Agent, Tool
from ._classify import CLASSIFIERS, Classifier
from ._compaction import Compactor, SummarizingCompactor
from ._errors import EventStreamLagged, SessionBusyError, SessionClosedError
from ._events import (
    AutoCompactionEnd,
    AutoCompactionStart,
    HistoryWriteFailed,
    MessageEnd,
    SessionEvent,
)
from ._extensions import (
    DEFAULT_HANDLER_TIMEOUT,
    Extension,
    ExtensionRunner,
    load_extension_file,
)
from ._groups import unwrapped as _unwrapped
from ._messages import AssistantMessage, Message, UserMessage
from ._retry import Next, RetryChain
from ._settings import RetrySettings, Settings, SettingsStore
from ._text import valid_text
from .providers._base import Model, Provider
from .store._credentials import CredentialStore
from .store._history import HistoryError, runtime_context
from .store._session_file import SessionFile, open_history

logger = logging.getLogger("trio_session")

Subscriber = Callable[[SessionEvent], None]

#: Events an ``AgentSession.events`` stream buffers before it is dropped.
DEFAULT_EVENT_BUFFER = 4096


def _coerce_settings(value: SettingsStore | Settings | Mapping[str, Any] | None) -> SettingsStore:
    return SettingsStore.coerce(value)


@attrs.define(eq=False)
class EventStream:
    """An async iterator over session events, fed without ever blocking the session.

    Made by ``AgentSession.events``. If the consumer falls more than
    ``buffer`` events behind, the stream is disconnected: iteration yields what
    was buffered, then raises ``EventStreamLagged``.
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
    """

    _provider: Provider = attrs.field(alias="provider")
    _model: Model = attrs.field(alias="model")
    _settings: SettingsStore = attrs.field(
        default=None, converter=_coerce_settings, alias="settings"
    )
    _tools: Sequence[Tool] = attrs.field(default=(), alias="tools")
    _system_prompt: str | None = attrs.field(default=None, alias="system_prompt")
    _credentials: CredentialStore | None = attrs.field(default=None, alias="credentials")
    _compactor: Compactor = attrs.field(factory=SummarizingCompactor, alias="compactor")
    _classifier: Classifier | None = attrs.field(default=None, alias="classifier")
    session_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _extensions: ExtensionRunner | None = attrs.field(default=None, alias="extensions")
    _history_file: SessionFile | None = attrs.field(default=None, alias="history_file")

    _agent: Agent = attrs.field(init=False)
    _history: list[Message] = attrs.field(factory=list, init=False)
    _subscribers: list[Subscriber] = attrs.field(factory=list, init=False)
    _streams: list[EventStream] = attrs.field(factory=list, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _idle: trio.Event = attrs.field(factory=trio.Event, init=False)
    _run_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _chain: RetryChain | None = attrs.field(default=None, init=False)
    _next: Next = attrs.field(default=Next.DONE, init=False)
    _compacted: bool = attrs.field(default=False, init=False)
    _write_failed: bool = attrs.field(default=False, init=False)
    _session_name: str | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._idle.set()
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
        """
        self._set_setting("retry.enabled", enabled)

    @property
    def auto_compaction_enabled(self) -> bool:
        """``compaction.enabled``."""
        return self._settings.current.compaction.enabled

    def set_auto_compaction_enabled(self, enabled: bool) -> None:
        """Write ``compaction.enabled`` (R-50), like ``set_auto_retry_enabled``."""
        self._set_setting("compaction.enabled", enabled)

    def _set_setting(self, key: str, value: Any) -> None:
        self._settings.set_and_persist(key, value)
        if self._history_file is not None:
            self._history_file.append_settings_change_nowait(key, value)

    # -- events --------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, synchronously and in order.

        A callback must not block; an exception in it is logged and ignored.

        Returns:
            A function that unsubscribes (safe to call twice).
        """
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    @contextmanager
    def events(self, *, buffer: int = DEFAULT_EVENT_BUFFER) -> Iterator[EventStream]:
        """Subscribe as an async iterator::

            with session.events() as events:
                async for event in events:
                    ...

        Delivery never waits for the consumer: past ``buffer`` unread events the
        stream is dropped and raises ``EventStreamLagged`` (R-34).
        """
        send, receive = trio.open_memory_channel[SessionEvent](buffer)
        stream = EventStream(send, receive)
        self._streams.append(stream)
        try:
            yield stream
        finally:
            if stream in self._streams:
                self._streams.remove(stream)
            send.close()
            receive.close()

    def _emit(self, event: SessionEvent) -> None:
        for callback in tuple(self._subscribers):
            try:
                callback(event)
            except Exception:
                logger.exception("session event subscriber %r raised", callback)
        for stream in tuple(self._streams):
            if not stream._push(event):
                self._streams.remove(stream)
        if self._extensions is not None:
            self._extensions.deliver(event)

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
                    self._chain.succeed(self)  # R-23, R-23a: after message_end, before turn_end

    # -- prompting -----------------------------------------------------------

    async def prompt(self, text: str) -> AssistantMessage:
        """Send a user message and run until the logical prompt is over.

        That includes every retry re-attempt and any overflow compaction: the
        retry chain is a child of this call's nursery, so this returns only when
        it has ended (R-35). Errors from the model are not raised; look at the
        returned message's ``stop_reason`` and ``error_message``.

        With a session file, the user message is on disk before the request goes
        out, and every run's messages before the next request or backoff sleep.

        Text that cannot be sent (a lone surrogate: half of a character, as a
        JavaScript client that cut an emoji in two sends it) is made valid here:
        each such code point becomes U+FFFD, with a warning logged.

        Raises:
            SessionBusyError: another prompt is running (R-36).
            SessionClosedError: the session's ``open_session`` block has exited.
            HistoryError: the session file could not be written. The prompt ended
                there (no request goes out with a context that is not on disk), a
                ``history_write_failed`` event was emitted, and the session is idle
                again: what was not written stays staged for the next flush.
        """
        if self._closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        if self._running:
            msg = "the session is already processing a prompt; await it or abort() first"
            raise SessionBusyError(msg)
        text, replaced = valid_text(text)
        if replaced:
            logger.warning(
                "prompt text held %d lone surrogate code point(s) (half of a character); "
                "replaced with U+FFFD",
                replaced,
            )
        self._running = True
        self._idle = trio.Event()
        self._write_failed = False
        try:
            with trio.CancelScope() as self._run_scope, _unwrapped():
                user = UserMessage(text)
                if self._history_file is not None:
                    await self._stage_prompt(self._history_file, user)
                last = await self._agent.prompt(user, will_continue=self._decide)
                if self._next is not Next.DONE:
                    # A chain or a compaction follows: they run in the prompt's nursery,
                    # opened only now, so a turn that succeeds first time pays for none.
                    async with trio.open_nursery() as self._nursery:
                        await self._settle(last)
        finally:
            try:
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
                self._idle.set()
        return self._last_assistant()

    def abort_retry(self) -> None:
        """Cancel the retry chain, if one is alive (R-29).

        In the backoff sleep, or while the re-attempt streams (R-31), the chain's
        scope is cancelled and it emits ``auto_retry_end {success: false,
        finalError: "Retry cancelled"}`` (R-30). The prompt then returns.
        """
        if self._chain is not None:
            self._chain.cancel()

    def retry_now(self) -> bool:
        """Skip the rest of the current backoff sleep (R-34a).

        Returns:
            Whether a sleep was cut short.
        """
        return self._chain is not None and self._chain.alive and self._chain.skip_wait()

    async def abort(self) -> None:
        """Cancel any retry, then the running prompt; return when the session is idle (R-32)."""
        self.abort_retry()
        if self._run_scope is not None:
            self._run_scope.cancel(reason="session aborted")
        await self._idle.wait()

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
        leftover = await chain.run(self, error)
        if leftover is not None:
            await self._settle(leftover)

    async def _compact(self, message: AssistantMessage, *, resume: bool) -> AssistantMessage:
        """The overflow path (R-50): drop the error, compact, continue once."""
        self._next = Next.DONE
        if resume:
            self.drop_from_context(message)
            self._compacted = True
        self._emit(AutoCompactionStart(reason="overflow"))
        try:
            compaction = await self._compactor.compact(
                self.messages,
                model=self._model,
                settings=self._settings.current.compaction,
                ask=self._agent.complete,
            )
        except BaseException:
            self._emit(AutoCompactionEnd(result=None, aborted=True, will_retry=False))
            raise
        if compaction is None:
            self._emit(AutoCompactionEnd(result=None, aborted=False, will_retry=False))
            return message
        self._agent.messages[:] = compaction.messages
        if self._history_file is not None:
            kept = next(
                filter(None, map(self._history_file.entry_id_of, compaction.messages)), None
            )
            self._history_file.append_compaction_nowait(compaction.result, first_kept_entry_id=kept)
        self._emit(AutoCompactionEnd(result=compaction.result, aborted=False, will_retry=resume))
        if not resume:
            return message
        return await self._agent.continue_(will_continue=self._decide)

    # -- RetryHost ----------------------------------------------------------------

    @property
    def retry_settings(self) -> RetrySettings:
        """The ``retry`` group, read fresh (R-11)."""
        return self._settings.current.retry

    @property
    def next_step(self) -> Next:
        """What the last run's ``agent_end`` decided."""
        return self._next

    def emit(self, event: SessionEvent) -> None:
        """Deliver a session event to every subscriber."""
        self._emit(event)

    def drop_from_context(self, message: AssistantMessage) -> None:
        """Remove ``message`` from the end of the runtime context (R-20); history keeps it."""
        if self._agent.messages and self._agent.messages[-1] is message:
            self._agent.messages.pop()

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        """R-17: report a usage limit; True if the store moved us to another credential."""
        if self._credentials is None:
            return False
        return await self._credentials.mark_usage_limit_reached(
            self._provider.name,
            self.session_id,
            retry_after_ms=hint_ms,
            base_url=self._model.base_url,
        )

    async def reattempt(self) -> AssistantMessage:
        """Continue the agent on the context as it is (R-22)."""
        return await self._agent.continue_(will_continue=self._decide)

    # -- internals ------------------------------------------------------------------

    async def _api_key(self) -> str | None:
        assert self._credentials is not None
        return await self._credentials.api_key(self._provider.name, self.session_id)

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
        if self._running:
            with trio.CancelScope(shield=True):
                await self.abort()
        for stream in self._streams:
            stream._close()
        self._streams.clear()
        # The agent's emit is our bound method: a reference cycle. Cut it, so a closed
        # session is freed by reference counting rather than a later full collection.
        self._agent.emit = _discard

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
        """
        name = name.strip()
        if self._history_file is not None:
            self._history_file.append_session_info_nowait(name)
        self._session_name = name or None

    def fork_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message of the session file, in file order.

        The reference's ``getUserMessagesForForking``: the messages a fork can start
        before. Empty without a session file (there are no entry ids to name).
        """
        if self._history_file is None:
            return []
        return self._history_file.user_messages()


def _discard(event: SessionEvent) -> None:
    """Where a closed session's agent sends its (no longer expected) events."""


@asynccontextmanager
async def open_session(
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
) -> AsyncIterator[AgentSession]:
    """Open an ``AgentSession``; on exit, abort what runs and close it.

    ``model`` may be a ``Model``, a model id (its provider is ``provider.name``),
    or omitted for providers that have a default (the faux provider).

    ``extensions`` are ``Extension`` objects or paths of extension files; their
    handlers run in a task of this block, each bounded by ``extension_timeout``
    seconds (see ``trio_session._extensions``). An exception raised in the block
    comes out as itself, not wrapped in an exception group.

    ``history`` is a session file (JSON lines) to append every message to: a path —
    resumed if it exists (the context is rebuilt without retried errors), created if
    not — or an open ``SessionFile``. A prompt is on disk before its request goes
    out, and a run's messages before its ``agent_end`` (so before any backoff sleep). A
    resumed file's session id is the session's.

    Example::

        async with open_session(FauxProvider([FauxReply(text="Hi")])) as session:
            reply = await session.prompt("Hello")
    """
    loaded = [e if isinstance(e, Extension) else load_extension_file(e) for e in extensions]
    if model is None:
        model = Model(id=f"{provider.name}-model", provider=provider.name)
    elif isinstance(model, str):
        model = Model(id=model, provider=provider.name)
    async with contextlib.AsyncExitStack() as stack:
        history_file: SessionFile | None = None
        if isinstance(history, SessionFile):
            history_file = history
        elif history is not None:
            history_file = await stack.enter_async_context(
                open_history(history, session_id=session_id)
            )
        if history_file is not None:
            session_id = history_file.header.id
        runner = None
        if loaded:
            runner = ExtensionRunner(
                loaded, report=lambda event: session.emit(event), handler_timeout=extension_timeout
            )
        session = AgentSession(
            provider=provider,
            model=model,
            settings=settings,
            tools=tools,
            system_prompt=system_prompt,
            credentials=credentials,
            compactor=compactor if compactor is not None else SummarizingCompactor(),
            classifier=classifier,
            session_id=session_id if session_id is not None else uuid.uuid4().hex,
            extensions=runner,
            history_file=history_file,
        )
        if runner is None:
            try:
                yield session
            finally:
                await session.aclose()
            return
        with _unwrapped():
            async with trio.open_nursery() as nursery:
                runner.activate(session)
                await nursery.start(runner.run)
                try:
                    yield session
                finally:
                    await session.aclose()
                    runner.close()
