"""A scripted provider: the seam for tests and the offline demo.

``FauxProvider`` is to providers what ``httpx.MockTransport`` is to httpx: it
speaks the provider protocol for real — streaming chunks, waiting with
``trio.sleep``, honouring cancellation — but its answers come from a script.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

import attrs
import trio

from .._messages import StopReason, ToolCall, Usage
from ._base import ProviderRequest, StreamEnd, StreamSink

ScriptStep: TypeAlias = "FauxReply | Callable[[ProviderRequest], FauxReply]"


def _optional_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(value)


def _steps(value: Iterable[ScriptStep]) -> list[ScriptStep]:
    return list(value)


@attrs.frozen
class FauxReply:
    """One scripted answer.

    Attributes:
        text: the answer text (streamed as ``chunks`` if given, else in one piece).
        chunks: explicit streaming pieces; they must join to ``text`` if both are set.
        tool_calls: tool calls to make (the message then stops with ``toolUse``).
        error: end the stream as an error with this ``errorMessage`` (after any
            text, which stays on the message as partial output).
        delay: seconds before the first chunk.
        chunk_delay: seconds between chunks.
        usage: token usage to report.
        hang: never finish; the request stays in flight until cancelled.
        stop_reason: override the stop reason of a successful answer (``"length"``).
    """

    text: str = ""
    chunks: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls)
    error: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    usage: Usage = attrs.field(factory=Usage)
    hang: bool = False
    stop_reason: StopReason | None = None

    def __attrs_post_init__(self) -> None:
        if self.chunks is not None and self.text and "".join(self.chunks) != self.text:
            msg = f"FauxReply chunks {self.chunks!r} do not join to text {self.text!r}"
            raise ValueError(msg)

    @property
    def pieces(self) -> tuple[str, ...]:
        """The streamed pieces of text, in order."""
        if self.chunks is not None:
            return self.chunks
        return (self.text,) if self.text else ()


@attrs.define(eq=False)
class FauxProvider:
    """A provider that answers from a script, one step per request.

    Each step is a :class:`FauxReply` or a function of the request returning one.
    Every request is recorded in :attr:`requests`, with its start time (in
    ``trio.current_time()``, so virtual under ``MockClock``) in :attr:`request_times`.
    When the script runs out, the request ends as a non-retryable error.

    Example::

        provider = FauxProvider([
            FauxReply(error="503 Service Unavailable"),
            FauxReply(text="Hello!"),
        ])
    """

    _script: list[ScriptStep] = attrs.field(converter=_steps, alias="script")
    _name: str = attrs.field(default="faux", alias="name")
    requests: list[ProviderRequest] = attrs.field(factory=list, init=False)
    request_times: list[float] = attrs.field(factory=list, init=False)

    @property
    def name(self) -> str:
        """The provider name, ``"faux"`` unless given."""
        return self._name

    @property
    def remaining(self) -> int:
        """Script steps not yet used."""
        return len(self._script)

    def extend(self, steps: Iterable[ScriptStep]) -> None:
        """Add steps to the end of the script."""
        self._script.extend(steps)

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Play the next step of the script into ``sink``."""
        self.requests.append(request)
        self.request_times.append(trio.current_time())
        if not self._script:
            number = len(self.requests)
            return StreamEnd.error(f"faux script exhausted: no reply for request {number}")
        step = self._script.pop(0)
        reply = step if isinstance(step, FauxReply) else step(request)
        await trio.sleep(reply.delay)
        for i, piece in enumerate(reply.pieces):
            if i:
                await trio.sleep(reply.chunk_delay)
            sink.text(piece)
        if reply.hang:
            await trio.sleep(math.inf)
        await trio.lowlevel.checkpoint()
        sink.usage(reply.usage)
        for call in reply.tool_calls:
            sink.tool_call(call)
        if reply.error is not None:
            return StreamEnd.error(reply.error)
        if reply.stop_reason is not None:
            return StreamEnd(stop_reason=reply.stop_reason)
        return StreamEnd(stop_reason="toolUse" if reply.tool_calls else "stop")


def faux_script(steps: Sequence[str]) -> list[FauxReply]:
    """A quick script from strings: ``"!text"`` is an error, anything else an answer.

    ``faux_script(["!503 Service Unavailable", "Hello"])``
    """
    return [FauxReply(error=s[1:]) if s.startswith("!") else FauxReply(text=s) for s in steps]
