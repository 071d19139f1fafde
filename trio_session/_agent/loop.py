"""The agent loop: runtime context, turns, streaming, tool calls, agent events.

An ``Agent`` owns the runtime context — the message list the model sees —
and runs one *agent run* at a time: ``prompt`` adds a user message and runs,
``continue_`` runs again on the context as it is (a retry re-attempt). A run is
a sequence of turns; each turn streams one assistant message and, if the model
asked for tools, runs them and goes round again.

Every run emits ``agent_start`` … ``agent_end`` and every turn ``turn_start`` …
``turn_end``, also when it is cancelled: cancellation ends the in-flight
assistant message as ``aborted`` (keeping its partial text), closes the turn
and the run, and then propagates. The agent knows nothing about retries:
``start_run`` gives a run as steps its caller drives (``AgentRun``), so the retry
policy sees each answer as it ends, and says ``willRetry`` at the run's ``end``
(R-45a): nothing here calls into the layers above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal, Protocol

import attrs
import trio

from .._core.classes import define
from .._core.errors import ToolError
from .._core.events import (
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
from .._core.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    to_llm,
)
from ..providers._base import Model, Provider, ProviderRequest, StreamEnd
from .builder import Emit, MessageBuilder
from .rate_budget import Outcome

if TYPE_CHECKING:
    from .rate_budget import Grant, RateGate
    from .tools import Tool  # a type only: a session without tools imports no schema code

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


class KeySource(Protocol):
    """Where the key for a request comes from (the session's ``KeyRing.api_key``)."""

    def __call__(self, *, fresh: bool, base_url: str | None) -> Awaitable[str | None]:
        """The key for the next request; ``fresh``: it is not a retry's re-attempt;
        ``base_url``: its model's (with the provider, it names the key)."""
        ...


Checkpoint = Callable[[], Awaitable[None]]


async def _settle(grant: Grant, answer: AssistantMessage | None) -> None:
    """Settle a rate-limit grant with its answer (``None``: none came), whatever cancels
    the request: a cancelled answer's unused tokens go back to the budget all the same
    (one bounded call; ``RateGate``)."""
    with trio.CancelScope(shield=True):
        await grant.settle(Outcome.of(answer))


async def _learn(
    gate: RateGate, provider: str, model: Model, api_key: str | None, end: StreamEnd
) -> None:
    """Let the rate gate learn the limits an answer's headers stated, whatever cancels
    the request after it (one bounded call); nothing at all when they stated none."""
    if end.rate_limits is not None:
        with trio.CancelScope(shield=True):
            await gate.learn(provider, model, api_key, end.rate_limits)


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


def queue_mode(mode: str) -> QueueMode:
    """``mode`` as a ``QueueMode``; ``ValueError`` for anything else.

    Args:
        mode: ``"all"`` or ``"one-at-a-time"``.
    """
    for known in QUEUE_MODES:
        if mode == known:
            return known
    msg = f'unknown queue mode {mode!r}: expected "all" or "one-at-a-time"'
    raise ValueError(msg)


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
        key_source: asked for the key before each request, with ``fresh=False`` for a
            retry's re-attempt (which waits out no shared cooldown, R-28b).
        checkpoint: awaited before every request after a run's first one, and
            before ``agent_end`` (the session makes what the run produced durable
            there); if it raises, the run ends (``agent_end``, ``willRetry: false``)
            and the exception propagates.
        messages: the initial runtime context.
        thinking_level: sent with every turn's request (already clamped to ``model``).
        steering: messages to deliver after a turn, before the next request (and at
            the start of a run, after its prompt).
        follow_ups: messages to deliver when a run would otherwise stop.
        timeouts: ``() -> (attempt_timeout, idle_timeout)`` asked for every request,
            put on its ``ProviderRequest`` (``None``: the provider's own).
        rate_gate: asked for a permit right before every request, in the request's
            cancel scope, and told what the answer used (``rateLimit``, R-69); ``None``:
            no permit is asked for.
    """

    provider: Provider
    model: Model
    emit: Emit
    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    key_source: KeySource | None = None
    checkpoint: Checkpoint | None = None
    messages: list[Message] = attrs.field(factory=list)
    thinking_level: str = "off"
    steering: MessageQueue = attrs.field(factory=MessageQueue)
    follow_ups: MessageQueue = attrs.field(factory=MessageQueue)
    timeouts: Callable[[], tuple[float | None, float | None]] | None = None
    rate_gate: RateGate | None = None
    #: Whether a request to the provider is in flight (``AgentSession.assert_idle``).
    streaming: bool = attrs.field(default=False, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _requests: _RequestCache | None = attrs.field(default=None, init=False)

    def start_run(
        self,
        new: Sequence[Message] = (),
        *,
        steering: Sequence[UserMessage] | None = None,
        unsaved: bool = False,
        retried: AssistantMessage | None = None,
    ) -> AgentRun:
        """Begin one run, stepped by the caller (``AgentRun``): ``with agent.start_run(…)
        as run:`` emits ``agent_start``; leaving the block by an exception closes what
        is open (``turn_end``, ``agent_end {willRetry: false}``) and lets it propagate.

        Args:
            new: messages that open the first turn (a prompt's user message).
            steering: the steering messages the first turn takes, those of them still
                queued, instead of what the queue gives when it starts (a prompt that
                joined a retry started its run when it joined, as pi's does).
            unsaved: ``new`` is not on disk yet: the checkpoint runs after it is added,
                before the request (prompts that came during a retry's backoff).
            retried: the error this run re-attempts: the run's first answer carries it
                as ``last_error`` if it fails or is aborted (R-63).
        """
        return AgentRun(self, new, steering, unsaved, retried)

    async def prompt(self, message: str | UserMessage) -> AssistantMessage:
        """Add a user message (or its text) and run until the model stops asking for tools.

        Args:
            message: the user message, or its text.
        """
        user = UserMessage(message) if isinstance(message, str) else message
        with self.start_run((user,)) as run:
            return await run.finish()

    async def continue_(
        self,
        *,
        messages: Sequence[UserMessage] = (),
        steering: Sequence[UserMessage] | None = None,
    ) -> AssistantMessage:
        """Run again on the context as it is (R-22) — with ``messages`` added first (not
        on disk yet, see ``start_run``), and ``steering`` as ``start_run`` takes it.

        Args:
            messages: user messages to add before the request.
            steering: the steering messages the run's first turn takes.
        """
        with self.start_run(messages, steering=steering, unsaved=bool(messages)) as run:
            return await run.finish()

    async def complete(
        self, messages: Sequence[Message], *, system_prompt: str | None = None
    ) -> AssistantMessage:
        """Ask the model once, outside the conversation: no events, no context change.

        Used by compactors to summarise. Failures come back as error messages. With a
        rate limit, the request waits for its permit like any other, and that wait is
        the one thing it tells (``rate_limit_wait_start`` / ``_end``).

        Args:
            messages: the messages to send.
            system_prompt: the system prompt to send with them.
        """
        builder = MessageBuilder(lambda event: None, self.provider.name, self.model)
        api_key = (
            await self.key_source(fresh=True, base_url=self.model.base_url)
            if self.key_source is not None
            else None
        )
        attempt, idle = self.timeouts() if self.timeouts is not None else (None, None)
        request = ProviderRequest(
            model=self.model,
            messages=request_messages(messages),
            system_prompt=system_prompt,
            api_key=api_key,
            attempt_timeout=attempt,
            idle_timeout=idle,
        )
        gate = self.rate_gate
        grant = None
        if gate is not None and gate.may_limit(self.model):
            grant = await gate.permit(
                self.provider.name, self.model, api_key, request.messages, self.emit
            )
        self.streaming = True
        try:
            end = await self.provider.stream(request, builder)
        except Exception as exc:
            end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
        except BaseException:
            if grant is not None:
                await _settle(grant, None)
            raise
        finally:
            self.streaming = False
        message = builder.finish(end)
        if grant is not None:
            await _settle(grant, message)
        if gate is not None:
            await _learn(gate, self.provider.name, self.model, api_key, end)
        return message

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

    def _add(self, message: Message, produced: list[Message]) -> None:
        self.messages.append(message)
        produced.append(message)
        self.emit(MessageStart(message=message))
        self.emit(MessageEnd(message=message))

    def _builder(self) -> MessageBuilder:
        return MessageBuilder(self.emit, self.provider.name, self.model, self.thinking_level)

    def _abort_answer(
        self,
        builder: MessageBuilder,
        produced: list[Message],
        retried: AssistantMessage | None,
    ) -> AssistantMessage:
        """End the turn's answer as aborted (its partial content kept) and add it."""
        aborted = builder.finish(StreamEnd(stop_reason="aborted", error_message=ABORTED))
        if retried is not None:  # the error the re-attempt retried
            aborted = attrs.evolve(aborted, last_error=retried)
        self.messages.append(aborted)
        produced.append(aborted)
        self.emit(MessageEnd(message=aborted))
        return aborted

    async def _stream_turn(
        self, produced: list[Message], retried: AssistantMessage | None
    ) -> AssistantMessage:
        builder = self._builder()
        grant: Grant | None = None
        try:
            key_source = self.key_source
            api_key = (
                None
                if key_source is None
                else await key_source(fresh=retried is None, base_url=self.model.base_url)
            )
            request = self.request(api_key)
            gate = self.rate_gate
            # the wait is in the request's scope: abort() ends it
            if gate is not None and gate.may_limit(self.model):
                grant = await gate.permit(
                    self.provider.name, self.model, api_key, request.messages, self.emit
                )
            self.streaming = True
            try:
                end = await self.provider.stream(request, builder)
            except Exception as exc:  # a provider must not raise; if it does, it's an error
                end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
            finally:
                self.streaming = False
        except BaseException:
            aborted = self._abort_answer(builder, produced, retried)
            if grant is not None:
                await _settle(grant, aborted)
            raise
        message = builder.finish(end)
        if retried is not None and message.failed:
            message = attrs.evolve(message, last_error=retried)
        self.messages.append(message)
        produced.append(message)
        self.emit(MessageEnd(message=message))
        if grant is not None:
            await _settle(grant, message)
        if gate is not None:
            await _learn(gate, self.provider.name, self.model, api_key, end)
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
            answer: ToolOutput | str
            try:
                if tool is None:
                    answer, is_error = f"unknown tool {call.name!r}", True
                else:
                    try:
                        answer, is_error = await tool.execute(call.arguments), False
                    except ToolError as exc:  # the tool's words for the model
                        answer, is_error = str(exc), True
                    except Exception as exc:
                        answer, is_error = f"{type(exc).__name__}: {exc}", True
            except BaseException:
                self._tool_result(call, "tool call aborted", True, produced, results, started)
                raise
            finally:
                _PROGRESS.reset(token)
            self._tool_result(call, answer, is_error, produced, results, started)

    def _tool_result(
        self,
        call: ToolCall,
        answer: ToolOutput | str,
        is_error: bool,
        produced: list[Message],
        results: list[ToolResultMessage],
        started: float,
    ) -> None:
        given = ToolOutput((TextContent(answer),)) if isinstance(answer, str) else answer
        result = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=given.content,
            is_error=is_error,
            details=given.details,
        )
        output = ToolOutput(result.content, {} if is_error else given.details)
        duration = round((trio.current_time() - started) * 1000)
        self.emit(ToolExecutionEnd(call.id, call.name, output, is_error, duration))
        results.append(result)
        self._add(result, produced)


@define(eq=False, slots=True, weakref_slot=False)
class AgentRun:
    """One agent run, as steps its caller drives (made by ``Agent.start_run``).

    ```python
    with agent.start_run([user]) as run:         # agent_start
        message = await run.next_message()       # turn_start, deliveries, the answer
        while await run.finish_turn():           # its tools, turn_end: go on?
            message = await run.next_message()
        run.end(will_retry=False)                # agent_end
    ```

    ``finish()`` takes every step left. A failed answer ends the run, so a retry's
    re-attempt is decided by its first answer: the caller sees it right after its
    ``message_end``, before its tools and ``turn_end`` (R-23a). Leaving the ``with``
    block by an exception (a cancellation) ends the in-flight answer as ``aborted``,
    emits the open ``turn_end`` and ``agent_end {willRetry: false}``, and propagates.
    """

    agent: Agent
    _new: Sequence[Message]
    _first_steering: Sequence[UserMessage] | None
    _unsaved: bool
    _retried: AssistantMessage | None
    #: The messages this run added, in order (``agent_end``'s).
    produced: list[Message] = attrs.field(factory=list, init=False)
    #: The run's latest answer; ``None`` before its first.
    last: AssistantMessage | None = attrs.field(default=None, init=False)
    _results: list[ToolResultMessage] = attrs.field(factory=list, init=False)
    _source: MessageQueue | None = attrs.field(default=None, init=False)
    _turn_open: bool = attrs.field(default=False, init=False)
    _turn_from: int = attrs.field(default=0, init=False)
    _ended: bool = attrs.field(default=False, init=False)

    def __enter__(self) -> AgentRun:
        agent = self.agent
        if agent._running:
            msg = "the agent is already running"  # the session prevents this
            raise RuntimeError(msg)
        agent._running = True
        # The reference's loop: steering is looked at when a run starts (after its
        # prompt) and after every turn; follow-ups when the run would otherwise stop.
        self._source = agent.steering
        agent.emit(AgentStart())
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None and not self._ended:
                self._close(exc)
        finally:
            self.agent._running = False

    def _close(self, exc: BaseException) -> None:
        """Cancelled (or a bug): close what was opened; ``__exit__`` lets it propagate."""
        agent = self.agent
        if self._turn_open:
            last = self.last
            if last is None:  # cancelled mid-stream: _stream_turn added it aborted
                last = _last_assistant(self.produced[self._turn_from :])
            if last is None and isinstance(exc, trio.Cancelled):
                # Cancelled before the turn's request (writing what it delivered):
                # its answer is aborted all the same, so the prompt has one.
                last = agent._abort_answer(agent._builder(), self.produced, self._retried)
            if last is not None:
                agent.emit(TurnEnd(message=last, tool_results=tuple(self._results)))
        self._ended = True
        agent.emit(AgentEnd(messages=tuple(self.produced), will_retry=False))

    async def next_message(self) -> AssistantMessage:
        """Open a turn: ``turn_start``, the messages it delivers, the request; return
        its answer just after the answer's ``message_end``."""
        agent = self.agent
        checkpoint = agent.checkpoint
        if self.last is not None:
            # only the run's first answer can be a re-attempt's (a failure ends a
            # run, so a later turn follows a good answer: the retry has succeeded)
            self._retried = None
        elif not self._new and checkpoint is not None:
            await checkpoint()  # a continuation: the last run's messages first
        agent.emit(TurnStart())
        self._turn_open = True
        self.last, self._results, self._turn_from = None, [], len(self.produced)
        for message in self._new:  # the prompt's messages open the first turn
            agent._add(message, self.produced)
        new, self._new = self._new, ()
        assert self._source is not None
        delivered = agent._deliver(self._source, self.produced, self._first_steering)
        self._first_steering = None
        if (delivered or (self._unsaved and new)) and checkpoint is not None:
            await checkpoint()  # added messages are on disk before the request
        last = self.last = await agent._stream_turn(self.produced, self._retried)
        return last

    async def finish_turn(self) -> bool:
        """Run the answer's tools and close the turn (``turn_end``); make what the turn
        produced durable; whether the run goes on with another turn."""
        agent = self.agent
        last = self.last
        assert last is not None
        if last.stop_reason == "toolUse":
            await agent._run_tools(last, self.produced, self._results)
        self._turn_open = False
        agent.emit(TurnEnd(message=last, tool_results=tuple(self._results)))
        if agent.checkpoint is not None:
            await agent.checkpoint()  # before the next request, or agent_end
        if last.failed:
            return False  # an error or abort ends the run; queued messages wait
        if last.stop_reason == "toolUse" or agent.steering.messages:
            self._source = agent.steering
        elif agent.follow_ups.messages:
            self._source = agent.follow_ups
        else:
            return False
        return True

    async def turns(self) -> AssistantMessage:
        """Take every step left but the end; the run's last answer."""
        if self.last is None:
            await self.next_message()
        while await self.finish_turn():
            await self.next_message()
        assert self.last is not None
        return self.last

    def end(self, *, will_retry: bool) -> AssistantMessage:
        """``agent_end``, saying whether a retry follows (R-45a); the run's last answer.

        Args:
            will_retry: the ``willRetry`` flag.
        """
        assert self.last is not None
        self._ended = True
        self.agent.emit(AgentEnd(messages=tuple(self.produced), will_retry=will_retry))
        return self.last

    async def finish(self) -> AssistantMessage:
        """Every step left, and ``agent_end {willRetry: false}``; the last answer."""
        await self.turns()
        return self.end(will_retry=False)
