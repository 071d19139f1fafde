"""JSON from outside: how deeply it may nest, and reading it without a ``RecursionError``.

Data from a model (a tool call's arguments), an RPC client (a command line) or a file
(a session entry, a faux script) is walked by recursive code: the codec, the tool
argument checks, ``json`` itself. Nested deeply enough, a valid value would raise
``RecursionError`` in the middle of a run, far from where it came in. So a value from
outside is held to ``MAX_JSON_DEPTH`` where it enters, with an error that says so, and
``loads`` turns the parser's own ``RecursionError`` into a ``CodecError``.

Depth counts containers: a string or a number is 0 levels deep, ``{}`` and ``[]`` are
1, ``{"a": [1]}`` is 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .errors import CodecError

#: How deeply a JSON value from outside may nest: a tool call's arguments from a
#: model, a value in a session-file entry or a faux script, an RPC command line. Far
#: more than any real value needs, and far inside Python's recursion limit, frames
#: of the interpreter and of every walk over the value included.
MAX_JSON_DEPTH: Final = 256

#: How deeply a walk over one of the package's own objects may go: a value at
#: ``MAX_JSON_DEPTH`` inside the objects that carry it (an event, its message, the
#: message's content, a tool call: a handful of levels), with room to spare.
MAX_OBJECT_DEPTH: Final = MAX_JSON_DEPTH + 32

_SCALARS = (str, int, float, type(None))

#: The end of every error message about depth.
TOO_DEEP: Final = f"nested deeper than {MAX_JSON_DEPTH} levels"
#: What a reply with a tool call nested too deeply ends with (after "Invalid response
#: from server: "). It names no tool: a model's text in it could sway the classifier.
TOO_DEEP_ARGUMENTS: Final = f"the arguments of a tool call are {TOO_DEEP}"


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How many containers deep ``value`` nests, counted without recursion.

    Dicts (any ``Mapping``), lists and tuples are containers. Counting stops once the
    depth passes ``limit``: a deeper value gives ``limit + 1``.

    Args:
        value: a decoded JSON value (or the same shapes built in Python).
        limit: the depth past which counting stops.

    Returns:
        The depth: 0 for a scalar, 1 for ``{}`` or ``[]``, at most ``limit + 1``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((child, depth + 1) for child in children if not isinstance(child, _SCALARS))
    return deepest


def check_depth(value: Any, what: str) -> None:
    """Raise ``CodecError`` if ``value`` nests deeper than ``MAX_JSON_DEPTH``.

    Args:
        value: a decoded JSON value.
        what: names the value in the message (``"message.content[0].arguments"``).

    Raises:
        CodecError: ``"<what> is nested deeper than 256 levels"``.
    """
    if json_depth(value) > MAX_JSON_DEPTH:
        msg = f"{what} is {TOO_DEEP}"
        raise CodecError(msg)


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads``, but a document too deep for the parser is a ``CodecError``.

    ``json`` reads nesting as deep as the interpreter's recursion limit allows (under
    a thousand levels up to Python 3.12, some thousands on 3.13) and raises
    ``RecursionError`` past it. That is always deeper than ``MAX_JSON_DEPTH``, so the
    error says so; being a ``ValueError``, it is caught wherever malformed JSON is.

    Args:
        text: the JSON text.
        options: passed to ``json.loads`` (``parse_constant`` …).

    Raises:
        json.JSONDecodeError: the text is not JSON.
        CodecError: ``"the JSON is nested deeper than 256 levels"``.
    """
    try:
        return json.loads(text, **options)
    except RecursionError:
        msg = f"the JSON is {TOO_DEEP}"
        raise CodecError(msg) from None
