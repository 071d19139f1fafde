"""What the chat shows of a conversation: blocks of lines, rendered for a width. Pure.

A ``Transcript`` is the list of finished blocks (banner, user messages, replies,
notes such as retry lines); the screen prints them into the scrollback once and
again only when the width changes (a resize redraws everything at the new width).
A reply being streamed is a ``ReplyView``: it renders the partial message as it
stands — a ``assistant:`` label, thinking dimmed, text as Markdown, tool calls —
so a reply has one label however its text arrives.

A tool's result shows under its call, collapsed to ``TOOL_PREVIEW`` lines with a
line saying how many more there are; Ctrl+O (``Transcript.expanded``) shows them
all, in every result, as the reference does. A failed tool's output shows in red.
A message an extension added (``custom_message``) shows with its type, unless it
asked not to be shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from .._core.classes import define
from .._core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._help import render_help
from ._render import MarkdownRenderer, Style, fit, render_note, render_user, wrap

LABEL = "assistant:"
INDENT = "  "
#: Lines of a tool's result shown while results are collapsed.
TOOL_PREVIEW = 5
EXPAND_HINT = "ctrl+o to expand"


def styled(text: str, sgr: str, style: Style) -> str:
    """``text`` in the SGR attributes ``sgr`` (``"1;36"``), or plain without colour."""
    return f"\x1b[{sgr}m{text}\x1b[0m" if style.color else text


@define(eq=False)
class ReplyView:
    """One assistant reply, streaming or finished, as lines for a width.

    Each text part has its own ``MarkdownRenderer``, whose cache makes re-rendering
    a growing reply cheap.
    """

    message: AssistantMessage
    style: Style = attrs.field(factory=Style)
    _markdown: dict[int, MarkdownRenderer] = attrs.field(factory=dict, init=False)

    def render(self, width: int) -> list[str]:
        """The label, then each part of the message; an error or abort says so last."""
        inner = max(width - len(INDENT), 8)
        body: list[str] = []
        for index, part in enumerate(self.message.content):
            if isinstance(part, TextContent) and part.text.strip():
                renderer = self._markdown.setdefault(index, MarkdownRenderer(style=self.style))
                body += [INDENT + line for line in renderer.render(part.text, inner)]
            elif isinstance(part, ThinkingContent) and part.thinking.strip():
                body += [
                    INDENT + styled(line, "2;3", self.style)
                    for line in wrap(part.thinking.strip(), inner)
                ]
            elif isinstance(part, ToolCall):
                call = f"→ {part.name}({_arguments(part)})"
                body += [INDENT + styled(line, "33", self.style) for line in wrap(call, inner)]
        lines = [styled(LABEL, "1;36", self.style), *body] if body else []
        message = self.message
        if message.stop_reason == "error" and message.error_message:
            lines += render_note(f"  ✗ {message.error_message}", width, style=self.style)
        elif message.stop_reason == "aborted" and body:
            lines += render_note("  ✗ aborted", width, style=self.style)
        return [fit(line, width) for line in lines]


def _arguments(call: ToolCall) -> str:
    text = json.dumps(dict(call.arguments), ensure_ascii=False)
    return text[1:-1] if len(text) <= 200 else text[1:197] + "…"


def render_tool_result(
    result: ToolResultMessage, width: int, *, expanded: bool, style: Style
) -> list[str]:
    """A tool's result: ``← name`` (``✗ name failed``) and its output, indented.

    Collapsed, the output shows its first ``TOOL_PREVIEW`` lines and how many more
    there are; an output with no text says so.
    """
    inner = max(width - 2 * len(INDENT), 8)
    head = f"✗ {result.tool_name} failed" if result.is_error else f"← {result.tool_name}"
    text = result.text.rstrip("\n")
    images = sum(1 for part in result.content if isinstance(part, ImageContent))
    rows = wrap(text, inner) if text.strip() else []
    if images:
        rows.append(f"[{images} image{'s' if images != 1 else ''}]")
    if not rows:
        rows = ["(no output)"]
    hidden = 0 if expanded else max(len(rows) - TOOL_PREVIEW, 0)
    if hidden:
        rows = rows[:TOOL_PREVIEW]
    sgr = "31" if result.is_error else "2"
    lines = [INDENT + styled(head, "31" if result.is_error else "33", style)]
    lines += [INDENT * 2 + styled(row, sgr, style) if row else "" for row in rows]
    if hidden:
        more = f"… ({hidden} more line{'s' if hidden != 1 else ''}, {EXPAND_HINT})"
        lines.append(INDENT * 2 + styled(more, "2", style))
    return [fit(line, width) for line in lines]


@define(eq=False)
class Block:
    """A finished piece of the transcript; its lines are kept per width."""

    kind: str  # "banner", "user", "reply", "note", "tool"
    text: str = ""
    reply: ReplyView | None = None
    style: Style = attrs.field(factory=Style)
    skip: int = 0  # lines already in the scrollback when it was added (a long reply)
    result: ToolResultMessage | None = None
    _cache: tuple[int, bool, list[str]] | None = attrs.field(default=None, init=False)

    def render(self, width: int, *, expanded: bool = False) -> list[str]:
        """The block's lines at ``width`` (each at most ``width`` cells); ``expanded``:
        a tool result in full."""
        if self._cache is None or self._cache[:2] != (width, expanded):
            self._cache = (width, expanded, self._render(width, expanded))
        return self._cache[2]

    def _render(self, width: int, expanded: bool) -> list[str]:
        if self.result is not None:
            return render_tool_result(self.result, width, expanded=expanded, style=self.style)
        if self.reply is not None:
            return self.reply.render(width)
        if self.kind == "user":
            return render_user(self.text, width, style=self.style)
        if self.kind == "help":
            return render_help(width, style=self.style)
        if self.kind == "banner":
            return [styled(line, "2", self.style) for line in wrap(self.text, width)]
        return render_note(self.text, width, style=self.style)


@define(eq=False)
class Transcript:
    """The finished blocks of the chat, in order; ``printed`` of them are on screen."""

    style: Style = attrs.field(factory=Style)
    blocks: list[Block] = attrs.field(factory=list)
    printed: int = 0
    expanded: bool = False  # tool results in full (Ctrl+O), else collapsed

    def add(
        self,
        kind: str,
        text: str = "",
        *,
        reply: ReplyView | None = None,
        result: ToolResultMessage | None = None,
    ) -> None:
        """Append a finished block (not yet printed)."""
        self.blocks.append(Block(kind, text, reply, style=self.style, result=result))

    def note(self, text: str) -> None:
        """Append a note line (``"  ✗ …"``, ``"  ↻ …"``)."""
        self.add("note", text)

    def unprinted(self, width: int) -> list[str]:
        """Lines of the blocks not printed yet; they count as printed from now on."""
        lines: list[str] = []
        for block in self.blocks[self.printed :]:
            lines += block.render(width, expanded=self.expanded)[block.skip :]
            block.skip = 0
        self.printed = len(self.blocks)
        return lines

    def all_lines(self, width: int) -> list[str]:
        """Every block's lines (a redraw after a resize); all count as printed."""
        self.printed = len(self.blocks)
        for block in self.blocks:
            block.skip = 0
        return [
            line for block in self.blocks for line in block.render(width, expanded=self.expanded)
        ]

    def clear(self) -> None:
        """Forget every block (another session was opened)."""
        self.blocks.clear()
        self.printed = 0

    def add_messages(self, messages: Iterable[Message]) -> None:
        """The blocks of a conversation so far (``--resume``, ``/resume``)."""
        for message in messages:
            if isinstance(message, ToolResultMessage):
                self.add("tool", result=message)
            for kind, text, reply in _blocks_of(message, self.style):
                self.add(kind, text, reply=reply)


def custom_note(message: CustomMessage) -> str:
    """What a ``custom_message`` shows: its type, then its text."""
    return f"  [{message.custom_type}] {message.text}"


def _blocks_of(message: Message, style: Style) -> Sequence[tuple[str, str, ReplyView | None]]:
    if isinstance(message, UserMessage):
        images = len(message.images)
        suffix = f" [{images} image{'s' if images != 1 else ''}]" if images else ""
        return [("user", message.text + suffix, None)]
    if isinstance(message, AssistantMessage):
        return [("reply", "", ReplyView(message, style=style))]
    if isinstance(message, BashExecutionMessage):
        output = message.output.rstrip("\n")
        text = f"  $ {message.command}" + (f"\n{output}" if output else "")
        return [("note", text, None)]
    if isinstance(message, CompactionSummaryMessage):
        first = message.summary.strip().splitlines()[0] if message.summary.strip() else ""
        return [("note", f"  ⇣ earlier turns were compacted: {first[:200]}", None)]
    if isinstance(message, BranchSummaryMessage):
        return [("note", "  ⎇ a branch was summarized", None)]
    if isinstance(message, CustomMessage) and message.display:
        return [("note", custom_note(message), None)]
    return []
