"""The RPC wire, below the commands: JSON lines in and out, answers, and what is not a command.

``decode_json_line`` turns a line into JSON or says why it is not; ``Rejected`` is a
line that gets one error answer; ``Response`` and ``response_to_json`` shape every
answer; ``encode_line`` writes one JSON line; ``LineSplitter`` cuts a byte stream into
lines with a cap that never buffers more than the cap. Pure: no I/O, no session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Protocol, TypeAlias

import attrs

from .._core.classes import define, frozen
from .._core.json_bounds import MAX_JSON_DEPTH, TOO_DEEP, json_depth
from .._core.json_deep import dumps

MAX_LINE_BYTES: Final = 1024 * 1024
"""Longest command line the server reads (bytes, without the newline). A longer line gets one
error response and is skipped up to its newline, never buffered (R-42)."""

#: The prefix of every ``command: "parse"`` error, as in the reference.
PARSE_ERROR_PREFIX: Final = "Failed to parse command: "

CommandId: TypeAlias = str | int
"""A command's ``id``: a string (the reference's ``req_1``) or an integer; echoed back."""


class Named(Protocol):
    """What an answer needs of a command: its ``type`` and its ``id``."""

    @property
    def type(self) -> str:
        """The command's name on the wire."""
        ...

    @property
    def id(self) -> CommandId | None:
        """The request id, echoed in the answer."""
        ...


@frozen
class Rejected:
    """A line that is not a command this server runs; it gets exactly one error response.

    Attributes:
        command: the command's ``type`` when it had a usable one, else ``"parse"``.
        error: what is wrong, naming the field and the value.
        id: the line's ``id`` if it was a valid one, so the client can correlate.
    """

    command: str
    error: str
    id: CommandId | None = None


#: What ``parse_command`` returns for every line.


def describe(value: Any, limit: int = 60) -> str:
    """A value as JSON text, cut to ``limit`` characters, for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - values here come from json.loads
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _reject_constant(name: str) -> Any:
    msg = f"{name} is not valid JSON"
    raise ValueError(msg)


def parse_failure(detail: str) -> Rejected:
    return Rejected(command="parse", error=PARSE_ERROR_PREFIX + detail)


#: The one decoder of command lines: ``json.loads`` with an option makes one per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
#: What ``json.loads`` says of a text that starts with a byte order mark.
_BOM_ERROR: Final = "Unexpected UTF-8 BOM (decode using utf-8-sig)"


def decode_json_line(line: bytes) -> Any | Rejected:
    """Decode one line (without its newline) as JSON, or say why it is not.

    A trailing ``\\r`` is dropped. Invalid UTF-8, an empty line, invalid JSON,
    ``NaN``/``Infinity`` and nesting deeper than ``MAX_JSON_DEPTH`` are all
    ``Rejected`` with ``command: "parse"``, each saying what ``json.loads`` says of it.
    Every line of a client is decoded here, so it does no more than that needs: one
    decoder for all lines, and the depth walked only when the line has more opening
    brackets than the depth allowed (each level opens one).
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return parse_failure(
            f"the line is not valid UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start})"
        )
    try:
        if text.startswith("\ufeff"):  # json.loads's check, which the decoder lacks
            raise json.JSONDecodeError(_BOM_ERROR, text, 0)
        data = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            return parse_failure("the line is empty; expected a JSON object")
        return parse_failure(f"{exc.msg} at column {exc.colno}")
    except RecursionError:  # deeper than the parser goes: always past MAX_JSON_DEPTH
        return parse_failure(f"the JSON is {TOO_DEEP}")
    except ValueError as exc:  # NaN, Infinity; a number too long
        return parse_failure(str(exc))
    if line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH and json_depth(data) > MAX_JSON_DEPTH:
        return parse_failure(f"the JSON is {TOO_DEEP}")
    return data


@frozen
class Response:
    """The answer to one command line.

    Attributes:
        command: the command's ``type`` (``"parse"`` for a line that was not one).
        success: whether the command did what it was asked.
        id: the command's ``id``, echoed when it had one.
        data: the result, for commands that return one (``get_state`` …).
        error: why it failed, when ``success`` is false.
        null_data: send ``"data": null`` (the reference's answer to ``cycle_model``
            and ``cycle_thinking_level`` when nothing changed).
    """

    command: str
    success: bool = True
    id: CommandId | None = None
    data: Mapping[str, Any] | None = None
    error: str | None = None
    null_data: bool = False

    @classmethod
    def ok(cls, command: Named, data: Mapping[str, Any] | None = None) -> Response:
        """A success answer to ``command``.

        Args:
            command: the command answered.
            data: the answer's ``data``, if any.
        """
        return cls(command=command.type, success=True, id=command.id, data=data)

    @classmethod
    def failed(cls, command: Named | Rejected, error: str) -> Response:
        """A failure answer to ``command`` (or to a rejected line) saying ``error``.

        Args:
            command: the command answered, or the line that was rejected.
            error: the error message.
        """
        name = command.command if isinstance(command, Rejected) else command.type
        return cls(command=name, success=False, id=command.id, error=error)

    @classmethod
    def rejected(cls, rejected: Rejected) -> Response:
        """The one error answer a rejected line gets (R-42).

        Args:
            rejected: why the line was not a command.
        """
        return cls.failed(rejected, rejected.error)


def response_to_json(response: Response) -> dict[str, Any]:
    """The reference's response object: ``{"id"?, "type": "response", "command",
    "success", "data"?, "error"?}``, keys in that order, absent ones left out.

    Args:
        response: the response to write.
    """
    out: dict[str, Any] = {}
    if response.id is not None:
        out["id"] = response.id
    out["type"] = "response"
    out["command"] = response.command
    out["success"] = response.success
    if response.data is not None:
        out["data"] = response.data
    elif response.null_data:
        out["data"] = None
    if response.error is not None:
        out["error"] = response.error
    return out


_LINE_SEPARATORS = (("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One JSON line: compact, UTF-8, ending in ``\\n``.

    U+2028 and U+2029 are escaped, as the reference does, so that readers that
    split on every Unicode line break still see one object per line. Nested as
    deeply as it likes (``get_tree`` of a long session), it is written without
    recursion (``_core/json_deep.py:dumps``). A string
    that cannot be UTF-8 (a lone surrogate from a ``\\ud800`` escape) makes the
    whole line ASCII-escaped instead of failing.

    Args:
        obj: the JSON object to write.
    """
    text = dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in _LINE_SEPARATORS:
        if raw in text:
            text = text.replace(raw, escaped)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return data + b"\n"


@frozen
class Overlong:
    """Stands for a line longer than the splitter's cap; its bytes were dropped.

    Attributes:
        limit: the cap the line went past, in bytes.
    """

    limit: int

    @property
    def rejected(self) -> Rejected:
        """The parse error the overlong line gets."""
        return parse_failure(f"the line is longer than {self.limit} bytes")


@define(eq=False)
class LineSplitter:
    """Cuts a byte stream into lines at ``\\n``, holding at most ``max_line_bytes``.

    ``feed`` returns the complete lines (without ``\\n``) in a chunk; a line
    that grows past the cap comes out once, as ``Overlong``, as soon as it
    does — and its remaining bytes are dropped up to the next newline. ``None``
    means no cap (the client reading a server it trusts).

    Attributes:
        max_line_bytes: the longest line kept, in bytes; ``None`` for no cap.
    """

    max_line_bytes: int | None = MAX_LINE_BYTES
    _buffer: bytearray = attrs.field(factory=bytearray, init=False)
    _skipping: bool = attrs.field(default=False, init=False)

    def feed(self, data: bytes | bytearray) -> list[bytes | Overlong]:
        """Take the next chunk; return the lines it completes, in order.

        Args:
            data: the next chunk of the stream.
        """
        out: list[bytes | Overlong] = []
        limit = self.max_line_bytes
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            elif limit is not None and len(self._buffer) + end - start > limit:
                out.append(Overlong(limit))
            elif self._buffer:
                self._buffer += data[start:end]
                out.append(bytes(self._buffer))
            else:
                out.append(bytes(data[start:end]))
            self._buffer.clear()
            start = end + 1
        if not self._skipping and start < len(data):
            if limit is not None and len(self._buffer) + len(data) - start > limit:
                out.append(Overlong(limit))
                self._buffer.clear()
                self._skipping = True
            else:
                self._buffer += data[start:]
        return out

    def close(self) -> list[bytes | Overlong]:
        """End of stream: the last line, if it had no newline and is not empty."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        skipping, self._skipping = self._skipping, False
        return [rest] if rest and not skipping else []
