"""Compaction: shrink the runtime context, manually or when it overflowed (R-50).

``Compaction.run`` emits ``compaction_start`` and ``compaction_end`` around the
compactor; the summary (if the compactor made one) enters the context as a
``CompactionSummaryMessage`` and the session file gets a compaction entry whose
``firstKeptEntryId`` is the first message kept. The overflow path around it (drop
the error, compact, continue once) is the controller's (``trio_session._retry``);
the manual one, ``AgentSession.compact``, is ``Compaction.manual``: under the session's
busy bracket and a scope ``abort()`` cancels, as a prompt is.

Under ``retry.profile`` ``"pi-1.6"`` (SPEC R-56) an automatic compaction that would find
nothing to remove emits nothing (pi 1.6.0 checks before its ``compaction_start``), and
the compactor's summary request is retried under the retry policy
(``trio_session._retry.summary``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._agent.compactors import Compactor, Preparation, can_compact, prepare
from .._agent.loop import Agent
from .._core.classes import define
from .._core.errors import CompactionError, SessionBusyError
from .._core.events import CompactionEnd, CompactionReason, CompactionResult, CompactionStart
from .._core.messages import CompactionSummaryMessage, Message
from .._retry.classify import Classifier
from .._retry.controller import BUSY
from .._retry.decide import SettingsSource
from .._retry.policy import RetryPolicy
from .._settings.values import Settings
from .hub import EventHub

if TYPE_CHECKING:
    from .._retry.controller import PromptController
    from ..store._session_file import SessionFile

logger = logging.getLogger("trio_session")

#: Why a manual ``compact`` did nothing (the reference's words).
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
#: What a manual ``compact`` that ``abort()`` cancelled raises (pi's words).
COMPACTION_CANCELLED = "Compaction cancelled"


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class Compaction:
    """One session's compactions (``Recovery`` for the controller).

    Attributes:
        compactor: shrinks the context.
        agent: whose runtime context is compacted, and who asks the model for a summary.
        settings: the effective settings, read fresh (the ``compaction`` group).
        file: the session file the compaction is recorded in, if any.
        hub: where ``compaction_start`` and ``compaction_end`` go.
        classifier: the session's own classifier, if any (else the policy's choice,
            ``RetryPolicy.resolve``), for the summary request's retries.
        running: a compaction is in progress (``is_compacting``).
    """

    compactor: Compactor
    agent: Agent
    settings: SettingsSource
    file: SessionFile | None
    hub: EventHub
    classifier: Classifier | None = None
    running: bool = attrs.field(default=False, init=False)

    async def manual(
        self, control: PromptController, custom_instructions: str | None
    ) -> CompactionResult:
        """``AgentSession.compact``: abort a running prompt, then compact under the
        session's busy bracket and a scope ``abort()`` cancels, as a prompt runs.

        Args:
            control: the session's prompts (busy, closed, the scope ``abort()`` cancels).
            custom_instructions: for compactors whose ``compact`` takes them.

        Raises:
            CompactionError: nothing to compact, or ``abort()`` cancelled it.
            SessionBusyError: another task started a prompt while this one aborted.
            SessionClosedError: the session is closed.
        """
        control.refuse_closed()
        if control.running:
            await control.abort()
        if control.running:  # another task started a prompt meanwhile
            raise SessionBusyError(BUSY)
        result: CompactionResult | None = None
        control.start()
        try:
            with control.open_scope():
                result = await self.run("manual", custom_instructions=custom_instructions)
                if result is None:
                    raise CompactionError(NOTHING_TO_COMPACT)
        finally:
            await control.end()
        if result is None:  # abort() cancelled it
            raise CompactionError(COMPACTION_CANCELLED)
        return result

    def can_compact(self, *, without_last: bool) -> bool:
        """Whether the compactor would find anything to remove (R-56a).

        Args:
            without_last: ask about the context once its last message has left it.
        """
        messages = self.agent.messages
        context = messages[:-1] if without_last and messages else messages
        settings = self.settings.current
        if RetryPolicy.resolve(settings, self.classifier).pi16:  # R-56a: pi 1.6.0's question
            return self._prepare(context, settings, omitted=without_last) is not None
        return can_compact(
            self.compactor,
            context,
            model=self.agent.model,
            settings=settings.compaction,
        )

    @staticmethod
    def _prepare(
        messages: Sequence[Message], settings: Settings, *, omitted: bool
    ) -> Preparation | None:
        """pi 1.6.0's ``prepareCompaction`` of ``messages`` (``_compaction.prepare``),
        asked under ``"pi-1.6"`` whatever the compactor, as pi asks it before its
        extensions' ``session_before_compact``."""
        return prepare(messages, settings.compaction.keep_recent_tokens, omitted=omitted)

    async def compact(
        self, reason: CompactionReason, *, will_retry: bool
    ) -> CompactionResult | None:
        """The overflow path's compaction (``Recovery.compact``).

        Args:
            reason: ``"overflow"``.
            will_retry: whether the run continues after it (its ``compaction_end`` says so).
        """
        return await self.run(reason, will_retry=will_retry)

    async def run(
        self,
        reason: CompactionReason,
        *,
        will_retry: bool = False,
        custom_instructions: str | None = None,
    ) -> CompactionResult | None:
        """Compact the runtime context between ``compaction_start`` and ``compaction_end``.

        Args:
            reason: ``"manual"``, ``"threshold"`` or ``"overflow"``.
            will_retry: whether the run continues after it.
            custom_instructions: what the summary should focus on, for compactors that
                take them.

        Returns:
            What the compaction did, or ``None`` when the compactor found nothing to
                remove; a failure is raised after its ``compaction_end``.
        """
        agent = self.agent
        settings = self.settings.current
        pi16 = RetryPolicy.resolve(settings, self.classifier).pi16
        prepared = None
        if pi16:  # R-56a: pi 1.6.0's cut, whatever the compactor; an overflow's failure
            # has left the context when the run goes on after the compaction
            omitted = reason == "overflow" and will_retry
            prepared = self._prepare(agent.messages, settings, omitted=omitted)
            if prepared is None and reason != "manual":
                return None  # pi 1.6.0 finds nothing to summarize before it starts
        nothing = pi16 and prepared is None  # manual: refused between start and end
        ask = agent.complete
        if pi16:  # R-56f: the summary request is retried as a run is
            from .._retry.summary import RetryingAsk  # pi-1.6 only: the seed never imports it

            ask = RetryingAsk(
                agent.complete,
                lambda: RetryPolicy.resolve(self.settings.current, self.classifier),
                self.hub.emit,
                reason,
                agent.model.context_window,
            )
        self.running = True
        self.hub.emit(CompactionStart(reason=reason))
        if nothing:  # R-56a, manual: pi 1.6.0 refuses between its start and end events
            self.running = False
            refused = f"Compaction failed: {NOTHING_TO_COMPACT}"
            self.hub.emit(CompactionEnd(reason, None, False, False, error_message=refused))
            return None
        try:
            compaction = await self.compactor.compact(
                tuple(agent.messages),
                model=agent.model,
                settings=settings.compaction,
                ask=ask,
                **_instructions(self.compactor, custom_instructions),
                **_reason(self.compactor, reason),
                **_prepared(self.compactor, prepared),
            )
        except trio.Cancelled:
            self.hub.emit(CompactionEnd(reason, result=None, aborted=True, will_retry=False))
            raise
        except BaseException as exc:
            error = (
                f"Compaction failed: {exc}"
                if reason == "manual"
                else f"Context overflow recovery failed: {exc}"
            )
            self.hub.emit(CompactionEnd(reason, None, False, False, error_message=error))
            raise
        finally:
            self.running = False
        if compaction is None:
            failed = f"Compaction failed: {NOTHING_TO_COMPACT}" if reason == "manual" else None
            self.hub.emit(CompactionEnd(reason, None, False, False, error_message=failed))
            return None
        agent.messages[:] = compaction.messages
        result = compaction.result
        file = self.file
        if file is not None:
            kept = next(
                (i for m in compaction.messages if (i := file.entry_id_of(m)) is not None), None
            )
            kept = file.kept_from(kept) if kept is not None else None
            result = attrs.evolve(result, first_kept_entry_id=kept)
            first = compaction.messages[0] if compaction.messages else None
            file.append_compaction_nowait(
                result,
                first_kept_entry_id=kept,
                timestamp_ms=first.timestamp
                if isinstance(first, CompactionSummaryMessage)
                else None,
            )
        self.hub.emit(CompactionEnd(reason, result=result, aborted=False, will_retry=will_retry))
        return result


def _reason(compactor: Compactor, reason: CompactionReason) -> dict[str, Any]:
    """The compaction's ``reason`` as a keyword, for compactors whose ``compact`` takes it."""
    try:
        parameters = inspect.signature(compactor.compact).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return {}
    return {"reason": reason} if "reason" in parameters else {}


def _instructions(compactor: Compactor, custom_instructions: str | None) -> dict[str, Any]:
    """``custom_instructions`` as a keyword, for compactors whose ``compact`` takes it."""
    if custom_instructions is None:
        return {}
    try:
        parameters = inspect.signature(compactor.compact).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return {}
    if "custom_instructions" not in parameters:
        logger.warning(
            "compactor %r takes no custom_instructions; compacting without them", compactor
        )
        return {}
    return {"custom_instructions": custom_instructions}


def _prepared(compactor: Compactor, prepared: Preparation | None) -> dict[str, Any]:
    """pi 1.6.0's cut as the ``prepared`` keyword, for compactors whose ``compact`` takes
    it (R-56a, R-56g): the default compactor then follows it, split turns included."""
    if prepared is None:
        return {}
    try:
        parameters = inspect.signature(compactor.compact).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return {}
    return {"prepared": prepared} if "prepared" in parameters else {}
