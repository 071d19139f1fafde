"""The agent loop: runtime context, turns, streaming, tool calls, agent events.

An ``Agent`` owns the runtime context — the message list the model sees —
and runs one *agent run* at a time: ``prompt`` adds a user message and runs,
``continue_`` runs again on the context as it is (a retry re-attempt). A run is
a sequence of turns; each turn streams one assistant message and, if the model
asked for tools, runs them and goes round again.

Every run emits ``agent_start`` … ``agent_end`` and every turn ``turn_start`` …
``turn_end``, also when it is cancelled: cancellation ends the in-flight
assistant message as ``aborted`` (keeping its partial text), closes the turn
and the run, and then propagates. The agent knows nothing about retries; the
session passes ``will_continue``, asked just before ``agent_end`` to fill in
``willRetry`` (R-45a).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from ._classes import define
from ._errors import ToolError
from ._events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    QueueUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolOutput,
    TurnEnd,
    TurnStart,
)
from ._message_builder import Emit, MessageBuilder
from ._messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    to_llm,
)
from .providers._base import Model, Provider, ProviderRequest, StreamEnd

if TYPE_CHECKING:
    from ._tools import Tool  # a type only: a session without tools imports no schema code

#: Where a running tool's progress goes (``report_progress``): set by the agent around
#: each tool's ``execute``, so a tool reports without knowing its call.
_PROGRESS: ContextVar[Callable[[ToolOutput | str], None] | None] = ContextVar(
    "trio_session_tool_progress", default=None
)


def report_progress(output: ToolOutput | str) -> None:
    """Tell the session what the running tool has so far: a ``tool_execution_update``
    event (pi's), e.g. ``bash``'s output while the command runs. Outside a tool call it
    does nothing.

    Args:
        output: the output so far (a string is its text).
    """
    sink = _PROGRESS.get()
    if sink is not None:
        sink(output)


#: The ``errorMessage`` of an answer cut short by cancellation (the reference's words).
ABORTED = "Request was aborted"
KeySource = Callable[[], Awaitable[str | None]]
Checkpoint = Callable[[], Awaitable[None]]
FailureHook = Callable[[AssistantMessage], Awaitable[None]]


def _last_assistant(messages: Sequence[Message]) -> AssistantMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)


def request_messages(messages: Iterable[Message]) -> tuple[Message, ...]:
    """The context as sent to a model: without failed assistant messages (R-20a), and
    with the reference's extended messages turned into user text (``to_llm``)."""
    return to_llm(m for m in messages if not (isinstance(m, AssistantMessage) and m.failed))


@define(eq=False, slots=True)
class _RequestCache:
    """``request_messages`` of a context that grows at its end, kept between requests.

    Each request converts only the messages added since the last one: the context is
    compared with the last one by identity (``id`` at C speed; the cache holds the
    messages, so no id is reused meanwhile). Any change further back — a failed
    attempt dropped, a compaction, a resumed file — converts from the first message
    that differs. What it returns is exactly what ``request_messages`` returns.
    """

    _source: list[Message] = attrs.field(factory=list)
    _sent: list[Message] = attrs.field(factory=list)
    _ends: list[int] = attrs.field(factory=list)  #: len(_sent) after each source message

    def of(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        old = list(map(id, self._source))
        new = list(map(id, messages))
        same = min(len(old), len(new))
        if old[:same] != new[:same]:
            same = next(i for i in range(same) if old[i] != new[i])
        del self._source[same:], self._ends[same:]
        del self._sent[self._ends[-1] if self._ends else 0 :]
        for message in messages[same:]:
            self._source.append(message)
            self._sent.extend(request_messages((message,)))
            self._ends.append(len(self._sent))
        return tuple(self._sent)


# -- queues --------------------------------------------------------------------

QueueMode = Literal["all", "one-at-a-time"]
QUEUE_MODES: tuple[QueueMode, ...] = ("all", "one-at-a-time")


@define(eq=False)
class MessageQueue:
    """Messages waiting to be delivered into a run (the reference's pending-message queue).

    ``mode`` says how many a delivery takes: ``"all"`` of them, or
    ``"one-at-a-time"`` (the oldest).
    """

    mode: QueueMode = "one-at-a-time"
    messages: list[UserMessage] = attrs.field(factory=list)

    def drain(self) -> list[UserMessage]:
        """Take what one delivery takes, oldest first."""
        if self.mode == "all":
            taken, self.messages = self.messages, []
            return taken
        return [self.messages.pop(0)] if self.messages else []

    def peek(self) -> tuple[UserMessage, ...]:
        """What ``drain()`` would take now, left in the queue."""
        return tuple(self.messages if self.mode == "all" else self.messages[:1])

    def take(self, messages: Sequence[UserMessage]) -> list[UserMessage]:
        """Take ``messages`` out of the queue: those still in it, in queue order."""
        wanted = set(map(id, messages))
        taken = [m for m in self.messages if id(m) in wanted]
        if taken:
            self.messages = [m for m in self.messages if id(m) not in wanted]
        return taken

    @property
    def texts(self) -> tuple[str, ...]:
        """The queued messages' texts, oldest first."""
        return tuple(m.text for m in self.messages)


@define(eq=False)
class Agent:
    """The agent loop over one runtime context.

    Args:
        provider: where answers come from.
        model: the model to ask.
        emit: receives every agent event, synchronously, in order.
        tools: tools the model may call.
        system_prompt: sent with every request.
        key_source: ``async () -> api key`` asked before each request.
        checkpoint: awaited before every request after a run's first one, and
            before ``agent_end`` (the session makes what the run produced durable
            there); if it raises, the run ends (``agent_end``, ``willRetry: false``)
            and the exception propagates.
        on_failure: awaited with a run's last message when it failed, before
            ``will_continue`` decides (the session asks its credential store about a
            usage limit there, R-53b).
        messages: the initial runtime context.
        thinking_level: sent with every turn's request (already clamped to ``model``).
        steering: messages to deliver after a turn, before the next request (and at
            the start of a run, after its prompt).
        follow_ups: messages to deliver when a run would otherwise stop.
        timeouts: ``() -> (attempt_timeout, idle_timeout)`` asked for every request,
            put on its ``ProviderRequest`` (``None``: the provider's own).
    """

    provider: Provider
    model: Model
    emit: Emit
    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    key_source: KeySource | None = None
    checkpoint: Checkpoint | None = None
    on_failure: FailureHook | None = None
    messages: list[Message] = attrs.field(factory=list)
    thinking_level: str = "off"
    steering: MessageQueue = attrs.field(factory=MessageQueue)
    follow_ups: MessageQueue = attrs.field(factory=MessageQueue)
    timeouts: Callable[[], tuple[float | None, float | None]] | None = None
    #: Whether a request to the provider is in flight (``AgentSession.assert_idle``).
    streaming: bool = attrs.field(default=False, init=False)
    #: While a retry's re-attempt runs, the error it retries: every failed reply then
    #: carries it as ``last_error`` (R-63); the controller sets it.
    retried: AssistantMessage | None = attrs.field(default=None, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _unsaved: bool = attrs.field(default=False, init=False)
    _requests: _RequestCache | None = attrs.field(default=None, init=False)

    async def prompt(
        self,
        message: str | UserMessage,
        *,
        will_continue: Callable[[AssistantMessage], bool] | None = None,
    ) -> AssistantMessage:
        """Add a user message (or its text) and run until the model stops asking for tools.

        Args:
            message: the user message, or its text.
            will_continue: decides from the run's last message whether its ``agent_end`` says
                ``will_retry``; false if ``None``.
        """
        user = UserMessage(message) if isinstance(message, str) else message
        return await self._run([user], will_continue)

    async def continue_(
        self,
        *,
        will_continue: Callable[[AssistantMessage], bool] | None = None,
        messages: Sequence[UserMessage] = (),
        steering: Sequence[UserMessage] | None = None,
    ) -> AssistantMessage:
        """Run again on the context as it is (R-22) — with ``messages`` added first, if
        given (prompts that came during a retry's backoff). Unlike a prompt's, they are
        not on disk yet: the checkpoint runs after they are added, before the request.

        ``steering``, if given, is what the run's first look at the steering queue
        takes — those of them still queued — instead of what the queue holds when the
        first turn starts: a prompt that joined a retry started its run when it joined
        (pi starts it at once), so what was steered after it waits for the next turn.

        Args:
            will_continue: as in ``prompt``.
            messages: user messages to add before the request.
            steering: the steering messages the run's first turn takes, as above.
        """
        self._unsaved = bool(messages)
        return await self._run(list(messages), will_continue, steering)

    async def complete(
        self, messages: Sequence[Message], *, system_prompt: str | None = None
    ) -> AssistantMessage:
        """Ask the model once, outside the conversation: no events, no context change.

        Used by compactors to summarise. Failures come back as error messages.

        Args:
            messages: the messages to send.
            system_prompt: the system prompt to send with them.
        """
        builder = MessageBuilder(lambda event: None, self.provider.name, self.model)
        api_key = await self.key_source() if self.key_source is not None else None
        attempt, idle = self.timeouts() if self.timeouts is not None else (None, None)
        request = ProviderRequest(
            model=self.model,
            messages=request_messages(messages),
            system_prompt=system_prompt,
            api_key=api_key,
            attempt_timeout=attempt,
            idle_timeout=idle,
        )
        self.streaming = True
        try:
            end = await self.provider.stream(request, builder)
        except Exception as exc:
            end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
        finally:
            self.streaming = False
        return builder.finish(end)

    def request(self, api_key: str | None) -> ProviderRequest:
        """The request the next turn would send.

        Args:
            api_key: the key to send it with.
        """
        if self._requests is None:
            self._requests = _RequestCache()
        attempt, idle = self.timeouts() if self.timeouts is not None else (None, None)
        return ProviderRequest(
            model=self.model,
            messages=self._requests.of(self.messages),
            system_prompt=self.system_prompt,
            tools=tuple(t.spec for t in self.tools),
            api_key=api_key,
            thinking_level=self.thinking_level,
            attempt_timeout=attempt,
            idle_timeout=idle,
        )

    def queue_update(self) -> QueueUpdate:
        """The ``queue_update`` event for the queues as they are now."""
        return QueueUpdate(steering=self.steering.texts, follow_up=self.follow_ups.texts)

    def _deliver(
        self,
        queue: MessageQueue,
        produced: list[Message],
        only: Sequence[UserMessage] | None = None,
    ) -> bool:
        """Take what ``queue`` gives (or just ``only``, those of them still in it) and
        add it to the turn; whether it gave anything.

        Taking and adding happen with no checkpoint between, so a queued message is
        either still queued or in the conversation: a cancellation never loses one.
        """
        taken = queue.drain() if only is None else queue.take(only)
        for message in taken:
            self.emit(self.queue_update())  # it left the queue: just before its message_start
            self._add(message, produced)
        return bool(taken)

    async def _run(
        self,
        new: Sequence[Message],
        will_continue: Callable[[AssistantMessage], bool] | None,
        first_steering: Sequence[UserMessage] | None = None,
    ) -> AssistantMessage:
        if self._running:
            msg = "the agent is already running"  # the session prevents this
            raise RuntimeError(msg)
        self._running = True
        produced: list[Message] = []
        turn_open = False
        last: AssistantMessage | None = None
        results: list[ToolResultMessage] = []
        # The reference's loop: steering is looked at when a run starts (after its
        # prompt) and after every turn; follow-ups when the run would otherwise stop.
        source = self.steering
        turn_from = 0
        self.emit(AgentStart())
        try:
            while True:
                if last is not None:
                    if self.checkpoint is not None:
                        await self.checkpoint()  # before the next request, or agent_end
                    if last.failed:
                        break  # an error or abort ends the run; queued messages wait
                    if last.stop_reason == "toolUse" or self.steering.messages:
                        source = self.steering
                    elif self.follow_ups.messages:
                        source = self.follow_ups
                    else:
                        break
                elif not new and self.checkpoint is not None:
                    await self.checkpoint()  # a continuation: the last run's messages first
                self.emit(TurnStart())
                turn_open = True
                last, results, turn_from = None, [], len(produced)
                for message in new:  # the prompt's messages open the first turn
                    self._add(message, produced)
                new, unsaved, self._unsaved = (), self._unsaved, False
                delivered = self._deliver(source, produced, first_steering)
                first_steering = None
                if (delivered or unsaved) and self.checkpoint is not None:
                    await self.checkpoint()  # added messages are on disk before the request
                last = await self._stream_turn(produced)
                if last.stop_reason == "toolUse":
                    await self._run_tools(last, produced, results)
                turn_open = False
                self.emit(TurnEnd(message=last, tool_results=tuple(results)))
            if last is not None and last.failed and self.on_failure is not None:
                await self.on_failure(last)
        except BaseException as exc:
            # Cancelled (or a bug): close what was opened, then let it propagate.
            if turn_open:
                if last is None:  # cancelled mid-stream: _stream_turn added it aborted
                    last = _last_assistant(produced[turn_from:])
                if last is None and isinstance(exc, trio.Cancelled):
                    # Cancelled before the turn's request (writing what it delivered):
                    # its answer is aborted all the same, so the prompt has one.
                    last = self._abort_answer(self._builder(), produced)
                if last is not None:
                    self.emit(TurnEnd(message=last, tool_results=tuple(results)))
            self.emit(AgentEnd(messages=tuple(produced), will_retry=False))
            raise
        finally:
            self._running = False
        assert last is not None
        will_retry = will_continue(last) if will_continue is not None else False
        self.emit(AgentEnd(messages=tuple(produced), will_retry=will_retry))
        return last

    def _add(self, message: Message, produced: list[Message]) -> None:
        self.messages.append(message)
        produced.append(message)
        self.emit(MessageStart(message=message))
        self.emit(MessageEnd(message=message))

    def _builder(self) -> MessageBuilder:
        return MessageBuilder(self.emit, self.provider.name, self.model, self.thinking_level)

    def _abort_answer(self, builder: MessageBuilder, produced: list[Message]) -> AssistantMessage:
        """End the turn's answer as aborted (its partial content kept) and add it."""
        aborted = builder.finish(StreamEnd(stop_reason="aborted", error_message=ABORTED))
        if self.retried is not None:  # the error the re-attempt retried
            aborted = attrs.evolve(aborted, last_error=self.retried)
        self.messages.append(aborted)
        produced.append(aborted)
        self.emit(MessageEnd(message=aborted))
        return aborted

    async def _stream_turn(self, produced: list[Message]) -> AssistantMessage:
        builder = self._builder()
        try:
            api_key = await self.key_source() if self.key_source is not None else None
            self.streaming = True
            try:
                end = await self.provider.stream(self.request(api_key), builder)
            except Exception as exc:  # a provider must not raise; if it does, it's an error
                end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
            finally:
                self.streaming = False
        except BaseException:
            self._abort_answer(builder, produced)
            raise
        message = builder.finish(end)
        if self.retried is not None and message.failed:
            message = attrs.evolve(message, last_error=self.retried)
        self.messages.append(message)
        produced.append(message)
        self.emit(MessageEnd(message=message))
        return message

    async def _run_tools(
        self,
        message: AssistantMessage,
        produced: list[Message],
        results: list[ToolResultMessage],
    ) -> None:
        by_name = {t.name: t for t in self.tools}
        for call in message.tool_calls:
            self.emit(ToolExecutionStart(call.id, call.name, call.arguments))
            tool = by_name.get(call.name)
            started = trio.current_time()

            def progress(output: ToolOutput | str, call: ToolCall = call) -> None:
                self.emit(ToolExecutionUpdate(call.id, call.name, call.arguments, output))

            token = _PROGRESS.set(progress)
            try:
                if tool is None:
                    text, is_error = f"unknown tool {call.name!r}", True
                else:
                    try:
                        text, is_error = await tool.execute(call.arguments), False
                    except ToolError as exc:  # the tool's words for the model
                        text, is_error = str(exc), True
                    except Exception as exc:
                        text, is_error = f"{type(exc).__name__}: {exc}", True
            except BaseException:
                self._tool_result(call, "tool call aborted", True, produced, results, started)
                raise
            finally:
                _PROGRESS.reset(token)
            self._tool_result(call, text, is_error, produced, results, started)

    def _tool_result(
        self,
        call: ToolCall,
        text: str,
        is_error: bool,
        produced: list[Message],
        results: list[ToolResultMessage],
        started: float,
    ) -> None:
        result = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=(TextContent(text),),
            is_error=is_error,
        )
        output = ToolOutput(result.content, {} if is_error else None)
        duration = round((trio.current_time() - started) * 1000)
        self.emit(ToolExecutionEnd(call.id, call.name, output, is_error, duration))
        results.append(result)
        self._add(result, produced)
