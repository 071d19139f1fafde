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

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ._events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SessionEvent,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from ._messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    to_llm,
)
from .providers._base import Model, Provider, ProviderRequest, StreamEnd, ToolSpec

Emit = Callable[[SessionEvent], None]
KeySource = Callable[[], Awaitable[str | None]]
Checkpoint = Callable[[], Awaitable[None]]


@attrs.frozen
class Tool:
    """An async function the model may call.

    Attributes:
        name: the name the model uses.
        execute: ``async (arguments) -> str``; an exception becomes an error result.
        description: what the tool does, for the model.
        parameters: JSON schema of the arguments.
    """

    name: str
    execute: Callable[[Mapping[str, Any]], Awaitable[str]]
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )

    @property
    def spec(self) -> ToolSpec:
        """The tool as sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


def request_messages(messages: Iterable[Message]) -> tuple[Message, ...]:
    """The context as sent to a model: without failed assistant messages (R-20a), and
    with the reference's extended messages turned into user text (``to_llm``)."""
    return to_llm(m for m in messages if not (isinstance(m, AssistantMessage) and m.failed))


@attrs.define(eq=False)
class _Builder:
    """Collects a streaming answer; every text delta becomes a ``message_update``."""

    _emit: Emit
    _provider: str
    _model: Model
    _text: list[str] = attrs.field(factory=list, init=False)
    _calls: list[ToolCall] = attrs.field(factory=list, init=False)
    _usage: Usage = attrs.field(factory=Usage, init=False)

    def text(self, delta: str) -> None:
        if not delta:
            return
        self._text.append(delta)
        self._emit(MessageUpdate(message=self.snapshot(), delta=delta))

    def tool_call(self, call: ToolCall) -> None:
        self._calls.append(call)

    def usage(self, usage: Usage) -> None:
        self._usage = usage

    def snapshot(self, end: StreamEnd | None = None) -> AssistantMessage:
        end = end or StreamEnd()
        text = "".join(self._text)
        content = ((TextContent(text),) if text else ()) + tuple(self._calls)
        return AssistantMessage(
            content=content,
            stop_reason=end.stop_reason,
            error_message=end.error_message,
            usage=self._model.priced(self._usage),
            provider=self._provider,
            model=self._model.id,
            api=self._model.api,
        )


@attrs.define(eq=False)
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
        messages: the initial runtime context.
        thinking_level: sent with every turn's request (already clamped to ``model``).
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
    _running: bool = attrs.field(default=False, init=False)

    async def prompt(
        self,
        message: str | UserMessage,
        *,
        will_continue: Callable[[AssistantMessage], bool] | None = None,
    ) -> AssistantMessage:
        """Add a user message (or its text) and run until the model stops asking for tools."""
        user = UserMessage(message) if isinstance(message, str) else message
        return await self._run([user], will_continue)

    async def continue_(
        self, *, will_continue: Callable[[AssistantMessage], bool] | None = None
    ) -> AssistantMessage:
        """Run again on the context as it is, without a new user message (R-22)."""
        return await self._run([], will_continue)

    async def complete(
        self, messages: Sequence[Message], *, system_prompt: str | None = None
    ) -> AssistantMessage:
        """Ask the model once, outside the conversation: no events, no context change.

        Used by compactors to summarise. Failures come back as error messages.
        """
        builder = _Builder(lambda event: None, self.provider.name, self.model)
        api_key = await self.key_source() if self.key_source is not None else None
        request = ProviderRequest(
            model=self.model,
            messages=request_messages(messages),
            system_prompt=system_prompt,
            api_key=api_key,
        )
        try:
            end = await self.provider.stream(request, builder)
        except Exception as exc:
            end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
        return builder.snapshot(end)

    def request(self, api_key: str | None) -> ProviderRequest:
        """The request the next turn would send."""
        return ProviderRequest(
            model=self.model,
            messages=request_messages(self.messages),
            system_prompt=self.system_prompt,
            tools=tuple(t.spec for t in self.tools),
            api_key=api_key,
            thinking_level=self.thinking_level,
        )

    async def _run(
        self,
        new: Sequence[Message],
        will_continue: Callable[[AssistantMessage], bool] | None,
    ) -> AssistantMessage:
        if self._running:
            msg = "the agent is already running"  # the session prevents this
            raise RuntimeError(msg)
        self._running = True
        produced: list[Message] = []
        turn_open = False
        last: AssistantMessage | None = None
        results: list[ToolResultMessage] = []
        self.emit(AgentStart())
        try:
            while True:
                if not new and self.checkpoint is not None:
                    await self.checkpoint()  # between turns: before the next request
                self.emit(TurnStart())
                turn_open = True
                last, results = None, []
                for message in new:  # the prompt's messages open the first turn
                    self._add(message, produced)
                new = ()
                last = await self._stream_turn(produced)
                if last.stop_reason == "toolUse":
                    await self._run_tools(last, produced, results)
                turn_open = False
                self.emit(TurnEnd(message=last, tool_results=tuple(results)))
                if last.stop_reason != "toolUse":
                    break
            if self.checkpoint is not None:
                await self.checkpoint()  # what the run produced is durable before agent_end
        except BaseException:
            # Cancelled (or a bug): close what was opened, then let it propagate.
            if turn_open:
                if last is None:  # cancelled mid-stream: _stream_turn added it aborted
                    last = next(m for m in reversed(produced) if isinstance(m, AssistantMessage))
                self.emit(TurnEnd(message=last, tool_results=tuple(results)))
            self.emit(AgentEnd(messages=tuple(produced), will_retry=False))
            raise
        finally:
            self._running = False
        will_retry = will_continue(last) if will_continue is not None else False
        self.emit(AgentEnd(messages=tuple(produced), will_retry=will_retry))
        return last

    def _add(self, message: Message, produced: list[Message]) -> None:
        self.messages.append(message)
        produced.append(message)
        self.emit(MessageStart(message=message))
        self.emit(MessageEnd(message=message))

    async def _stream_turn(self, produced: list[Message]) -> AssistantMessage:
        builder = _Builder(self.emit, self.provider.name, self.model)
        self.emit(MessageStart(message=builder.snapshot()))
        try:
            api_key = await self.key_source() if self.key_source is not None else None
            try:
                end = await self.provider.stream(self.request(api_key), builder)
            except Exception as exc:  # a provider must not raise; if it does, it's an error
                end = StreamEnd.error(f"provider {self.provider.name} failed: {exc!r}")
        except BaseException:
            aborted = builder.snapshot(StreamEnd(stop_reason="aborted"))
            self.messages.append(aborted)
            produced.append(aborted)
            self.emit(MessageEnd(message=aborted))
            raise
        message = builder.snapshot(end)
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
            try:
                if tool is None:
                    text, is_error = f"unknown tool {call.name!r}", True
                else:
                    try:
                        text, is_error = await tool.execute(call.arguments), False
                    except Exception as exc:
                        text, is_error = f"{type(exc).__name__}: {exc}", True
            except BaseException:
                self._tool_result(call, "tool call aborted", True, produced, results)
                raise
            self._tool_result(call, text, is_error, produced, results)

    def _tool_result(
        self,
        call: ToolCall,
        text: str,
        is_error: bool,
        produced: list[Message],
        results: list[ToolResultMessage],
    ) -> None:
        result = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=(TextContent(text),),
            is_error=is_error,
        )
        self.emit(ToolExecutionEnd(call.id, call.name, text, is_error))
        results.append(result)
        self._add(result, produced)
