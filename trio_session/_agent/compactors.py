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

from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

from .._core.classes import frozen
from .._core.events import CompactionReason, CompactionResult
from .._core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    Message,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._core.stats import estimate_context_tokens
from .._core.stats import estimate_tokens as message_tokens
from .._settings.values import CompactionSettings
from ..providers._base import Model

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
    (``trio_session._core.stats.estimate_tokens`` per message); the cut moves forward to the
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


def _starts_turn(message: Message) -> bool:
    """Whether a turn starts at ``message`` (the reference's ``isTurnStartMessage``)."""
    return isinstance(
        message,
        (
            UserMessage,
            BashExecutionMessage,
            CustomMessage,
            BranchSummaryMessage,
            CompactionSummaryMessage,
        ),
    )


@frozen
class Preparation:
    """pi 1.6.0's cut of a context (``prepareCompaction``): what is summarised, what kept.

    Attributes:
        history: the messages summarised by the history request — a previous
            compaction's summary first, when there is one.
        turn_prefix: on a split turn, the start of the turn the cut falls in, summarised
            by a request of its own; empty otherwise.
        kept: the messages kept verbatim after the new summary.
    """

    history: tuple[Message, ...]
    turn_prefix: tuple[Message, ...]
    kept: tuple[Message, ...]

    @property
    def split_turn(self) -> bool:
        """Whether the cut falls inside a turn (a second, turn-prefix, summary request)."""
        return bool(self.turn_prefix)


def prepare(
    messages: Sequence[Message], keep_recent_tokens: int, *, omitted: bool = False
) -> Preparation | None:
    """pi 1.6.0's ``prepareCompaction`` on a runtime context; ``None``: nothing to summarise.

    The cut is ``findCutPoint``'s: walking back from the newest message until about
    ``keep_recent_tokens`` tokens are kept, then forward to the nearest message a context
    may start with (not a tool result; the last such message if none follows); when
    everything fits, the cut is at the first message, so nothing is summarised. When the
    cut falls inside a turn (not at a message that starts one), the turn's start — from
    its user message to the cut — is summarised on its own (a *split turn*) and the
    history before the turn by the usual request.

    ``omitted`` is an overflow's case: its failed reply has just left the context (pi
    1.6.0 context-edits it away). pi's cut then counts that reply as the first entry
    kept when the budget was used up by the last message alone (its "recovery omission
    suffix"), so the whole last turn is summarised as a split turn and nothing is kept.

    Args:
        messages: the runtime context (a previous compaction's summary first, if any).
        keep_recent_tokens: ``compaction.keepRecentTokens``.
        omitted: an overflow's failed reply has just been left out after ``messages``.
    """
    start = 1 if messages and isinstance(messages[0], CompactionSummaryMessage) else 0
    valid = [i for i in range(start, len(messages)) if _is_cut_point(messages[i])]
    if not valid:
        return None
    cut, exceeded, kept = valid[0], False, 0
    for index in range(len(messages) - 1, start - 1, -1):
        kept += message_tokens(messages[index])
        if kept >= keep_recent_tokens:
            exceeded = True
            cut = next((c for c in valid if c >= index), valid[-1])
            break
    if omitted and exceeded and cut == len(messages) - 1:
        cut = len(messages)  # pi's first kept entry is the failed reply it left out
    turn_start = None
    if cut == len(messages) or not _starts_turn(messages[cut]):
        turn_start = next(
            (
                i
                for i in range(min(cut, len(messages) - 1), start - 1, -1)
                if _starts_turn(messages[i])
            ),
            None,
        )
    history_end = cut if turn_start is None else turn_start
    prefix = () if turn_start is None else tuple(messages[turn_start:cut])
    if history_end <= start and not prefix:
        return None
    return Preparation(tuple(messages[:history_end]), prefix, tuple(messages[cut:]))


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
TURN_PREFIX_REQUEST = (
    "The messages above are the start of a turn whose later messages are kept "
    "separately. Summarise the user's request and the progress shown above, so that the "
    "turn can be continued from the later messages. Write only the summary."
)
#: What joins a split turn's two summaries (pi 1.6.0's words).
SPLIT_TURN_HEADING = "\n\n---\n\n**Turn Context (split turn):**\n\n"
#: A split turn's history when there is none to summarise (pi 1.6.0's words).
NO_PRIOR_HISTORY = "No prior history."


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
        prepared: Preparation | None = None,
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
            prepared: pi 1.6.0's cut (``prepare``), which the session passes under
                ``retry.profile`` ``"pi-1.6"``: it is followed as it is, a split turn's
                start summarised by a request of its own, and the result carries pi
                1.6.0's ``estimatedTokensAfter`` and the requests' ``usage``.
        """
        if prepared is not None:
            return await self._compact_prepared(
                messages,
                prepared,
                model=model,
                settings=settings,
                ask=ask,
                custom_instructions=custom_instructions,
            )
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

    async def _compact_prepared(
        self,
        messages: Sequence[Message],
        prepared: Preparation,
        *,
        model: Model,
        settings: CompactionSettings,
        ask: Ask,
        custom_instructions: str | None,
    ) -> Compaction | None:
        """pi 1.6.0's compaction of ``prepared``: the history summarised, then (on a
        split turn) the turn's start, the two joined as pi joins them."""
        focus = f"\n\nAdditional focus: {custom_instructions}" if custom_instructions else ""
        history = prepared.history
        replies: list[AssistantMessage] = []
        if history and not (len(history) == 1 and isinstance(history[0], CompactionSummaryMessage)):
            replies.append(await self._ask(ask, history, SUMMARY_REQUEST + focus))
        if prepared.split_turn:
            replies.append(await self._ask(ask, prepared.turn_prefix, TURN_PREFIX_REQUEST + focus))
        texts = [reply.text.strip() for reply in replies]
        if any(r.stop_reason != "stop" for r in replies) or not all(texts):
            return await self.fallback.compact(messages, model=model, settings=settings)
        summary = texts[0]
        if prepared.split_turn:
            previous = history[0] if history else None
            before_turn = (
                texts[0]
                if len(texts) == 2
                else previous.summary
                if isinstance(previous, CompactionSummaryMessage)
                else NO_PRIOR_HISTORY
            )
            summary = before_turn + SPLIT_TURN_HEADING + texts[-1]
        before = estimate_context_tokens(messages)
        kept: list[Message] = [
            CompactionSummaryMessage(summary, tokens_before=before),
            *prepared.kept,
        ]
        summarised = (*history, *prepared.turn_prefix)
        result = CompactionResult(
            summary=summary,
            tokens_before=before,
            tokens_after=estimate_tokens(kept),
            messages_removed=len(summarised),
            details=file_operations(summarised),
            estimated_tokens_after=sum(message_tokens(m) for m in kept),
            usage=combined_usage(r.usage for r in replies),
        )
        return Compaction(messages=tuple(kept), result=result)

    @staticmethod
    async def _ask(ask: Ask, messages: Sequence[Message], request: str) -> AssistantMessage:
        return await ask([*messages, UserMessage(request)], system_prompt=SUMMARY_SYSTEM_PROMPT)


def combined_usage(usages: Iterable[Usage]) -> Usage:
    """Several requests' usage added up, costs too (pi 1.6.0's ``combineUsage``)."""
    total = Usage()
    for usage in usages:
        total = Usage(
            input=total.input + usage.input,
            output=total.output + usage.output,
            cache_read=total.cache_read + usage.cache_read,
            cache_write=total.cache_write + usage.cache_write,
            cost=Cost(
                input=total.cost.input + usage.cost.input,
                output=total.cost.output + usage.cost.output,
                cache_read=total.cost.cache_read + usage.cost.cache_read,
                cache_write=total.cost.cache_write + usage.cost.cache_write,
                total=total.cost.total + usage.cost.total,
                total_from_provider=usage.cost.total_from_provider,
            ),
            reasoning=usage.reasoning
            if total.reasoning is None
            else total.reasoning + (usage.reasoning or 0),
        )
    return total
