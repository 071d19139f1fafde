"""The views a ``message_update`` carries: its message as it stood, made when first read.

A streamed answer is told as one ``message_update`` per chunk, and each carries the
message so far. Making that message for every chunk would cost time and memory in
proportion to the text so far, for every chunk. So the builder
(``trio_session._agent.builder``) keeps the part still growing as a list of pieces, and
each update gets a ``PartialMessage``: a few references and counts. Its ``message`` is
made on first read; ``StreamEvent`` is the update's ``assistant_message_event``, which
makes its ``"partial"`` the same way. Kept beside ``trio_session._core.events``, which names
them too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .classes import define
from .messages import AssistantMessage, ContentPart, TextContent, ThinkingContent


@define(eq=False)
class GrowingPart:
    """The text or thinking part a streaming answer is still adding to.

    ``pieces`` only ever grows (the builder appends each delta), so a view that
    remembers how many pieces there were sees the same text however long the
    answer goes on. ``signature`` is a thinking part's signature so far.
    """

    kind: type[TextContent] | type[ThinkingContent]
    pieces: list[str] = attrs.field(factory=list)
    signature: str | None = None
    # The text of the first ``_joined_count`` pieces, the last one a view asked for: a
    # later view joins only the pieces added since (a reader of every update's message
    # then copies the text, but joins each piece once).
    _joined: str = attrs.field(default="", init=False)
    _joined_count: int = attrs.field(default=0, init=False)

    def part(self, count: int, signature: str | None) -> TextContent | ThinkingContent:
        """The part as it was with its first ``count`` pieces and that signature."""
        text = self._text(count)
        if self.kind is TextContent:
            return TextContent(text)
        return ThinkingContent(text, thinking_signature=signature)

    def _text(self, count: int) -> str:
        """The first ``count`` pieces joined, from the text joined last when it is a prefix."""
        done = self._joined_count
        if count < done:  # an older view, read after a newer one: join it afresh
            return "".join(self.pieces[:count])
        if count > done:
            self._joined += "".join(self.pieces[done:count])
            self._joined_count = count
        return self._joined


@define(eq=False, repr=False)
class PartialMessage:
    """A streaming assistant message as it stood at one update; built when first read.

    Making the whole message for every chunk would cost time and memory in
    proportion to the text so far, for every chunk. A view costs a few
    references: the finished parts (a list its builder only appends to) and how
    many of them there were, the growing part and how many of its pieces,
    and ``head`` — the message's other fields (usage, provider, model, response
    id …) with no content. ``message`` joins the text on first read, and keeps it.
    """

    parts: list[ContentPart]
    done: int
    growing: GrowingPart | None
    pieces: int
    signature: str | None
    head: AssistantMessage
    timestamp: int
    _message: AssistantMessage | None = attrs.field(default=None, init=False)

    @property
    def message(self) -> AssistantMessage:
        """The message as it was at this update (made once, then kept)."""
        if self._message is None:
            content: list[ContentPart] = self.parts[: self.done]
            if self.growing is not None:
                content.append(self.growing.part(self.pieces, self.signature))
            self._message = attrs.evolve(self.head, content=content, timestamp=self.timestamp)
        return self._message

    def __repr__(self) -> str:
        return f"PartialMessage({self.message!r})"


class StreamEvent(Mapping[str, Any]):
    """A ``message_update``'s ``assistant_message_event``: its fields, and ``"partial"``.

    It reads as the plain mapping ``{"type": …, "contentIndex": …, …, "partial":
    <the message so far>}`` — equal to that dict, and written as it by the codec —
    but ``"partial"`` is made only when it is read.
    """

    __slots__ = ("_fields", "_partial")

    def __init__(self, fields: Mapping[str, Any], partial: PartialMessage) -> None:
        self._fields = fields
        self._partial = partial

    def __getitem__(self, key: str) -> Any:
        if key == "partial":
            return self._partial.message
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._fields
        yield "partial"

    def __len__(self) -> int:
        return len(self._fields) + 1

    def __contains__(self, key: object) -> bool:
        return key == "partial" or key in self._fields

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` (``"partial"`` is made on first read)."""
        if key == "partial":
            return self._partial.message
        return self._fields.get(key, default)

    @property
    def fields(self) -> Mapping[str, Any]:
        """Everything but ``"partial"``: what the lean RPC mode writes."""
        return self._fields

    @property
    def view(self) -> PartialMessage:
        """The view ``"partial"`` is made from."""
        return self._partial

    def __repr__(self) -> str:
        return repr(dict(self))
