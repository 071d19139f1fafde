"""A scripted provider: the seam for tests and the offline demo.

``FauxProvider`` is to providers what ``httpx.MockTransport`` is to httpx: it
speaks the provider protocol for real — streaming chunks, waiting with
``trio.sleep``, honouring cancellation — but its answers come from a script.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import attrs
import trio

from .._core.classes import define, frozen
from .._core.codec import _decode_attrs
from .._core.errors import CodecError, TrioSessionError
from .._core.json_bounds import loads
from .._core.messages import ZERO_USAGE, StopReason, ToolCall, Usage
from ._base import ProviderRequest, StreamEnd, StreamSink

ScriptStep: TypeAlias = "FauxReply | Callable[[ProviderRequest], FauxReply]"


def _optional_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(value)


def _steps(value: Iterable[ScriptStep]) -> list[ScriptStep]:
    return list(value)


@frozen
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
    usage: Usage = ZERO_USAGE
    hang: bool = False
    stop_reason: StopReason | None = None

    def __attrs_post_init__(self) -> None:
        if self.chunks is not None and self.text and "".join(self.chunks) != self.text:
            msg = f"FauxReply chunks {self.chunks!r} do not join to text {self.text!r}"
            raise ValueError(msg)

    @classmethod
    def from_json(cls, data: Any) -> FauxReply:
        """Decode one reply object of a JSON faux script (``{"error": "503 …"}``).

        Args:
            data: the decoded JSON object.

        Raises:
            FauxScriptError: naming the bad key and value.
        """
        try:
            return _reply_from_json(data, "reply")
        except CodecError as exc:
            raise FauxScriptError(str(exc)) from exc

    @property
    def pieces(self) -> tuple[str, ...]:
        """The streamed pieces of text, in order."""
        if self.chunks is not None:
            return self.chunks
        return (self.text,) if self.text else ()


@define(eq=False)
class FauxProvider:
    """A provider that answers from a script, one step per request.

    Each step is a ``FauxReply`` or a function of the request returning one.
    Every request is recorded in ``requests``, with its start time (in
    ``trio.current_time()``, so virtual under ``MockClock``) in ``request_times``.
    When the script runs out, the request ends as a non-retryable error.

    Args:
        script: the steps, in order: ``FauxReply`` values or functions of the
            ``ProviderRequest``.
        name: the provider name.

    Example:
        ```python
        provider = FauxProvider([
            FauxReply(error="503 Service Unavailable"),
            FauxReply(text="Hello!"),
        ])
        ```
    """

    _script: list[ScriptStep] = attrs.field(converter=_steps, alias="script")
    _name: str = attrs.field(default="faux", alias="name")
    requests: list[ProviderRequest] = attrs.field(factory=list, init=False)
    request_times: list[float] = attrs.field(factory=list, init=False)

    @classmethod
    def from_json(cls, data: Any, *, source: str = "<data>", name: str = "faux") -> FauxProvider:
        """A provider playing a JSON faux script (see ``faux_script_from_json``).

        Args:
            data: the decoded JSON: a list of reply objects.
            source: where the data came from, for error messages.
            name: the provider name.

        Raises:
            FauxScriptError: naming ``source``, the reply's index and the bad key.
        """
        return cls(faux_script_from_json(data, source=source), name=name)

    @property
    def name(self) -> str:
        """The provider name, ``"faux"`` unless given."""
        return self._name

    @property
    def remaining(self) -> int:
        """Script steps not yet used."""
        return len(self._script)

    def extend(self, steps: Iterable[ScriptStep]) -> None:
        """Add steps to the end of the script.

        Args:
            steps: the steps to add.
        """
        self._script.extend(steps)

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Play the next step of the script into ``sink``.

        Args:
            request: the request; recorded in ``requests``.
            sink: where the reply is streamed.
        """
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

    Args:
        steps: the replies, in order.
    """
    return [FauxReply(error=s[1:]) if s.startswith("!") else FauxReply(text=s) for s in steps]


# -- scripts as JSON files (``trio-session rpc --faux SCRIPT.json``) -----------------------

#: The keys a reply object may have in a JSON faux script.
FAUX_REPLY_KEYS: tuple[str, ...] = (
    "text",
    "chunks",
    "toolCalls",
    "error",
    "delay",
    "chunkDelay",
    "usage",
    "hang",
    "stopReason",
)


class FauxScriptError(TrioSessionError, ValueError):
    """A JSON faux script is malformed; the message names the file, the reply and the key."""


def _reply_from_json(data: Any, where: str) -> FauxReply:
    """Decode one reply object; raise ``CodecError`` naming ``where`` and the key."""
    if not isinstance(data, dict):
        msg = f"{where} must be an object, not {type(data).__name__}"
        raise CodecError(msg)
    unknown = sorted(str(key) for key in data if key not in FAUX_REPLY_KEYS)
    if unknown:
        known = ", ".join(FAUX_REPLY_KEYS)
        msg = f"{where}.{unknown[0]} is not a reply key (known keys: {known})"
        raise CodecError(msg)
    for key in ("delay", "chunkDelay"):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        ):
            msg = f"{where}.{key} must be a non-negative number of seconds, not {value!r}"
            raise CodecError(msg)
    stop_reason = data.get("stopReason")
    if stop_reason is not None and stop_reason not in ("stop", "length", "toolUse"):
        hint = ' (script a failure with "error")' if stop_reason in ("error", "aborted") else ""
        msg = f"{where}.stopReason must be one of 'stop', 'length', 'toolUse', not {stop_reason!r}"
        raise CodecError(msg + hint)
    try:
        reply: FauxReply = _decode_attrs(data, FauxReply, where)
    except CodecError:
        raise
    except ValueError as exc:  # FauxReply's own check: chunks must join to text
        msg = f"{where}: {exc}"
        raise CodecError(msg) from exc
    return reply


def faux_script_from_json(data: Any, *, source: str = "<data>") -> list[FauxReply]:
    """Decode a JSON faux script: a list of reply objects.

    Each reply may have ``text``, ``chunks``, ``toolCalls`` (``[{"id", "name",
    "arguments"}]``), ``error``, ``delay`` and ``chunkDelay`` (seconds), ``usage``
    (``{"input", "output", "cacheRead", "cacheWrite"}``), ``hang`` and ``stopReason``
    (``"stop"``, ``"length"`` or ``"toolUse"``) — the fields of ``FauxReply``
    in camelCase. ``[{"error": "503 Service Unavailable"}, {"text": "Hello!"}]`` fails
    once, then answers.

    Raises:
        FauxScriptError: naming ``source``, the reply's index and the bad key.
    """
    if not isinstance(data, list):
        kind = type(data).__name__
        msg = f"faux script {source} must be a JSON array of replies, not {kind}"
        raise FauxScriptError(msg)
    replies: list[FauxReply] = []
    for index, item in enumerate(data):
        try:
            replies.append(_reply_from_json(item, f"[{index}]"))
        except CodecError as exc:
            msg = f"faux script {source}: {exc}"
            raise FauxScriptError(msg) from exc
    return replies


def load_faux_script(path: str | Path) -> list[FauxReply]:
    """Read a JSON faux script file (see ``faux_script_from_json``).

    Args:
        path: the JSON file.

    Raises:
        FauxScriptError: the file cannot be read, is not JSON, or a reply is malformed.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read faux script {source}: {exc}"
        raise FauxScriptError(msg) from exc
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        msg = (
            f"faux script {source} is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}"
        )
        raise FauxScriptError(msg) from exc
    except ValueError as exc:  # too deep for the parser; an integer too long to read
        msg = f"faux script {source} cannot be read: {exc}"
        raise FauxScriptError(msg) from exc
    return faux_script_from_json(data, source=source)
