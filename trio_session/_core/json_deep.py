"""JSON of any depth, written and read without recursion: ``dumps`` and ``loads``.

A session file's tree is as deep as the session is long: pi's ``get_tree`` answer
nests each entry's node in its parent's ``children``, so a linear session of some
hundreds of entries is a value deeper than ``json`` can walk (its encoder and decoder
recurse, and raise ``RecursionError`` under a thousand levels). These two functions
try ``json`` first, which is fast and right for every ordinary value, and only when
it runs out of stack do the same work with an explicit stack:

* ``dumps`` encodes every container at most ``SHALLOW`` levels high with one call of
  ``json``'s own encoder, and writes the brackets, keys and separators of the higher
  ones itself, so the text is the one ``json.dumps`` would give.
* ``loads`` reads the text with a loop over a stack of open containers, using
  ``json``'s own string scanner and number pattern for the leaves.

They are for values this package makes (``get_tree``) or a peer it trusts sends (the
RPC client reading its server). Input from outside is still held to
``MAX_JSON_DEPTH`` where it enters (``._json``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from json.decoder import JSONDecodeError
from json.scanner import NUMBER_RE
from typing import Any, Final

#: Containers at most this many levels high are encoded by one call of ``json``: far
#: inside its recursion limit, and high enough that a session tree's entries go whole.
SHALLOW: Final = 64

#: ``json``'s reader of a string's body (from after its opening quote): the string and
#: where it ends. typeshed does not declare it.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

_CONTAINERS = (dict, list, tuple)
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_CONSTANTS: Final[dict[str, Any]] = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}
_CONSTANT = re.compile(r"true|false|null|NaN|-?Infinity")


def dumps(
    value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")
) -> str:
    """``json.dumps(value, ensure_ascii=…, separators=…)``, at any depth.

    Args:
        value: a JSON-compatible value (dicts, lists, tuples, strings, numbers,
            booleans, ``None``), nested as deeply as it likes.
        ensure_ascii: escape every non-ASCII character, as ``json.dumps`` does.
        separators: ``(item separator, key separator)``, as ``json.dumps`` takes.

    Raises:
        TypeError: a value ``json`` cannot encode.
        ValueError: a circular reference (a container inside itself).
    """
    encoder = _encoder(ensure_ascii, separators)
    try:
        return encoder.encode(value)
    except RecursionError:
        return _dumps_deep(value, encoder.encode, *separators)


@functools.cache
def _encoder(ensure_ascii: bool, separators: tuple[str, str]) -> json.JSONEncoder:
    """One encoder per set of options, made once: the RPC server encodes every line it
    writes, and an encoder holds nothing between two calls of ``encode``."""
    return json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)


def _heights(value: Any) -> dict[int, int]:
    """How many levels high each container in ``value`` is (by ``id``), found without
    recursion: 1 for a container of scalars, one more than its highest child else.

    The containers are listed parents first; read backwards, each one's children
    are measured before it is.
    """
    order: list[Any] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:  # shared by two parents: measured once
            continue
        seen.add(id(item))
        order.append(item)
        children = item.values() if isinstance(item, dict) else item
        stack.extend(c for c in children if isinstance(c, _CONTAINERS))
    heights: dict[int, int] = {}
    for item in reversed(order):
        highest = 0
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, _CONTAINERS):
                highest = max(highest, heights.get(id(child), 0))
        heights[id(item)] = highest + 1
    return heights


def _dumps_deep(
    value: Any, encode: Callable[[Any], str], item_separator: str, key_separator: str
) -> str:
    """``value`` as JSON text, brackets of high containers written here, low ones by ``encode``."""
    if not isinstance(value, _CONTAINERS):
        return encode(value)
    heights = _heights(value)
    out: list[str] = []
    open_ids: set[int] = set()  # the high containers being written, for cycles
    # Each item is (True, text to write), (None, a container's id that is written) or
    # (False, a value to encode); popped from the end.
    todo: list[tuple[bool | None, Any]] = [(False, value)]
    while todo:
        literal, item = todo.pop()
        if literal:
            out.append(item)
        elif literal is None:
            open_ids.discard(item)
        elif not isinstance(item, _CONTAINERS) or heights[id(item)] <= SHALLOW:
            out.append(encode(item))
        elif id(item) in open_ids:
            msg = "Circular reference detected"
            raise ValueError(msg)
        elif isinstance(item, dict):
            open_ids.add(id(item))
            todo.append((None, id(item)))
            out.append("{")
            todo.append((True, "}"))
            pairs = list(item.items())
            for index in range(len(pairs) - 1, -1, -1):
                key, child = pairs[index]
                todo.append((False, child))
                lead = item_separator if index else ""
                todo.append((True, lead + encode(_key_text(key)) + key_separator))
        else:
            open_ids.add(id(item))
            todo.append((None, id(item)))
            out.append("[")
            todo.append((True, "]"))
            for index in range(len(item) - 1, -1, -1):
                todo.append((False, item[index]))
                if index:
                    todo.append((True, item_separator))
    return "".join(out)


def _key_text(key: Any) -> str:
    """A dict key as the string ``json`` writes for it (``1`` → ``"1"``, ``True`` → ``"true"``)."""
    if isinstance(key, str):
        return key
    text: str = next(iter(json.loads(json.dumps({key: 0}))))
    return text


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, at any depth.

    Args:
        text: a JSON document (bytes are read as UTF-8).

    Raises:
        json.JSONDecodeError: the text is not JSON (``ValueError``).
    """
    try:
        return json.loads(text)
    except RecursionError:
        document = text.decode("utf-8") if isinstance(text, bytes) else text
        return _loads_deep(document)


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _key(text: str, position: int) -> tuple[str, int]:
    """An object's key and its ``:`` at ``position``; where its value starts."""
    if not text.startswith('"', position):
        raise JSONDecodeError("Expecting property name enclosed in double quotes", text, position)
    key, position = scanstring(text, position + 1)
    position = _skip(text, position)
    if not text.startswith(":", position):
        raise JSONDecodeError("Expecting ':' delimiter", text, position)
    return key, _skip(text, position + 1)


def _scalar(text: str, position: int) -> tuple[Any, int]:
    """The string, number or constant at ``position``, and where it ends."""
    if text.startswith('"', position):
        return scanstring(text, position + 1)
    number = NUMBER_RE.match(text, position)
    if number is not None:
        integer, fraction, exponent = number.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), number.end()
        return int(integer), number.end()
    constant = _CONSTANT.match(text, position)
    if constant is not None:
        return _CONSTANTS[constant.group()], constant.end()
    raise JSONDecodeError("Expecting value", text, position)


def _loads_deep(text: str) -> Any:
    """Read ``text`` with a stack of open containers instead of recursion."""
    # Each open container, with the key its next value goes under (objects only).
    stack: list[tuple[dict[str, Any] | list[Any], str]] = []
    position = _skip(text, 0)
    while True:
        opener = text[position : position + 1]
        if opener in ("{", "["):
            position = _skip(text, position + 1)
            closer = "}" if opener == "{" else "]"
            if not text.startswith(closer, position):
                if opener == "{":
                    key, position = _key(text, position)
                    stack.append(({}, key))
                else:
                    stack.append(([], ""))
                continue
            value: Any = {} if opener == "{" else []
            position += 1
        else:
            value, position = _scalar(text, position)
        # A value is complete: put it in its container, closing those it completes.
        while True:
            position = _skip(text, position)
            if not stack:
                if position != len(text):
                    raise JSONDecodeError("Extra data", text, position)
                return value
            container, key = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                container[key] = value
            mark = text[position : position + 1]
            if mark == ",":
                position = _skip(text, position + 1)
                if isinstance(container, dict):
                    key, position = _key(text, position)
                    stack[-1] = (container, key)
                break
            if mark != ("]" if isinstance(container, list) else "}"):
                raise JSONDecodeError("Expecting ',' delimiter", text, position)
            position += 1
            stack.pop()
            value = container
