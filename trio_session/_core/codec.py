"""One JSON codec for messages and events, with the reference's camelCase names.

There is no ``to_dict`` per class: the encoder walks attrs fields, renames
``snake_case`` to ``camelCase`` (``max_attempts`` → ``maxAttempts``), drops
``None`` values (so ``finalError`` appears only when set) and puts the
discriminator (``type`` or ``role``) first. The decoder reads the field types and
picks union members by their discriminator, so anything the encoder writes
round-trips, and anything malformed raises ``trio_session.CodecError``
naming the path of the bad value.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

import attrs

from .errors import CodecError
from .events import EVENT_TYPES, MessageUpdate, SessionEvent, StreamEvent
from .json_bounds import MAX_OBJECT_DEPTH, check_depth
from .messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    ToolResultMessage,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from ..providers._base import Model

_DISCRIMINATORS = ("type", "role")
_MESSAGE_TYPES: tuple[type[Any], ...] = (
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
)


@functools.cache
def camel(name: str) -> str:
    """``max_attempts`` → ``maxAttempts``."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    """``maxAttempts`` → ``max_attempts``."""
    return _SNAKE.sub("_", name).lower()


def _public_name(cls: type[Any], field: attrs.Attribute[Any]) -> str:
    """The name a field is read and written by: its own, or — for a private field that
    the class shows through a property of its ``alias`` (``MessageUpdate.message``) —
    that alias."""
    alias = field.alias
    if alias and field.name.startswith("_") and isinstance(getattr(cls, alias, None), property):
        return alias
    return field.name


@functools.cache
def _plan(cls: type[Any]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """How ``to_json`` writes an attrs class: its discriminator fields (written first),
    then every other field as ``(attribute, camelCase key)``, in field order."""
    fields = attrs.fields(cls)
    names = {f.name for f in fields}
    first = tuple(key for key in _DISCRIMINATORS if key in names)
    rest = []
    for field in fields:
        if field.name in first or field.metadata.get("wire") is False:
            continue  # a discriminator, written first; or ours, in memory only
        name = _public_name(cls, field)
        rest.append((name, camel(name)))
    return first, tuple(rest)


def to_json(value: Any) -> Any:
    """Turn a message, event or plain value into JSON-ready data.

    Args:
        value: a message, an event, any attrs value of the package, or plain data.

    Raises:
        CodecError: ``value`` nests deeper than ``MAX_OBJECT_DEPTH`` levels (a value
            from outside is held to ``MAX_JSON_DEPTH`` where it comes in; see
            ``trio_session._core.json_bounds``).
    """
    return _to_json(value, MAX_OBJECT_DEPTH)


def _to_json(value: Any, room: int) -> Any:
    """``to_json`` with ``room`` levels of containers left."""
    cls = type(value)
    if cls is str or cls is int or cls is bool or cls is float or value is None:
        return value
    if attrs.has(cls):
        if not room:
            _too_deep()
        first, rest = _plan(cls)
        out: dict[str, Any] = {}
        for key in first:
            tag = getattr(value, key)
            if isinstance(tag, str):
                out[key] = tag
        for name, key in rest:
            item = getattr(value, name)
            if item is not None:
                out[key] = _to_json(item, room - 1)
        if cls is Usage:
            out["totalTokens"] = value.total_tokens
        return out
    if isinstance(value, (tuple, list)):
        if not room:
            _too_deep()
        return [_to_json(v, room - 1) for v in value]
    if isinstance(value, Mapping):
        if not room:
            _too_deep()
        return {str(k): _to_json(v, room - 1) for k, v in value.items()}
    return value


def _too_deep() -> None:
    msg = f"cannot encode a value nested deeper than {MAX_OBJECT_DEPTH} levels"
    raise CodecError(msg)


def event_to_json(event: SessionEvent) -> dict[str, Any]:
    """Encode an event as the reference's JSON object (``{"type": "auto_retry_end", …}``).

    Args:
        event: any ``SessionEvent``.
    """
    data: dict[str, Any] = to_json(event)
    return data


def update_to_json(update: MessageUpdate, *, lean: bool = False) -> dict[str, Any]:
    """Encode a ``message_update``: as ``event_to_json`` does, or in the lean shape.

    The default is the reference's shape, ``{"type", "message", "delta",
    "assistantMessageEvent": {…, "partial"}}``; the message is encoded once and
    the same object stands for ``partial`` (it is the same message), so encode the
    result before changing it. ``lean`` leaves out ``message``, ``partial`` and the
    top-level ``delta``: ``{"type": "message_update", "assistantMessageEvent":
    {"type", "contentIndex", "delta" | "content" | "toolCall"}}`` — a line's size no
    longer grows with the text before it.
    """
    event = update.assistant_message_event
    if not isinstance(event, StreamEvent):  # made by hand: no view to share
        if not lean:
            return event_to_json(update)
        fields: Mapping[str, Any] = {k: v for k, v in event.items() if k != "partial"}
    else:
        fields = event.fields
    encoded = {str(k): to_json(v) for k, v in fields.items()}
    if lean:
        return {"type": update.type, "assistantMessageEvent": encoded}
    message = to_json(update.message)
    encoded["partial"] = message
    return {
        "type": update.type,
        "message": message,
        "delta": update.delta,
        "assistantMessageEvent": encoded,
    }


def message_to_json(message: Message) -> dict[str, Any]:
    """Encode a message as the reference's JSON object (``{"role": "assistant", …}``).

    Args:
        message: any ``Message``.
    """
    data: dict[str, Any] = to_json(message)
    return data


@functools.cache
def _by_discriminator(classes: tuple[type[Any], ...]) -> tuple[str, dict[str, type[Any]]]:
    for key in _DISCRIMINATORS:
        table: dict[str, type[Any]] = {}
        for cls in classes:
            field = getattr(attrs.fields(cls), key, None)
            if field is None or not isinstance(field.default, str):
                break
            table[field.default] = cls
        else:
            return key, table
    msg = f"no common discriminator for {classes!r}"
    raise TypeError(msg)


@functools.cache
def _hints(cls: type[Any]) -> dict[str, Any]:
    """Each field's type; for a field shown through a property, the property's type."""
    hints = typing.get_type_hints(cls)
    for field in attrs.fields(cls):
        name = _public_name(cls, field)
        if name != field.name:
            hints[field.name] = typing.get_type_hints(getattr(cls, name).fget)["return"]
    return hints


def _decode(data: Any, tp: Any, path: str) -> Any:
    if tp is Any:
        check_depth(data, path)  # a value from outside, free of any schema
        return data
    origin = get_origin(tp)
    if origin is Literal:
        if data not in get_args(tp):
            choices = ", ".join(repr(a) for a in get_args(tp))
            msg = f"{path} must be one of {choices}, not {data!r}"
            raise CodecError(msg)
        return data
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        members = tuple(a for a in args if a is not type(None))
        if len(members) == 1:
            return _decode(data, members[0], path)
        if all(attrs.has(m) for m in members):
            return _decode_union(data, members, path)
        for member in members:
            try:
                return _decode(data, member, path)
            except CodecError:
                continue
        msg = f"{path} has an unexpected value {data!r}"
        raise CodecError(msg)
    if origin is tuple:
        if not isinstance(data, list):
            msg = f"{path} must be a list, not {type(data).__name__}"
            raise CodecError(msg)
        (item_tp, _ellipsis) = get_args(tp)
        return tuple(_decode(v, item_tp, f"{path}[{i}]") for i, v in enumerate(data))
    if origin is not None and issubclass(origin, Mapping):
        if not isinstance(data, dict):
            msg = f"{path} must be an object, not {type(data).__name__}"
            raise CodecError(msg)
        check_depth(data, path)  # tool-call arguments, details: free of any schema
        return dict(data)
    if attrs.has(tp):
        return _decode_attrs(data, tp, path)
    if tp is bool:
        if not isinstance(data, bool):
            msg = f"{path} must be a boolean, not {data!r}"
            raise CodecError(msg)
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            msg = f"{path} must be an integer, not {data!r}"
            raise CodecError(msg)
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            msg = f"{path} must be a number, not {data!r}"
            raise CodecError(msg)
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            msg = f"{path} must be a string, not {data!r}"
            raise CodecError(msg)
        return data
    msg = f"cannot decode {path} as {tp!r}"  # pragma: no cover - a bug in a type hint
    raise TypeError(msg)


def _admits_none(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def _decode_union(data: Any, members: tuple[type[Any], ...], path: str) -> Any:
    key, table = _by_discriminator(members)
    if not isinstance(data, dict):
        msg = f"{path} must be an object, not {type(data).__name__}"
        raise CodecError(msg)
    tag = data.get(key)
    cls = table.get(tag) if isinstance(tag, str) else None
    if cls is None:
        choices = ", ".join(repr(t) for t in table)
        msg = f"{path}.{key} must be one of {choices}, not {tag!r}"
        raise CodecError(msg)
    return _decode_attrs(data, cls, path)


def _decode_attrs(data: Any, cls: Any, path: str) -> Any:
    if not isinstance(data, dict):
        msg = f"{path} must be an object, not {type(data).__name__}"
        raise CodecError(msg)
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.metadata.get("wire") is False:
            continue  # ours, in memory only: never read from outside
        arg = field.alias or field.name  # the name __init__ takes it by
        key = camel(_public_name(cls, field))
        if key not in data or (data[key] is None and field.default is not attrs.NOTHING):
            if field.default is not attrs.NOTHING:
                continue
            if _admits_none(hints[field.name]):  # written without its None value
                kwargs[arg] = None
                continue
            msg = f"{path}.{key} is missing"
            raise CodecError(msg)
        kwargs[arg] = _decode(data[key], hints[field.name], f"{path}.{key}")
    return cls(**kwargs)


def event_from_json(data: Any) -> SessionEvent:
    """Decode an event object; raises ``CodecError`` naming the bad field.

    Args:
        data: a decoded JSON object.
    """
    event: SessionEvent = _decode_union(data, EVENT_TYPES, "event")
    return event


def message_from_json(data: Any) -> Message:
    """Decode a message object; raises ``CodecError`` naming the bad field.

    Args:
        data: a decoded JSON object.
    """
    message: Message = _decode_union(data, _MESSAGE_TYPES, "message")
    return message


# -- models -----------------------------------------------------------------------------


def model_to_json(model: Model) -> dict[str, Any]:
    """A ``Model`` as the reference's full Model object (RPC ``get_state``, ``set_model`` …).

    ``{"id", "name", "api", "provider", "baseUrl", "reasoning", "input", "contextWindow",
    "maxTokens", "cost": {"input", "output", "cacheRead", "cacheWrite"}}`` in that order,
    then ``"compat"`` when models.json gave the model one (as pi's Model carries it).
    The reference's models always have a ``baseUrl``; a model without one gets ``""``.

    Args:
        model: the model to encode.
    """
    cost = model.cost
    data: dict[str, Any] = {
        "id": model.id,
        "name": model.name,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": model.base_url or "",
        "reasoning": model.reasoning,
        "input": list(model.input),
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
        "cost": {
            "input": cost.input,
            "output": cost.output,
            "cacheRead": cost.cache_read,
            "cacheWrite": cost.cache_write,
        },
    }
    if model.compat is not None:
        data["compat"] = to_json(model.compat)
    return data
