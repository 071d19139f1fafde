"""AgentSession: one conversation with a model, and the retry policy around it — a facade.

``AgentSession`` is the public face. It holds named collaborators, each made in
``__attrs_post_init__`` with what it needs, and each public member says what it does
and hands the work to the one that owns it:

| collaborator | module | what it holds |
|---|---|---|
| ``Agent`` | ``_agent/loop.py`` | the runtime context, the queues, the request loop |
| ``PromptController`` | ``_retry/controller.py`` | the prompt running (``_retry/run.py``) |
| ``KeyRing`` | ``_retry/keys.py`` | credentials: keys, rotation, cooldowns |
| ``EventHub`` | ``_session/hub.py`` | observer, subscribers, streams, extensions |
| ``Journal`` | ``_session/journal.py`` | the history and the session file's writes |
| ``Compaction`` | ``_session/compaction.py`` | manual and overflow compaction |
| ``ModelChoice`` | ``_session/models.py`` | the model and the thinking level |
| ``BashCommands`` | ``_session/bash.py`` | the user's ``bash`` commands |

No collaborator reads the facade: what one needs of another it is given when it is
made. A prompt's scope tree is drawn in ``trio_session._retry`` and
docs/architecture.md.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

import attrs
import trio

from .._agent.compactors import Compactor, SummarizingCompactor
from .._agent.loop import Agent, MessageQueue, QueueMode, queue_mode
from .._agent.rate_budget import RateGate
from .._core.classes import define
from .._core.errors import SessionClosedError
from .._core.events import CompactionResult, SessionEvent, SessionInfoChanged
from .._core.messages import AssistantMessage, ImageContent, Message, TextContent, UserMessage
from .._core.stats import SessionStats, session_stats
from .._core.text import valid_text
from .._observe.log_records import SessionObserver
from .._retry.classify import Classifier
from .._retry.controller import PromptController
from .._retry.profile import is_pi16
from .._settings.store import Settings, SettingsStore, coerce_settings
from ..providers._base import Model, Provider, supported_thinking_levels
from .bash import BashCommands
from .compaction import Compaction
from .extension_runner import ExtensionRunner
from .hub import DEFAULT_EVENT_BUFFER, EventHub, EventStream, Subscriber
from .journal import Journal
from .models import ModelChoice, models_tuple, remember
from .stream import ReplyStream, open_reply_stream

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._agent.tools import Tool  # a type only: a session without tools imports no schema code
    from .._retry.fallback import Fallbacks
    from .._retry.keys import KeyRing
    from ..store._credentials import CredentialStore
    from ..store._session_file import SessionFile
    from .bash_run import BashResult

__all__ = ["DEFAULT_COMPACTOR", "AgentSession", "EventStream"]

logger = logging.getLogger("trio_session")

#: The compactor of a session given none (frozen and stateless: sessions share it).
DEFAULT_COMPACTOR = SummarizingCompactor()


@define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
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
        fallback_models: tried in order, one prompt at a time, when the retry policy has
            nothing left to try on the model (R-65 … R-67); none if omitted.
        thinking_level: the starting thinking level; ``"medium"`` (the reference's
            default) if omitted, clamped to the model (``"off"`` unless it reasons).
        tracer_provider: the OpenTelemetry ``TracerProvider`` for the session's spans;
            the global one if omitted (see ``trio_session._observe.tracing``).
        extensions: the loaded extensions, given every event; none if omitted.
        history_file: the session file entries are appended to; none is written if omitted.
    """

    _provider: Provider = attrs.field(alias="provider")
    _model: Model = attrs.field(alias="model")  # as made; the current one is _choice's
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
    _control: PromptController = attrs.field(init=False)
    _choice: ModelChoice = attrs.field(init=False)
    # made by the first ``bash()``: most sessions run none (a session in backoff is small)
    _bash: BashCommands | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        # Each collaborator is made with what it needs, in the order they need each
        # other: the events first, then the history, then the agent, then what acts on it.
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
        settings = self._settings
        current = settings.current
        context: list[Message] = []  # the runtime context: the agent's, the journal's
        journal = self._journal = Journal(file, hub, context)
        loaded = file.loaded if file is not None else None
        if loaded is not None:
            journal.resume(loaded)
        system_prompt = self._system_prompt
        if file is not None and is_pi16(current.retry):  # pi 1.6.0 keeps it in the file
            system_prompt = journal.keep_system(system_prompt, self._tools)
        keys: KeyRing | None = None
        if self._credentials is not None:
            from .._retry.keys import KeyRing  # only with a store: no storage code otherwise

            keys = KeyRing(
                self._credentials, self._provider.name, self.session_id, settings, observer
            )
        agent = self._agent = Agent(
            provider=self._provider,
            model=self._model,
            emit=journal.deliver,  # delivered, and each message_end kept in the history
            tools=self._tools,
            system_prompt=system_prompt,
            key_source=keys.api_key if keys is not None else None,
            # what a run produced is on disk before the next request
            checkpoint=journal.flush if file is not None else None,
            messages=context,
            steering=MessageQueue(current.steering_mode),  # settings steeringMode
            follow_ups=MessageQueue(current.follow_up_mode),  # and followUpMode
            timeouts=settings.provider_timeouts,  # retry.provider.*, however set
            rate_gate=RateGate(settings, self._credentials),  # rateLimit
        )
        self._compaction = Compaction(
            self._compactor, agent, settings, file, hub, classifier=self._classifier
        )
        fallbacks: Fallbacks | None = None
        if self._fallback_models:
            from .._retry.fallback import Fallbacks  # only with fallback models

            fallbacks = Fallbacks(self._fallback_models)
        self._control = PromptController(
            agent,
            settings,
            hub,
            journal,
            self._compaction,
            observer,
            classifier=self._classifier,
            keys=keys,
            fallbacks=fallbacks,
        )
        choice = self._choice = ModelChoice(
            self._model, agent, settings, hub, journal, self._models, self._preferred_thinking
        )
        choice.resume(loaded)  # the model and thinking level the file last recorded
        if file is not None and loaded is None and file.leaf_id is None:
            # A new file starts as the reference's do: the model and the thinking level.
            file.append_model_change_nowait(self._model.provider, self._model.id)
            file.append_thinking_level_change_nowait(agent.thinking_level)

    def __repr__(self) -> str:
        """A few fields, of constant size: id, model, and what runs."""
        return (
            f"<AgentSession {self.session_id[:12]!r} "
            f"{self.model.provider}/{self.model.id[:40]} "
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
        return self._choice.current

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
        self._control.start()
        try:
            await self._control.begin().run(UserMessage.of(text, tuple(images)), task_status)
        finally:
            await self._control.end(settle=True)
        reply = self._journal.last_assistant()
        if raise_on_error:
            reply.raise_for_error(self.model.context_window)
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

    # -- queues (R-36a): the agent's, delivered after a turn or when a run would stop ---

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
        self._agent.steering.mode = queue_mode(mode)
        remember(self._settings, "steeringMode", mode)

    def set_follow_up_mode(self, mode: str) -> None:
        """Set ``follow_up_mode`` (``ValueError`` for anything but the two modes); saved
        as the settings' ``followUpMode``.

        Args:
            mode: ``"all"`` or ``"one-at-a-time"``, as for ``set_steering_mode``.
        """
        self._agent.follow_ups.mode = queue_mode(mode)
        remember(self._settings, "followUpMode", mode)

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
        self._hub.emit(self._agent.queue_update())
        return taken

    def _queue(self, queue: MessageQueue, text: str, images: Sequence[ImageContent]) -> None:
        if self._control.closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        text, replaced = valid_text(text)
        if replaced:
            logger.warning("queued text held %d lone surrogate code point(s); replaced", replaced)
        queue.messages.append(UserMessage.of(text, tuple(images)))
        self._hub.emit(self._agent.queue_update())

    # -- models and thinking levels (``ModelChoice``) --------------------------------

    @property
    def available_models(self) -> tuple[Model, ...]:
        """The models ``set_model`` and ``cycle_model`` move between: ``models``, with
        the session's model first if it is not among them."""
        return self._choice.available

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
        await self._choice.switch(model, idle=not self._control.running)

    async def cycle_model(self) -> Model | None:
        """Switch to the model after the current one in ``available_models`` (wrapping).

        Returns:
            The new model, or ``None`` when there is only one model (nothing changes).
        """
        model = self._choice.next_model()
        if model is not None:
            await self.set_model(model)
        return model

    @property
    def thinking_level(self) -> str:
        """The thinking level requests are sent with (one of ``THINKING_LEVELS``)."""
        return self._agent.thinking_level

    @property
    def available_thinking_levels(self) -> tuple[str, ...]:
        """The levels the current model supports: ``("off",)`` unless it reasons."""
        return supported_thinking_levels(self.model)

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
        self._choice.set_thinking_level(level)

    def cycle_thinking_level(self) -> str | None:
        """Move to the next level the model supports (wrapping to ``"off"``).

        Returns:
            The new level, or ``None`` when the model does not reason (nothing changes).
        """
        level = self._choice.next_thinking_level()
        if level is not None:
            self._choice.set_thinking_level(level)
        return level

    # -- bash (``BashCommands``) ----------------------------------------------------

    @property
    def is_bash_running(self) -> bool:
        """Whether a ``bash`` command is running."""
        return self._bash is not None and self._bash.running is not None

    async def bash(
        self,
        command: str,
        *,
        exclude_from_context: bool = False,
        on_output: Callable[[str], None] | None = None,
    ) -> BashResult:
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
            on_output: called with each piece of output as it comes (RPC's
                ``bash_execution_update``); the result holds the whole (or its tail).

        Returns:
            What the command did: its output, exit code, and whether it was cancelled
                or cut short.

        Raises:
            SessionBusyError: another ``bash`` command is running.
            SessionClosedError: the session is closed.
            OSError: the shell could not be started.
        """
        if self._bash is None:
            self._bash = BashCommands(self._journal, self._control)
        return await self._bash.run(
            command, exclude_from_context=exclude_from_context, on_output=on_output
        )

    def abort_bash(self) -> None:
        """Stop the running ``bash`` command, if any: its process group is killed and its
        result is ``cancelled``."""
        if self._bash is not None:
            self._bash.abort()

    # -- compaction (``Compaction``) ------------------------------------------------

    @property
    def is_compacting(self) -> bool:
        """Whether a compaction (manual or on overflow) is running."""
        return self._compaction.running

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult:
        """Compact the runtime context now, as the reference's ``compact`` does.

        A running prompt is aborted first (as the reference does). Emits
        ``compaction_start {reason: "manual"}`` and ``compaction_end``; the
        compaction is recorded in the session file. ``custom_instructions`` go to
        compactors whose ``compact`` takes a ``custom_instructions`` argument
        (``SummarizingCompactor`` adds them to its summary request). ``abort()``
        cancels it — its summary request and the request's retries with it.

        Args:
            custom_instructions: what the summary should focus on, for compactors that
                take them.

        Returns:
            What the compaction did: the summary, the estimated tokens before and
                after, how many messages left the context.

        Raises:
            CompactionError: nothing to compact, or it was cancelled by ``abort()``
                (``"Compaction cancelled"``, pi's words); the context is unchanged.
            SessionClosedError: the session's block has exited.
        """
        return await self._compaction.manual(self._control, custom_instructions)

    # -- records: stats, export, name, fork points ----------------------------------

    def stats(self) -> SessionStats:
        """Counts, token totals, cost and context use of the runtime context
        (the reference's ``get_session_stats``)."""
        file = self._journal.file
        return session_stats(
            self._agent.messages,
            session_id=self.session_id,
            session_file=str(file.path) if file is not None else None,
            context_window=self.model.context_window,
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
        from .._export import default_export_path, render_html, write_html  # when asked

        file = self._journal.file
        target = (
            Path(path)
            if path is not None
            else default_export_path(self.session_id, file.path if file is not None else None)
        )
        page = render_html(
            self._journal.messages,
            session_id=self.session_id,
            model=f"{self.model.provider}/{self.model.id}",
            system_prompt=self._system_prompt,
        )
        return await write_html(target, page)

    @property
    def session_file(self) -> Path | None:
        """The path of the session file, ``None`` if the session keeps none."""
        return self._journal.file.path if self._journal.file is not None else None

    @property
    def session_name(self) -> str | None:
        """The session's display name (the last ``session_info`` entry); ``None`` if unset."""
        return self._journal.name

    def set_session_name(self, name: str) -> None:
        """Set the display name (trimmed; an empty name clears it).

        With a session file a ``session_info`` entry is staged, written with the
        next flush (the next prompt, or closing the session).

        Args:
            name: the display name; blank clears it.
        """
        name = name.strip()
        if self._journal.file is not None:
            self._journal.file.append_session_info_nowait(name)
        self._journal.name = name or None
        self._hub.emit(SessionInfoChanged(name=self._journal.name))

    def fork_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message of the session file, in file order.

        The reference's ``getUserMessagesForForking``: the messages a fork can start
        before. Empty without a session file (there are no entry ids to name).
        """
        if self._journal.file is None:
            return []
        return self._journal.file.user_messages()

    # -- switches: auto-retry and auto-compaction, the store's status ---------------

    @property
    def is_rate_limited(self) -> bool:
        """Whether a request waits for its ``rateLimit`` permit now (R-69)."""
        gate = self._agent.rate_gate
        return gate is not None and gate.waiting

    @property
    def credential_store_status(self) -> str | None:
        """The credential store's ``status`` when it reports one: a Redis store says
        ``"redis"``, or ``"local-fallback"`` while Redis cannot be reached."""
        status = getattr(self._credentials, "status", None)
        return status if isinstance(status, str) else None

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

    def _set_setting(self, key: str, value: bool) -> None:
        self._settings.set_and_persist(key, value)
        if self._journal.file is not None:
            self._journal.file.append_settings_change_nowait(key, value)

    # -- idle: what still runs, said by name -----------------------------------------

    def busy_with(self) -> tuple[str, ...]:
        """What the session is still doing, one phrase each; empty when it is idle.

        A service with many sessions (or a test) checks that a session it is done with
        is quiet: no prompt, no retry chain, no compaction, no bash command, no request
        to the provider in flight. Each is read from the collaborator that owns it.

        Returns:
            Phrases such as ``"a prompt is running"``, ``"a retry chain is waiting out
                its backoff (attempt 1)"``, ``"a request to openai is in flight"``,
                ``"a bash command is running"``, in that order.
        """
        busy: list[str] = []
        if self._control.running:
            busy.append("a prompt is running")
        chain = self._control.live_chain
        if chain is not None:
            doing = "is waiting out its backoff" if chain.waiting else "is alive"
            busy.append(f"a retry chain {doing} (attempt {chain.attempt})")
        if self._compaction.running:
            busy.append("a compaction is running")
        if self._agent.streaming:
            busy.append(f"a request to {self._agent.provider.name} is in flight")
        if self.is_bash_running:
            busy.append("a bash command is running")
        return tuple(busy)

    def assert_idle(self) -> None:
        """Raise unless nothing of the session is running: for tests and health checks.

        Raises:
            AssertionError: something still runs; the message names the session and
                everything ``busy_with`` lists, e.g. ``"session 1a2b3c4d5e6f is not
                idle: a prompt is running; a request to openai is in flight"``.
        """
        busy = self.busy_with()
        if busy:
            msg = f"session {self.session_id[:12]} is not idle: {'; '.join(busy)}"
            raise AssertionError(msg)
