"""The overflow path: make the runtime context fit again (R-2, R-50).

When a run ends in a context-overflow error, the session removes the error from
the runtime context, emits ``compaction_start {reason: "overflow"}``, asks
its ``Compactor`` for a smaller context, emits ``compaction_end`` and —
if the context shrank — continues the run once. ``AgentSession.compact`` runs
the same compactor on demand (``reason: "manual"``). The compaction algorithm is
replaceable. The default, ``SummarizingCompactor``, asks the session's model
to summarise the older turns and keeps the recent ones verbatim; when that request
fails (or overflows too) it falls back to ``DropOldestCompactor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from ._classes import frozen
from ._events import CompactionReason, CompactionResult
from ._messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)
from ._settings_values import CompactionSettings
from ._stats import estimate_context_tokens
from ._stats import estimate_tokens as message_tokens
from .providers._base import Model

#: Rough characters per token, for estimating the size of a context.
CHARS_PER_TOKEN = 4


@frozen
class Compaction:
    """A compactor's answer: the new runtime context and what changed.

    Attributes:
        messages: the new runtime context.
        result: what changed.
    """

    messages: tuple[Message, ...]
    result: CompactionResult


class Ask(Protocol):
    """Ask the session's model once, outside the conversation (no events)."""

    async def __call__(
        self, messages: Sequence[Message], *, system_prompt: str | None = None
    ) -> AssistantMessage:
        """The model's reply; a failure is an error message, never an exception."""
        ...


class Compactor(Protocol):
    """Shrinks a runtime context that no longer fits the model."""

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        model: Model,
        settings: CompactionSettings,
        ask: Ask,
    ) -> Compaction | None:
        """Return a smaller context, or ``None`` if nothing can be removed.

        Args:
            messages: the runtime context, the overflow error already removed.
            model: the session's model (its ``context_window`` is the budget).
            settings: the ``compaction`` group.
            ask: a way to ask the model, e.g. for a summary.
        """
        ...


def can_compact(
    compactor: Compactor,
    messages: Sequence[Message],
    *,
    model: Model,
    settings: CompactionSettings,
) -> bool:
    """Whether ``compactor`` would find anything to remove from ``messages`` on an
    overflow (R-56a), asked before ``agent_end`` so that its ``willRetry`` is true only
    when a continuation follows. A compactor tells by a ``can_compact`` method taking
    these arguments; one without it is taken to be able to.

    Args:
        compactor: the session's compactor.
        messages: the runtime context, the failure already left out.
        model: the session's model.
        settings: the ``compaction`` group.
    """
    check = getattr(compactor, "can_compact", None)
    if check is None:
        return True
    return bool(check(messages, model=model, settings=settings))


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough token count: characters / 4, at least 1 per message."""
    total = 0
    for m in messages:
        if isinstance(m, AssistantMessage):
            chars = len(m.text) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
        else:
            images = len(getattr(m, "images", ()))  # the reference counts ~1200 tokens each
            chars = len(m.text) + images * 1200 * CHARS_PER_TOKEN
        total += max(1, chars // CHARS_PER_TOKEN)
    return total


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Group a context into turns, each starting at a user message."""
    turns: list[list[Message]] = []
    for m in messages:
        if isinstance(m, UserMessage) or not turns:
            turns.append([])
        turns[-1].append(m)
    return turns


@frozen
class DropOldestCompactor:
    """The default compactor: drop the oldest turns until the context fits.

    The provider said the context is too big, whatever our estimate says, so it
    drops turns until the estimate is at most half of what it was *and* under
    ``target_ratio`` of the model's context window — but always keeps the last
    ``compaction.keepRecentTurns`` turns verbatim.

    Attributes:
        target_ratio: the share of the model's context window the kept turns must fit in.
    """

    target_ratio: float = 0.75

    def can_compact(
        self, messages: Sequence[Message], *, model: Model, settings: CompactionSettings
    ) -> bool:
        """Whether ``compact`` would drop anything: more turns than it keeps.

        Args:
            messages: the runtime context.
            model: the model (not needed to tell).
            settings: the ``compaction`` settings (``keepRecentTurns``).
        """
        return len(split_turns(messages)) > settings.keep_recent_turns

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        model: Model,
        settings: CompactionSettings,
        ask: Ask | None = None,
    ) -> Compaction | None:
        """Drop the oldest turns; ``None`` when only the kept turns are left.

        Args:
            messages: the runtime context.
            model: the model, for its context window.
            settings: the ``compaction`` settings (``keepRecentTurns``).
            ask: not used: this compactor asks no model.
        """
        turns = split_turns(messages)
        keep = settings.keep_recent_turns
        if len(turns) <= keep:
            return None
        before = estimate_tokens(messages)
        target = min(model.context_window * self.target_ratio, before / 2)
        dropped = 0
        while len(turns) - dropped > keep and estimate_tokens(_flatten(turns[dropped:])) > target:
            dropped += 1
        kept = _flatten(turns[dropped:])
        removed = len(messages) - len(kept)
        result = CompactionResult(
            summary=f"Dropped the {dropped} oldest turn(s) ({removed} messages) to fit the "
            f"context window of {model.id}.",
            tokens_before=before,
            tokens_after=estimate_tokens(kept),
            messages_removed=removed,
        )
        return Compaction(messages=tuple(kept), result=result)


#: The reference's file tools, by what they do to the file named in ``path``.
_READ_TOOLS = frozenset({"read"})
_WRITE_TOOLS = frozenset({"write", "edit"})


def file_operations(messages: Sequence[Message]) -> dict[str, list[str]]:
    """The files the summarised messages' tool calls read and changed — the
    reference's compaction ``details``: ``{"readFiles": […], "modifiedFiles": […]}``,
    each sorted; a file both read and changed is listed as changed only."""
    read: set[str] = set()
    modified: set[str] = set()
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            path = call.arguments.get("path")
            if not isinstance(path, str):
                continue
            if call.name in _READ_TOOLS:
                read.add(path)
            elif call.name in _WRITE_TOOLS:
                modified.add(path)
    return {"readFiles": sorted(read - modified), "modifiedFiles": sorted(modified)}


def _is_cut_point(message: Message) -> bool:
    """Whether the kept part may start here: anything but a tool result (the reference's)."""
    return not isinstance(message, ToolResultMessage)


def cut_point(messages: Sequence[Message], keep_recent_tokens: int) -> int | None:
    """Where the kept part of ``messages`` starts — the reference's ``findCutPoint``.

    Walking back from the newest message, about ``keep_recent_tokens`` tokens are kept
    (``trio_session._stats.estimate_tokens`` per message); the cut moves forward to the
    nearest message a context may start with (not a tool result). A previous
    compaction's summary is never kept verbatim: it is summarised again. When
    everything fits, everything is kept (the cut is at the first message after the
    summary). ``None`` when there is nothing to compact: an empty context, or one that
    is only a summary.
    """
    start = 1 if messages and isinstance(messages[0], CompactionSummaryMessage) else 0
    valid = [i for i in range(start, len(messages)) if _is_cut_point(messages[i])]
    if not valid:
        return None
    cut = valid[0]
    kept = 0
    for index in range(len(messages) - 1, start - 1, -1):
        kept += message_tokens(messages[index])
        if kept >= keep_recent_tokens:
            cut = next((c for c in valid if c >= index), cut)
            break
    return cut


def summarizable(messages: Sequence[Message], settings: CompactionSettings) -> bool:
    """Whether the reference's cut (``cut_point``, ``compaction.keepRecentTokens``) leaves
    anything before it to summarise — pi 1.6.0's ``prepareCompaction``, which a manual
    compaction asks under ``retry.profile`` ``"pi-1.6"`` before any compactor runs (R-56a).

    Args:
        messages: the runtime context.
        settings: the ``compaction`` settings.
    """
    cut = cut_point(messages, settings.keep_recent_tokens)
    start = 1 if messages and isinstance(messages[0], CompactionSummaryMessage) else 0
    return cut is not None and cut > start


def _flatten(turns: Sequence[Sequence[Message]]) -> list[Message]:
    return [m for turn in turns for m in turn]


SUMMARY_SYSTEM_PROMPT = (
    "You compress conversations so that they can be continued in a smaller context."
)
SUMMARY_REQUEST = (
    "Summarise the conversation above for your own later use: the user's goals, what "
    "was decided and done, facts learned, open questions, and every file name, "
    "identifier or number that still matters. Write only the summary."
)


@frozen
class SummarizingCompactor:
    """The default compactor: summarise the older messages, keep the recent ones.

    As the reference: about ``compaction.keepRecentTokens`` (20 000) tokens of the most
    recent messages are kept verbatim (``cut_point``); the messages before them — a
    previous summary included — are sent to the model with a request to summarise
    them; the new context is a ``CompactionSummaryMessage`` holding the summary (the
    model is sent it with the reference's wording), then the kept messages. On an
    overflow that estimate can be wrong (everything "fits"); then the last
    ``compaction.keepRecentTurns`` turns are kept, so the context shrinks (R-50). If
    the summary request fails — an error, an overflow of its own, an empty answer — the
    ``fallback`` (``DropOldestCompactor``) decides instead.

    Attributes:
        fallback: what compacts when the summary request fails.
    """

    fallback: DropOldestCompactor = attrs.field(factory=DropOldestCompactor)

    def can_compact(
        self, messages: Sequence[Message], *, model: Model, settings: CompactionSettings
    ) -> bool:
        """Whether an overflow's ``compact`` would summarise anything: something before
        the cut point, or (when everything seems to fit) more turns than it keeps.

        Args:
            messages: the runtime context.
            model: the model (not needed to tell).
            settings: the ``compaction`` settings.
        """
        cut = cut_point(messages, settings.keep_recent_tokens)
        if cut is None:
            return False
        start = 1 if isinstance(messages[0], CompactionSummaryMessage) else 0
        return cut > start or len(split_turns(messages)) > settings.keep_recent_turns

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        model: Model,
        settings: CompactionSettings,
        ask: Ask,
        custom_instructions: str | None = None,
        reason: CompactionReason = "overflow",
    ) -> Compaction | None:
        """Summarise the older messages; fall back to dropping turns.

        ``custom_instructions`` (from ``AgentSession.compact``) are added to the
        summary request. ``reason`` is the compaction's: on ``"overflow"`` the context
        must shrink, so when ``compaction.keepRecentTokens`` would keep everything the
        last ``compaction.keepRecentTurns`` turns are kept instead; a ``"manual"``
        compaction keeps what the reference keeps (possibly everything, behind the
        summary).

        Args:
            messages: the runtime context.
            model: the model, for its context window.
            settings: the ``compaction`` settings.
            ask: asks the model for the summary (``Agent.complete``).
            custom_instructions: added to the summary request.
            reason: why compaction runs: ``"overflow"``, ``"threshold"`` or ``"manual"``.
        """
        cut = cut_point(messages, settings.keep_recent_tokens)
        if cut is None:
            return None
        start = 1 if isinstance(messages[0], CompactionSummaryMessage) else 0
        if cut <= start and reason == "overflow":
            # The estimate says everything fits, the provider says it does not: the
            # context must shrink, so keep only the last keepRecentTurns turns.
            turns = split_turns(messages)
            if len(turns) <= settings.keep_recent_turns:
                return None
            cut = len(messages) - len(_flatten(turns[-settings.keep_recent_turns :]))
        older = list(messages[:cut])
        recent = list(messages[cut:])
        request = SUMMARY_REQUEST
        if custom_instructions:
            request += f"\n\nAdditional focus: {custom_instructions}"
        reply = await ask([*older, UserMessage(request)], system_prompt=SUMMARY_SYSTEM_PROMPT)
        summary = reply.text.strip()
        if reply.stop_reason != "stop" or not summary:
            return await self.fallback.compact(messages, model=model, settings=settings)
        before = estimate_context_tokens(messages)
        kept: list[Message] = [CompactionSummaryMessage(summary, tokens_before=before), *recent]
        result = CompactionResult(
            summary=summary,
            tokens_before=before,
            tokens_after=estimate_tokens(kept),
            messages_removed=len(older),
            details=file_operations(older),
        )
        return Compaction(messages=tuple(kept), result=result)
