"""AgentSession: one conversation with a model, and the retry policy around it — a facade.

``AgentSession`` is the public face; what it does is done by named collaborators, each
in its own module:

| collaborator | module | what it holds |
|---|---|---|
| ``PromptController`` | ``_retry/controller.py`` | the prompt running (``_retry/run.py``) |
| ``KeyRing`` | ``_retry/keys.py`` | credentials: keys, rotation, cooldowns |
| ``EventHub`` | ``_session_parts/hub.py`` | observer, subscribers, streams, extensions |
| ``Journal`` | ``_session_parts/journal.py`` | the history and the session file's writes |
| ``Compaction`` | ``_session_parts/compaction.py`` | manual and overflow compaction |

and the public methods of queues, models and thinking, bash, records (stats, export, name)
and switches (auto-retry, auto-compaction) come from the ``*Part`` base classes beside
them. A prompt's scope tree is drawn in ``trio_session._retry`` and docs/architecture.md.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Literal, overload

import attrs
import trio

from ._agent import Agent
from ._classes import define
from ._compaction import Compactor, SummarizingCompactor
from ._events import MessageEnd, SessionEvent
from ._extension_runner import ExtensionRunner
from ._logging import SessionObserver
from ._messages import AssistantMessage, ImageContent, Message, UserMessage
from ._rate_budget import RateGate
from ._retry.classify import Classifier
from ._retry.controller import PromptController
from ._session_parts.bash import BashPart
from ._session_parts.compaction import Compaction, CompactPart
from ._session_parts.hub import (
    DEFAULT_EVENT_BUFFER,
    EventHub,
    EventStream,
    Subscriber,
    discard,
)
from ._session_parts.idle import IdlePart
from ._session_parts.journal import Journal
from ._session_parts.models import ModelsPart, models_tuple
from ._session_parts.queues import QueuesPart
from ._session_parts.records import RecordsPart
from ._session_parts.switches import SwitchesPart
from ._settings import Settings, SettingsStore, coerce_settings
from ._stream import ReplyStream, open_reply_stream
from ._text import valid_text
from .providers._base import Model, Provider

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ._bash import BashRun
    from ._retry.keys import KeyRing
    from ._tools import Tool  # a type only: a session without tools imports no schema code
    from .store._credentials import CredentialStore
    from .store._session_file import SessionFile

__all__ = ["DEFAULT_COMPACTOR", "AgentSession", "EventStream"]

logger = logging.getLogger("trio_session")

#: The compactor of a session given none (frozen and stateless: sessions share it).
DEFAULT_COMPACTOR = SummarizingCompactor()


@define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class AgentSession(
    QueuesPart, ModelsPart, BashPart, RecordsPart, SwitchesPart, IdlePart, CompactPart
):
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
        fallback_models: tried in order, one prompt at a time, when the retry policy has
            nothing left to try on the model (R-65 … R-67); none if omitted.
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
        default=None, converter=coerce_settings, alias="settings"
    )
    _tools: Sequence[Tool] = attrs.field(default=(), alias="tools")
    _system_prompt: str | None = attrs.field(default=None, alias="system_prompt")
    _credentials: CredentialStore | None = attrs.field(default=None, alias="credentials")
    _compactor: Compactor = attrs.field(
        default=attrs.Factory(lambda: DEFAULT_COMPACTOR), alias="compactor"
    )
    _classifier: Classifier | None = attrs.field(default=None, alias="classifier")
    session_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _extensions: ExtensionRunner | None = attrs.field(default=None, alias="extensions")
    _history_file: SessionFile | None = attrs.field(default=None, alias="history_file")
    _models: tuple[Model, ...] = attrs.field(default=(), converter=models_tuple, alias="models")
    _fallback_models: tuple[Model, ...] = attrs.field(
        default=(), converter=models_tuple, alias="fallback_models"
    )
    _preferred_thinking: str | None = attrs.field(default=None, alias="thinking_level")
    _tracer_provider: TracerProvider | None = attrs.field(default=None, alias="tracer_provider")
    # -- the collaborators ---------------------------------------------------------
    _observer: SessionObserver = attrs.field(init=False)
    _hub: EventHub = attrs.field(init=False)
    _journal: Journal = attrs.field(init=False)
    _agent: Agent = attrs.field(init=False)
    _compaction: Compaction = attrs.field(init=False)
    _bash_run: BashRun | None = attrs.field(default=None, init=False)
    _control: PromptController = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        # A provider's own secrets (an HTTP provider's ``api_key=``), so that no record or
        # span shows them; ``secrets()`` is optional (see ``Provider``).
        secrets = getattr(self._provider, "secrets", None)
        observer = self._observer = SessionObserver.install(
            self,
            self._tracer_provider,
            provider_secrets=secrets() if callable(secrets) else (),
            classifier=self._classifier,
        )
        hub = self._hub = EventHub(observer, self._extensions)
        if self._extensions is not None:
            self._extensions.report = hub.emit  # extension_error events
        file = self._history_file
        context: list[Message] = []  # the runtime context: the agent's, the journal's
        journal = self._journal = Journal(file, hub, context)
        agent = self._agent = Agent(
            provider=self._provider,
            model=self._model,
            emit=self._on_agent_event,
            tools=self._tools,
            system_prompt=self._system_prompt,
            # what a run produced is on disk before the next request
            checkpoint=journal.flush if file is not None else None,
            messages=context,
            timeouts=self._settings.provider_timeouts,  # retry.provider.*, however set
            rate_gate=RateGate(self._settings, self._credentials),  # rateLimit
        )
        settings = self._settings
        self._compaction = Compaction(
            self._compactor, agent, settings, file, hub, classifier=self._classifier
        )
        keys: KeyRing | None = None
        if self._credentials is not None:
            from ._retry.keys import KeyRing  # only with a store: no storage code otherwise

            keys = KeyRing(
                self._credentials, self._provider.name, self.session_id, agent, settings, observer
            )
        self._control = PromptController(
            agent,
            settings,
            hub,
            journal,
            self._compaction,
            observer,
            classifier=self._classifier,
            keys=keys,
        )
        if keys is not None:  # the ring needs the agent (its model's base URL names a key)
            agent.key_source = keys.api_key
        loaded = file.loaded if file is not None else None
        if loaded is not None:
            journal.resume(loaded)
        if file is not None and settings.current.retry.profile == "pi-1.6":
            agent.system_prompt = journal.keep_system(self._system_prompt, self._tools)
        self._init_models_and_thinking(loaded)
        current = settings.current
        agent.steering.mode = current.steering_mode  # settings steeringMode / followUpMode
        agent.follow_ups.mode = current.follow_up_mode
        if file is not None and file.loaded is None and file.leaf_id is None:
            # A new file starts as the reference's do: the model and the thinking level.
            file.append_model_change_nowait(self._model.provider, self._model.id)
            file.append_thinking_level_change_nowait(agent.thinking_level)

    def __repr__(self) -> str:
        """A few fields, of constant size: id, model, and what runs."""
        return (
            f"<AgentSession {self.session_id[:12]!r} "
            f"{self._model.provider}/{self._model.id[:40]} "
            f"running={self.is_running} retrying={self.is_retrying} "
            f"messages={len(self._agent.messages)}>"
        )

    @property
    def history_file(self) -> SessionFile | None:
        """The session file entries are appended to, if the session has one."""
        return self._history_file

    # What tests of issue 15 look at: the lists a session makes only once it needs them.
    @property
    def _subscribers(self) -> list[Subscriber] | None:
        return self._hub.subscribers

    @property
    def _streams(self) -> list[EventStream] | None:
        return self._hub.streams

    @property
    def _joined(self) -> Sequence[UserMessage] | None:
        return self._control.joined

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
        return tuple(self._journal.messages)

    @property
    def is_running(self) -> bool:
        """Whether a prompt is in progress (including its retries and compaction)."""
        return self._control.running

    @property
    def is_retrying(self) -> bool:
        """Whether a retry chain is alive (R-10, R-37)."""
        return self._control.live_chain is not None

    @property
    def is_waiting_to_retry(self) -> bool:
        """Whether a retry chain waits out its backoff (nothing streams meanwhile).

        False from the moment the wait is over — its delay passed, ``retry_now``,
        ``join_retry`` or ``abort_retry`` — even before the chain's task has woken."""
        chain = self._control.live_chain
        return chain is not None and chain.waiting

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
        if not self.is_waiting_to_retry:
            return False
        text, replaced = valid_text(text)
        if replaced:
            logger.warning("prompt text held %d lone surrogate code point(s); replaced", replaced)
        return self._control.join(UserMessage.of(text, tuple(images)))

    @property
    def retry_attempt(self) -> int:
        """The current retry attempt, 1-based; 0 when no chain is alive (R-9)."""
        chain = self._control.live_chain
        return chain.attempt if chain is not None else 0

    # -- events --------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, synchronously and in order.

        A callback must not block; an exception in it is logged and ignored.

        Args:
            callback: called with each event, in the task that emits it.

        Returns:
            A function that unsubscribes (safe to call twice).
        """
        return self._hub.subscribe(callback)

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
        with self._hub.events(buffer) as stream:
            yield stream

    def _on_agent_event(self, event: SessionEvent) -> None:
        """The agent's events: delivered, and each ``message_end`` recorded in the history."""
        self._hub.emit(event)
        if isinstance(event, MessageEnd):
            self._journal.record(event.message)

    # -- prompting -----------------------------------------------------------

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        raise_on_error: bool = False,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
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

        Started with ``await nursery.start(functools.partial(session.prompt, text))``,
        it reports itself started once the prompt is accepted and on disk, just before
        its run's first event (pi's "preflight"); a prompt that cannot start raises
        from ``start`` instead (``SessionBusyError``, ``HistoryError``).

        Text that cannot be sent (a lone surrogate: half of a character, as a
        JavaScript client that cut an emoji in two sends it) is made valid here:
        each such code point becomes U+FFFD, with a warning logged.

        Args:
            text: the user message's text.
            images: images sent after the text, in order.
            raise_on_error: raise the ``ProviderError`` the prompt ended in, instead
                of returning the error message.
            task_status: told once the prompt has started (``nursery.start``).

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
        self._control.refuse()
        text, replaced = valid_text(text)
        if replaced:
            logger.warning(
                "prompt text held %d lone surrogate code point(s) (half of a character); "
                "replaced with U+FFFD",
                replaced,
            )
        self._start_busy()
        try:
            await self._control.begin().run(UserMessage.of(text, tuple(images)), task_status)
        finally:
            await self._control.end(settle=True)
        reply = self._journal.last_assistant()
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

        ``async for text in reply`` yields ``str`` pieces that join to the prompt's
        reply text — across every retry re-attempt and compaction — never a failed
        attempt's text (each message's text comes once it has ended well); the texts of
        a reply's several messages (a tool turn, then the answer) are joined by a blank
        line, ``"\n\n"``, so they read as paragraphs; it ends
        exactly when ``prompt()`` would return, and then ``reply.reply`` is the final
        message. ``reply.items()`` yields the text live instead, with a
        ``ReplyRestart`` when an attempt that had text is thrown away. With
        ``events=True`` it yields every ``SessionEvent`` of the prompt.

        The prompt runs in a nursery of the block. Leaving the block before the
        prompt is over cancels it (recorded as aborted) and waits for it; so does
        cancelling the caller's scope. Either way nothing is left running:

        ```python
        async with session.stream("Explain backoff") as reply:
            async for text in reply:
                print(text, end="", flush=True)
        print(reply.reply.usage)
        ```

        Args:
            text: the user message's text.
            images: images sent after the text, in order.
            events: yield every ``SessionEvent`` of the prompt instead of text.
            raise_on_error: raise the ``ProviderError`` the prompt ended in (from the
                iteration, or on leaving the block), as ``prompt`` does.

        Returns:
            An async context manager whose ``ReplyStream`` yields the text (or
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
            self,
            text,
            images=images,
            events=events,
            raise_on_error=raise_on_error,
            refuse=self._control.refuse,  # closed, or busy
        )

    def abort_retry(self) -> None:
        """Cancel the retry chain, if one is alive (R-29).

        In the backoff sleep, or while the re-attempt streams (R-31), the chain is cancelled
        and emits ``auto_retry_end {success: false, finalError: "Retry cancelled"}`` (R-30).
        """
        # Straight to the chain: its Cancelled keeps this call's frames until delivered.
        if (chain := self._control.chain) is not None:
            chain.cancel()

    async def wait_for_retry_end(self) -> None:
        """Return once no retry chain is alive: after ``abort_retry``, once its
        ``auto_retry_end`` has been emitted."""
        await self._control.wait_for_retry_end()

    def retry_now(self) -> bool:
        """Skip the rest of the current backoff sleep (R-34a).

        Returns:
            Whether a sleep was cut short.
        """
        return self._control.retry_now()

    async def abort(self) -> None:
        """Cancel any retry, then the running prompt; return when the session is idle (R-32)."""
        await self._control.abort()

    async def aclose(self) -> None:
        """Abort any running prompt, end every event stream, refuse new prompts.

        Idempotent.
        """
        self._control.closed = True
        self.abort_bash()
        if self._control.running:
            with trio.CancelScope(shield=True):
                await self.abort()
        self._hub.close()
        # The agent's emit is our bound method: a reference cycle. Cut it, so a closed
        # session is freed by reference counting rather than a later full collection.
        self._agent.emit = discard
