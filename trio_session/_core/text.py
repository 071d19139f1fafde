"""Text that can always be sent: lone surrogates made valid at the edges.

A Python ``str`` can hold code points that no UTF-8 encoder accepts: the lone
surrogates U+D800 … U+DFFF. They arrive from a JSON ``"\\ud83d"`` escape (a
JavaScript client that cut an emoji in half), from bytes decoded with
``surrogateescape``, or from an old session file. Sent on, they make the HTTP
request fail before it leaves; kept, they poison every later request. So text
is made valid where it enters: each lone surrogate becomes U+FFFD, the
replacement character, and the caller says so.
"""

from __future__ import annotations

import re
from typing import Any

#: U+FFFD, what an invalid code point becomes.
REPLACEMENT = "\ufffd"

# Any surrogate code point in a str: a lone one, or the two halves of a pair held as
# two code points (which valid_unicode joins).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD; paired halves are joined."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_text(text: str) -> tuple[str, int]:
    """``valid_unicode``, and how many code points were replaced."""
    if _LONE_SURROGATE.search(text) is None:
        return text, 0
    fixed = valid_unicode(text)
    return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)


def valid_json_value(value: Any) -> tuple[Any, int]:
    """A decoded JSON value with ``valid_text`` applied to every string in it.

    The value is walked without recursion, so no nesting is too deep for it.

    Args:
        value: the decoded JSON value.

    Returns:
        The repaired value (the same object if nothing needed repair) and the
        number of code points replaced.
    """
    if isinstance(value, str):
        return valid_text(value)
    containers: list[Any] = []  # every list and dict, each before what it holds
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            containers.append(item)
            stack.extend(item)
        elif isinstance(item, dict):
            containers.append(item)
            stack.extend(item.values())
    repaired: dict[int, Any] = {}  # by id: the containers that needed repair, repaired
    count = 0

    def fixed(item: Any) -> Any:
        nonlocal count
        if isinstance(item, str):
            text, replaced = valid_text(item)
            count += replaced
            return text
        return repaired.get(id(item), item)

    for container in reversed(containers):  # what a container holds is repaired first
        if isinstance(container, list):
            items = [fixed(item) for item in container]
            if any(new is not old for new, old in zip(items, container, strict=True)):
                repaired[id(container)] = items
        else:
            pairs = [(fixed(key), fixed(item)) for key, item in container.items()]
            if any(
                k is not key or v is not item
                for (k, v), (key, item) in zip(pairs, container.items(), strict=True)
            ):
                repaired[id(container)] = dict(pairs)
    return repaired.get(id(value), value), count
